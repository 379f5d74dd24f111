#pragma once
// The safetensors file format (https://github.com/huggingface/safetensors), kept
// apart from the Tensor class: records are a dtype string, a shape and raw
// little-endian bytes. A later layer converts Tensors to and from them.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace phasor::safetensors {

// One tensor as stored: dtype is the safetensors name ("F32", "F64", "I64",
// "BOOL", "C64", ...), bytes holds product(shape) * dtype_size(dtype) bytes.
struct Record {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

struct Contents {
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
  std::vector<std::pair<std::string, Record>> tensors;

  // The record named `name`, or nullptr.
  const Record* find(const std::string& name) const;
};

// Bytes per element of a safetensors dtype, or 0 if the dtype is unknown.
size_t dtype_size(std::string_view dtype);

// The file image: 8-byte little-endian header length, the JSON header
// ("__metadata__" first, then tensors sorted by name) padded with spaces to a
// multiple of 8, then the tensors' bytes in that order. Throws phasor::Error,
// prefixed with name_for_errors, for an unknown dtype, a negative dimension, a
// byte count that does not match dtype and shape, or a repeated name.
std::string serialize(const Contents& contents, const std::string& name_for_errors = "safetensors");

// Validates everything before trusting it (header length, JSON, dtypes,
// shapes, offsets: in bounds, matching dtype and shape, no overlaps, no gaps)
// and copies the records out. Any problem throws phasor::Error whose message
// starts with name_for_errors. Tensors come back sorted by name.
Contents parse(std::string_view file, const std::string& name_for_errors);

Contents load(const std::string& path);
// Crash-safe: writes through write_file_atomic.
void save(const std::string& path, const Contents& contents);

}  // namespace phasor::safetensors
