// libFuzzer target for phasor::safetensors::parse: any input must either parse
// or throw phasor::Error; anything else (a crash, a sanitizer report, another
// exception type) is a bug. Build and run from the repository root:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     fuzz/fuzz_safetensors.cpp nn/safetensors.cpp nn/atomic_file.cpp -o /tmp/fuzz_safetensors
//   /tmp/fuzz_safetensors -max_total_time=20 fuzz/corpus/safetensors
// The seeds in fuzz/corpus/safetensors are small files written by serialize().
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "nn/safetensors.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    phasor::safetensors::Contents contents = phasor::safetensors::parse(file, "fuzz");
    // Whatever parses must serialize again without complaint.
    phasor::safetensors::serialize(contents);
  } catch (const phasor::Error&) {
  }
  return 0;
}
