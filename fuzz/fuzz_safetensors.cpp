// libFuzzer target for the model-file loader, short of building the model:
// phasor::safetensors::parse, then what load_model does with what parses
// (nn::from_contents turning records into tensors, config_from_metadata reading
// the model config, check_model_tensors comparing the two). Any input must
// either load or throw phasor::Error; anything else (a crash, a sanitizer
// report, another exception type) is a bug.
// Built and run by scripts/ci_fuzz.sh (which compiles the library for it):
//   bash scripts/ci_fuzz.sh safetensors
// The seeds in fuzz/corpus/safetensors are small files written by serialize(),
// plus every input that once found a bug (regression_*).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "models/model_io.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view file(reinterpret_cast<const char*>(data), size);
  phasor::safetensors::Contents contents;
  try {
    contents = phasor::safetensors::parse(file, "fuzz");
    // Whatever parses must serialize again without complaint.
    phasor::safetensors::serialize(contents);
  } catch (const phasor::Error&) {
    return 0;
  }
  phasor::nn::StateDict tensors;
  try {
    tensors = phasor::nn::from_contents(contents, "fuzz");
  } catch (const phasor::Error&) {
  }
  try {
    const phasor::ModelConfig config = phasor::config_from_metadata(contents.metadata, "fuzz");
    // The checks load_model makes before it builds the model (which is not built here).
    phasor::check_model_tensors(tensors, config, "fuzz");
  } catch (const phasor::Error&) {
  }
  return 0;
}
