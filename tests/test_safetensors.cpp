// Tests for the safetensors format layer (nn/safetensors.h) and crash-safe
// file writing (nn/atomic_file.h).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "nn/atomic_file.h"
#include "nn/safetensors.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace phasor::test;
namespace fs = std::filesystem;
using phasor::safetensors::Contents;
using phasor::safetensors::Record;

namespace {

// A file with the given header text, unpadded, followed by `data`.
std::string file_with_header(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

std::string parse_error(const std::string& file) {
  std::string message = expect_error([&] { phasor::safetensors::parse(file, "model.safetensors"); });
  CHECK_MESSAGE(message.rfind("model.safetensors: ", 0) == 0, message);
  return message;
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string out(values.size() * sizeof(float), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

Contents sample_contents() {
  Contents contents;
  contents.metadata = {{"format", "phasor-model"}, {"config", "{\"d_model\": 4}"}};
  contents.tensors.push_back({"tok_emb.weight", Record{"F32", {2, 3}, float_bytes({1, 2, 3, 4, 5, 6})}});
  contents.tensors.push_back({"flags", Record{"BOOL", {3}, std::string("\x01\x00\x01", 3)}});
  contents.tensors.push_back({"step", Record{"I64", {}, le64(42)}});
  contents.tensors.push_back({"empty", Record{"F64", {0, 5}, ""}});
  return contents;
}

// A fresh folder under the suite's scratch folder, removed at the end of the test.
struct TempFolder {
  fs::path path = fresh_folder(scratch_root("safetensors", /*remove_at_exit=*/true) / "folder");
  ~TempFolder() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void check_same(const Contents& a, const Contents& b) {
  CHECK(a.metadata == b.metadata);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& entry : a.tensors) {
    const auto& record = entry.second;
    const std::string& name = entry.first;
    const Record* other = b.find(name);
    REQUIRE_MESSAGE(other != nullptr, name);
    CHECK(other->dtype == record.dtype);
    CHECK(other->shape == record.shape);
    CHECK(other->bytes == record.bytes);
  }
}

}  // namespace

TEST_CASE("safetensors: serialize then parse gives back the same contents") {
  Contents original = sample_contents();
  std::string file = phasor::safetensors::serialize(original);
  check_same(original, phasor::safetensors::parse(file, "round_trip"));
  CHECK(phasor::safetensors::parse(file, "x").tensors.front().first == "empty");  // sorted by name
  CHECK(phasor::safetensors::serialize(phasor::safetensors::parse(file, "x")) == file);
}

TEST_CASE("safetensors: a tiny file is byte-for-byte what the format prescribes") {
  Contents contents;
  contents.metadata = {{"format", "pt"}};
  contents.tensors.push_back({"b", Record{"BOOL", {}, std::string("\x01", 1)}});
  contents.tensors.push_back({"a", Record{"F32", {2}, float_bytes({1.0f, -2.0f})}});

  // 138 bytes of JSON, padded with 6 spaces to 144 = 0x90 so the data starts 8-byte aligned.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BOOL","shape":[],"data_offsets":[8,9]}})";
  REQUIRE(header.size() == 138);
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header + "      " +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) +  // 1.0f, -2.0f
                               std::string("\x01", 1);
  CHECK(phasor::safetensors::serialize(contents) == expected);
}

TEST_CASE("safetensors: serialize refuses records that break the format") {
  Contents contents;
  contents.tensors.push_back({"w", Record{"F32", {2, 2}, std::string(12, '\0')}});
  CHECK(expect_error([&] { phasor::safetensors::serialize(contents, "out.safetensors"); }) ==
        "out.safetensors: tensor 'w' has 12 bytes, which do not match dtype F32 and shape [2, 2]");
  contents.tensors[0].second = Record{"F31", {}, "abcd"};
  CHECK(expect_error([&] { phasor::safetensors::serialize(contents); }).find("unknown dtype 'F31'") != std::string::npos);
  contents.tensors[0].second = Record{"F32", {-1}, ""};
  CHECK(expect_error([&] { phasor::safetensors::serialize(contents); }).find("negative dimension") != std::string::npos);
  contents.tensors = {{"w", Record{"U8", {1}, "a"}}, {"w", Record{"U8", {1}, "b"}}};
  CHECK(expect_error([&] { phasor::safetensors::serialize(contents); }).find("used twice") != std::string::npos);
}

TEST_CASE("safetensors: malformed files are refused with a clear error") {
  const std::string f32_2x2 = R"("dtype":"F32","shape":[2,2])";
  auto contains = [](const std::string& message, const std::string& phrase) {
    CHECK_MESSAGE(message.find(phrase) != std::string::npos, message);
  };

  SUBCASE("truncated") { contains(parse_error("abc"), "too short for the 8-byte header length"); }
  SUBCASE("header length past the end") {
    contains(parse_error(le64(100) + "{}"), "header length 100 is past the end of the file");
  }
  SUBCASE("huge header length") {
    contains(parse_error(le64(uint64_t(1) << 63) + "{}"), "is past the end of the file");
    contains(parse_error(le64(~uint64_t(0)) + "{}"), "is past the end of the file");
  }
  SUBCASE("bad JSON") {
    contains(parse_error(file_with_header(R"({"a":)")), "header is not valid JSON");
    contains(parse_error(file_with_header(R"({"a":{"shape":[1e400]}})")), "header is not valid JSON");  // found by fuzzing
  }
  SUBCASE("header not an object") {
    contains(parse_error(file_with_header("[1, 2]")), "header is not a JSON object");
    contains(parse_error(file_with_header(" {}")), "header is not a JSON object");
    contains(parse_error(file_with_header("")), "header is not a JSON object");
  }
  SUBCASE("metadata that is not a map of strings") {
    contains(parse_error(file_with_header(R"({"__metadata__":{"n":1}})")), "entry 'n' must be a string, got 1");
    contains(parse_error(file_with_header(R"({"__metadata__":[]})")), "must be an object of strings");
  }
  SUBCASE("tensor entry not an object or missing a field") {
    contains(parse_error(file_with_header(R"({"x":3})")), "tensor 'x' entry must be a JSON object");
    contains(parse_error(file_with_header(R"({"x":{"dtype":"F32","shape":[]}})")), "tensor 'x' has no data_offsets");
  }
  SUBCASE("unknown dtype") {
    contains(parse_error(file_with_header(R"({"x":{"dtype":"F31","shape":[],"data_offsets":[0,4]}})", "abcd")),
             "tensor 'x' has unknown dtype 'F31'");
  }
  SUBCASE("negative or non-integer shape") {
    for (std::string shape : {"[-1]", "[1.5]", "[\"2\"]", "[1e30]", "[18446744073709551615]"}) {
      std::string header = R"({"x":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,0]}})";
      contains(parse_error(file_with_header(header)), "shape must hold non-negative integers");
    }
    contains(parse_error(file_with_header(R"({"x":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})")),
             "shape must be an array");
  }
  SUBCASE("bad data_offsets") {
    contains(parse_error(file_with_header("{\"x\":{" + f32_2x2 + R"(,"data_offsets":[0,16]}})", "short")),
             "data_offsets [0, 16] are past the end of the data section (5 bytes)");
    contains(parse_error(file_with_header("{\"x\":{" + f32_2x2 + R"(,"data_offsets":[16,0]}})")),
             "end before they begin");
    contains(parse_error(file_with_header("{\"x\":{" + f32_2x2 + R"(,"data_offsets":[0,-16]}})")),
             "data_offsets must be [begin, end]");
    contains(parse_error(file_with_header("{\"x\":{" + f32_2x2 + R"(,"data_offsets":[0]}})")),
             "data_offsets must be [begin, end]");
  }
  SUBCASE("shape and byte count mismatch") {
    std::string file = file_with_header("{\"x\":{" + f32_2x2 + R"(,"data_offsets":[0,12]}})", std::string(12, 'z'));
    CHECK(parse_error(file) ==
          "model.safetensors: tensor 'x' data_offsets [0, 12] do not match dtype F32 and shape [2, 2] (16 bytes)");
    std::string huge = R"({"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})";
    contains(parse_error(file_with_header(huge)), "is too large");
  }
  SUBCASE("overlapping tensors") {
    std::string header = R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})";
    contains(parse_error(file_with_header(header, std::string(12, 'z'))), "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    std::string inside = R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})";
    contains(parse_error(file_with_header(inside, std::string(8, 'z'))), "overlap");
  }
  SUBCASE("gaps in the data section") {
    std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})";
    contains(parse_error(file_with_header(header, std::string(12, 'z'))),
             "gap in the data section: bytes [4, 8) belong to no tensor");
    std::string trailing = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
    contains(parse_error(file_with_header(trailing, std::string(6, 'z'))),
             "gap in the data section: bytes [4, 6) belong to no tensor");
  }
  SUBCASE("control characters in names stay on one line") {
    std::string message = parse_error(file_with_header("{\"a\\nb\":3}"));
    CHECK(message.find('\n') == std::string::npos);
    contains(message, "tensor 'a\\x0ab'");
  }
}

TEST_CASE("safetensors: every truncation or single-byte change is refused or parsed, never a crash") {
  const std::string file = phasor::safetensors::serialize(sample_contents());
  for (size_t length = 0; length < file.size(); ++length) {
    CHECK_THROWS_AS(phasor::safetensors::parse(std::string_view(file).substr(0, length), "cut"), phasor::Error);
  }
  for (size_t i = 0; i < file.size(); ++i) {
    std::string changed = file;
    changed[i] = static_cast<char>(changed[i] ^ 0x5a);
    try {
      phasor::safetensors::parse(changed, "changed");
    } catch (const phasor::Error&) {
    }
  }
}

TEST_CASE("safetensors: save then load through the file system") {
  TempFolder folder;
  std::string path = folder.file("model.safetensors");
  phasor::safetensors::save(path, sample_contents());
  check_same(sample_contents(), phasor::safetensors::load(path));
  CHECK(temporaries(folder.path).empty());

  std::string missing = folder.file("missing.safetensors");
  std::string message = expect_error([&] { phasor::safetensors::load(missing); });
  CHECK(message == "cannot open '" + missing + "': No such file or directory");
}

TEST_CASE("atomic write: a failure part way leaves the previous file untouched") {
  TempFolder folder;
  std::string path = folder.file("model.safetensors");
  phasor::write_file_atomic(path, "previous contents");
  const std::string next(100000, 'n');
  for (size_t after_bytes : {size_t(0), size_t(1), size_t(7), size_t(4096), size_t(65536), next.size() - 1}) {
    CAPTURE(after_bytes);
    WriteFault fault(after_bytes);
    std::string message = expect_error([&] { phasor::write_file_atomic(path, next); });
    CHECK(message.find(path) != std::string::npos);
    CHECK(message.find("No space left on device") != std::string::npos);
    CHECK(phasor::read_file_bytes(path) == "previous contents");
    CHECK(temporaries(folder.path).empty());
  }
  {
    WriteFault fault(next.size());  // exactly enough room
    phasor::write_file_atomic(path, next);
  }
  CHECK(phasor::read_file_bytes(path) == next);
  CHECK(temporaries(folder.path).empty());
}

TEST_CASE("atomic write: an unwritable location gives an error naming the path") {
  TempFolder folder;
  std::string in_missing_folder = folder.file("no_such_folder/model.safetensors");
  std::string message = expect_error([&] { phasor::write_file_atomic(in_missing_folder, "x"); });
  CHECK(message.find(in_missing_folder) != std::string::npos);
  CHECK(message.find("No such file or directory") != std::string::npos);

  // Even root cannot create a file beneath a regular file.
  phasor::write_file_atomic(folder.file("somefile"), "x");
  std::string under_file = folder.file("somefile/model.safetensors");
  message = expect_error([&] { phasor::safetensors::save(under_file, sample_contents()); });
  CHECK(message.find(under_file) != std::string::npos);
  CHECK(message.find("Not a directory") != std::string::npos);
  CHECK(phasor::read_file_bytes(folder.file("somefile")) == "x");
}

TEST_CASE("read_file_bytes: a missing or unreadable file is an error naming it") {
  TempFolder folder;
  std::string message = expect_error([&] { phasor::read_file_bytes(folder.file("nope")); });
  CHECK(message == "cannot open '" + folder.file("nope") + "': No such file or directory");
  message = expect_error([&] { phasor::read_file_bytes(folder.path.string()); });
  CHECK(message == "cannot read '" + folder.path.string() + "': Is a directory");
}
