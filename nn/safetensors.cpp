#include "nn/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor::safetensors {
namespace {

using Json = nlohmann::json;
// Serializing with insertion order lets "__metadata__" come first and each
// entry read dtype, shape, data_offsets, as the reference implementation writes.
using OrderedJson = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";
// Same cap as the reference implementation: bounds the work and memory a
// hostile file can demand before any of it is validated.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kLengthPrefixBytes = 8;

struct DtypeSize {
  std::string_view name;
  size_t bytes;
};
// The reference implementation's dtypes, less its sub-byte float formats.
constexpr std::array<DtypeSize, 16> kDtypeSizes{{
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"U16", 2}, {"I16", 2}, {"F16", 2}, {"BF16", 2},
    {"U32", 4}, {"I32", 4}, {"F32", 4},
    {"U64", 8}, {"I64", 8}, {"F64", 8}, {"C64", 8},
}};

// Names come from untrusted files: keep messages on one line and printable.
std::string printable(std::string_view text) { return "'" + escape_control_characters(text) + "'"; }

std::string format_shape(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::string format_range(uint64_t begin, uint64_t end) {
  std::ostringstream os;  // (string concatenation here trips a GCC 12 -Wrestrict false positive)
  os << '[' << begin << ", " << end << ']';
  return os.str();
}

// product(shape) * element_bytes, or nullopt if it does not fit in 64 bits.
std::optional<uint64_t> byte_count(const std::vector<int64_t>& shape, size_t element_bytes) {
  uint64_t total = element_bytes;
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

// Describes a JSON value without dumping it: dumping recurses, and a hostile
// header can nest arrays deep enough to exhaust the stack.
std::string describe(const Json& value) {
  if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
  return std::string("a JSON ") + value.type_name();
}

// ---- serialize ----

void check_record(const std::string& file, const std::string& name, const Record& record) {
  size_t element_bytes = dtype_size(record.dtype);
  PHASOR_CHECK(element_bytes != 0, file, ": tensor ", printable(name), " has unknown dtype ", printable(record.dtype));
  for (int64_t dim : record.shape) {
    PHASOR_CHECK(dim >= 0, file, ": tensor ", printable(name), " has a negative dimension in shape ",
                 format_shape(record.shape));
  }
  std::optional<uint64_t> expected = byte_count(record.shape, element_bytes);
  PHASOR_CHECK(expected && *expected == record.bytes.size(), file, ": tensor ", printable(name), " has ",
               record.bytes.size(), " bytes, which do not match dtype ", record.dtype, " and shape ",
               format_shape(record.shape));
}

using NamedRecord = std::pair<std::string, Record>;

std::vector<const NamedRecord*> checked_and_sorted_by_name(const Contents& contents, const std::string& file) {
  std::vector<const NamedRecord*> sorted;
  for (const NamedRecord& entry : contents.tensors) {
    PHASOR_CHECK(entry.first != kMetadataKey, file, ": '", kMetadataKey, "' is reserved, not a tensor name");
    check_record(file, entry.first, entry.second);
    sorted.push_back(&entry);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    PHASOR_CHECK(sorted[i - 1]->first != sorted[i]->first, file, ": tensor name ", printable(sorted[i]->first),
                 " is used twice");
  }
  return sorted;
}

OrderedJson build_header(const Contents& contents, const std::vector<const NamedRecord*>& sorted) {
  OrderedJson header = OrderedJson::object();
  if (!contents.metadata.empty()) header[kMetadataKey] = contents.metadata;
  uint64_t offset = 0;
  for (const NamedRecord* entry : sorted) {
    const Record& record = entry->second;
    OrderedJson info = OrderedJson::object();
    info["dtype"] = record.dtype;
    info["shape"] = record.shape;
    info["data_offsets"] = {offset, offset + record.bytes.size()};
    header[entry->first] = std::move(info);
    offset += record.bytes.size();
  }
  return header;
}

std::string dump_padded(const OrderedJson& header, const std::string& file) {
  std::string text;
  try {
    text = header.dump();
  } catch (const OrderedJson::type_error&) {
    fail(file, ": a tensor name or metadata entry is not valid UTF-8");
  }
  // Padding keeps the data section 8-byte aligned, as the reference does.
  text.append((kLengthPrefixBytes - text.size() % kLengthPrefixBytes) % kLengthPrefixBytes, ' ');
  return text;
}

void append_u64_le(std::string& out, uint64_t value) {
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// ---- parse ----

uint64_t read_u64_le(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) value |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return value;
}

struct Sections {
  std::string_view header;
  std::string_view data;
};

Sections split_sections(std::string_view file, const std::string& name) {
  PHASOR_CHECK(file.size() >= kLengthPrefixBytes, name, ": file is ", file.size(),
               " bytes, too short for the 8-byte header length");
  uint64_t header_bytes = read_u64_le(file);
  uint64_t available = file.size() - kLengthPrefixBytes;
  PHASOR_CHECK(header_bytes <= available, name, ": header length ", header_bytes, " is past the end of the file (",
               available, " bytes follow the length)");
  PHASOR_CHECK(header_bytes <= kMaxHeaderBytes, name, ": header length ", header_bytes, " exceeds the limit of ",
               kMaxHeaderBytes, " bytes");
  std::string_view rest = file.substr(kLengthPrefixBytes);
  return {rest.substr(0, header_bytes), rest.substr(header_bytes)};
}

Json parse_header_json(std::string_view header, const std::string& name) {
  // The reference refuses anything else up front, including leading whitespace.
  PHASOR_CHECK(!header.empty() && header.front() == '{', name,
               ": header is not a JSON object (it must start with '{')");
  Json parsed;
  try {
    parsed = Json::parse(header.begin(), header.end());
  } catch (const Json::parse_error& e) {
    fail(name, ": header is not valid JSON (error at byte ", e.byte, " of the header)");
  } catch (const Json::exception&) {  // out_of_range: a number too large for a double, such as 1e400
    fail(name, ": header is not valid JSON (a number is out of range)");
  }
  PHASOR_CHECK(parsed.is_object(), name, ": header is not a JSON object");
  return parsed;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& name) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) return metadata;
  PHASOR_CHECK(value.is_object(), name, ": ", kMetadataKey, " must be an object of strings, got ", describe(value));
  for (const auto& [key, entry] : value.items()) {
    PHASOR_CHECK(entry.is_string(), name, ": ", kMetadataKey, " entry ", printable(key), " must be a string, got ",
                 describe(entry));
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

// Where a tensor's bytes lie within the data section.
struct Span {
  std::string name;
  uint64_t begin, end;
};

const Json& required_field(const Json& info, const char* field, const std::string& file, const std::string& tensor) {
  auto it = info.find(field);
  PHASOR_CHECK(it != info.end(), file, ": tensor ", printable(tensor), " has no ", field);
  return *it;
}

std::string parse_dtype(const Json& value, const std::string& file, const std::string& tensor) {
  PHASOR_CHECK(value.is_string(), file, ": tensor ", printable(tensor), " dtype must be a string, got ",
               describe(value));
  const std::string& dtype = value.get_ref<const std::string&>();
  PHASOR_CHECK(dtype_size(dtype) != 0, file, ": tensor ", printable(tensor), " has unknown dtype ", printable(dtype));
  return dtype;
}

std::vector<int64_t> parse_shape(const Json& value, const std::string& file, const std::string& tensor) {
  PHASOR_CHECK(value.is_array(), file, ": tensor ", printable(tensor), " shape must be an array, got ",
               describe(value));
  std::vector<int64_t> shape;
  for (const Json& dim : value) {
    // Non-negative JSON integers parse as unsigned; negatives and fractions do not.
    bool valid = dim.is_number_unsigned() && dim.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max());
    PHASOR_CHECK(valid, file, ": tensor ", printable(tensor), " shape must hold non-negative integers, got ",
                 describe(dim));
    shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  return shape;
}

Span parse_offsets(const Json& value, uint64_t data_bytes, const std::string& file, const std::string& tensor) {
  bool valid = value.is_array() && value.size() == 2 && value[0].is_number_unsigned() && value[1].is_number_unsigned();
  PHASOR_CHECK(valid, file, ": tensor ", printable(tensor),
               " data_offsets must be [begin, end] with non-negative integers");
  uint64_t begin = value[0].get<uint64_t>(), end = value[1].get<uint64_t>();
  PHASOR_CHECK(begin <= end, file, ": tensor ", printable(tensor), " data_offsets ", format_range(begin, end),
               " end before they begin");
  PHASOR_CHECK(end <= data_bytes, file, ": tensor ", printable(tensor), " data_offsets ", format_range(begin, end),
               " are past the end of the data section (", data_bytes, " bytes)");
  return {tensor, begin, end};
}

void check_size_matches(const Record& record, const Span& span, const std::string& file) {
  std::optional<uint64_t> expected = byte_count(record.shape, dtype_size(record.dtype));
  PHASOR_CHECK(expected, file, ": tensor ", printable(span.name), " shape ", format_shape(record.shape),
               " is too large");
  PHASOR_CHECK(*expected == span.end - span.begin, file, ": tensor ", printable(span.name), " data_offsets ",
               format_range(span.begin, span.end), " do not match dtype ", record.dtype, " and shape ",
               format_shape(record.shape), " (", *expected, " bytes)");
}

// Tensors must tile the data section exactly, as the reference requires:
// an overlap would alias two tensors, a gap hides bytes no tensor accounts for.
void check_tiling(std::vector<Span> spans, uint64_t data_bytes, const std::string& file) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t covered = 0;
  const Span* previous = nullptr;
  for (const Span& span : spans) {
    PHASOR_CHECK(span.begin >= covered, file, ": tensors ", printable(previous ? previous->name : ""), " ",
                 format_range(previous ? previous->begin : 0, covered), " and ", printable(span.name), " ",
                 format_range(span.begin, span.end), " overlap");
    PHASOR_CHECK(span.begin == covered, file, ": gap in the data section: bytes [", covered, ", ", span.begin,
                 ") belong to no tensor");
    covered = span.end;
    previous = &span;
  }
  PHASOR_CHECK(covered == data_bytes, file, ": gap in the data section: bytes [", covered, ", ", data_bytes,
               ") belong to no tensor");
}

}  // namespace

size_t dtype_size(std::string_view dtype) {
  for (const DtypeSize& entry : kDtypeSizes) {
    if (entry.name == dtype) return entry.bytes;
  }
  return 0;
}

const Record* Contents::find(const std::string& name) const {
  for (const auto& [tensor_name, record] : tensors) {
    if (tensor_name == name) return &record;
  }
  return nullptr;
}

std::string serialize(const Contents& contents, const std::string& name_for_errors) {
  std::vector<const NamedRecord*> sorted = checked_and_sorted_by_name(contents, name_for_errors);
  std::string header = dump_padded(build_header(contents, sorted), name_for_errors);
  std::string file;
  append_u64_le(file, header.size());
  file += header;
  for (const NamedRecord* entry : sorted) file += entry->second.bytes;
  return file;
}

Contents parse(std::string_view file, const std::string& name_for_errors) {
  const std::string& name = name_for_errors;
  Sections sections = split_sections(file, name);
  Json header = parse_header_json(sections.header, name);
  Contents contents;
  std::vector<Span> spans;
  for (const auto& [tensor, info] : header.items()) {
    if (tensor == kMetadataKey) {
      contents.metadata = parse_metadata(info, name);
      continue;
    }
    PHASOR_CHECK(info.is_object(), name, ": tensor ", printable(tensor), " entry must be a JSON object, got ",
                 describe(info));
    Record record;
    record.dtype = parse_dtype(required_field(info, "dtype", name, tensor), name, tensor);
    record.shape = parse_shape(required_field(info, "shape", name, tensor), name, tensor);
    Span span = parse_offsets(required_field(info, "data_offsets", name, tensor), sections.data.size(), name, tensor);
    check_size_matches(record, span, name);
    spans.push_back(span);
    contents.tensors.emplace_back(tensor, std::move(record));
  }
  check_tiling(spans, sections.data.size(), name);
  // Copy bytes only once the whole layout is known to be sound.
  for (size_t i = 0; i < spans.size(); ++i) {
    contents.tensors[i].second.bytes = std::string(sections.data.substr(spans[i].begin, spans[i].end - spans[i].begin));
  }
  return contents;
}

Contents load(const std::string& path) { return parse(read_file_bytes(path), path); }

void save(const std::string& path, const Contents& contents) { write_file_atomic(path, serialize(contents, path)); }

}  // namespace phasor::safetensors
