#include "models/model_io.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"

namespace phasor {

std::map<std::string, std::string> model_metadata(const ModelConfig& config) {
  return {{"format", "phasor-model"}, {"config", to_json(config).dump()}};
}

ModelConfig config_from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file) {
  auto format = metadata.find("format");
  PHASOR_CHECK(format != metadata.end() && format->second == "phasor-model", file,
               ": not a Phasor model (its __metadata__ lacks \"format\": \"phasor-model\")");
  auto config = metadata.find("config");
  PHASOR_CHECK(config != metadata.end(), file, ": __metadata__ has no \"config\"");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config->second);
  } catch (const nlohmann::json::exception&) {
    fail(file, ": the \"config\" in __metadata__ is not valid JSON");
  }
  try {
    ModelConfig c = model_config_from_json(j);
    c.validate();
    return c;
  } catch (const Error& e) {
    fail(file, ": ", e.what());
  }
}

void save_model(const std::string& path, const CausalLM& model) {
  nn::save_tensors(path, model.state_dict(), model_metadata(model.config()));
}

ModelConfig read_model_config(const std::string& path) {
  std::map<std::string, std::string> metadata;
  nn::load_tensors(path, &metadata);
  return config_from_metadata(metadata, path);
}

std::unique_ptr<CausalLM> load_model(const std::string& path) {
  std::map<std::string, std::string> metadata;
  const nn::StateDict state = nn::load_tensors(path, &metadata);
  auto model = std::make_unique<CausalLM>(config_from_metadata(metadata, path));
  for (const auto& [name, t] : state) {
    PHASOR_CHECK(t.dtype() == DType::Float32, path, ": tensor '", name, "' is ", t.dtype(), "; a Phasor model stores F32");
    const float* values = t.data<float>();  // fresh from the file: contiguous, on the CPU
    PHASOR_CHECK(std::all_of(values, values + t.numel(), [](float v) { return std::isfinite(v); }), path, ": tensor '", name,
                 "' holds NaN or Inf values");
  }
  try {
    model->load_state_dict(state);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  return model;
}

}  // namespace phasor
