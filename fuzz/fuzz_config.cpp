// libFuzzer target for the configuration loaders: the JSON of `phasor train
// --config` (train_options_from_json, then validate) and the "config" string
// a checkpoint carries in its __metadata__ (config_from_metadata, which runs
// model_config_from_json and ModelConfig::validate). Any input must either be
// accepted or refused with phasor::Error (invalid JSON is nlohmann's
// json::exception, which the CLI turns into a message); anything else (a crash,
// a sanitizer report, another exception type) is a bug. What is accepted must
// survive a to_json round trip unchanged. Built and run by scripts/ci_fuzz.sh;
// seeds in fuzz/corpus/config.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "app/train.h"
#include "models/config.h"
#include "models/model_io.h"
#include "tensor/error.h"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "fuzz_config: %s\n", what);
  std::abort();
}

void check_train_options(const nlohmann::json& j) {
  phasor::TrainOptions o;
  try {
    o = phasor::train_options_from_json(j);
  } catch (const phasor::Error&) {
    return;
  }
  // Accepted keys round-trip: writing the options and reading them back changes nothing.
  const nlohmann::json written = phasor::to_json(o);
  if (phasor::to_json(phasor::train_options_from_json(written)) != written) bug("TrainOptions JSON round trip differs");
  try {
    phasor::validate(o);
  } catch (const phasor::Error&) {
  }
}

void check_model_config(const nlohmann::json& j) {
  phasor::ModelConfig c;
  try {
    c = phasor::model_config_from_json(j);
  } catch (const phasor::Error&) {
    return;
  }
  const nlohmann::json written = phasor::to_json(c);
  if (phasor::to_json(phasor::model_config_from_json(written)) != written) bug("ModelConfig JSON round trip differs");
  try {
    c.validate();
    (void)c.head_dim();
    (void)c.pairs();
  } catch (const phasor::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // The checkpoint path: config_from_metadata never lets a JSON error escape.
  try {
    phasor::config_from_metadata({{"format", "phasor-model"}, {"config", text}}, "fuzz");
  } catch (const phasor::Error&) {
  }

  // The --config path: parse as the CLI does, then both loaders.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  check_train_options(j);
  check_model_config(j);
  if (j.is_object() && j.contains("model")) check_model_config(j["model"]);
  return 0;
}
