#pragma once
// A model checkpoint file: the spec's safetensors layout with
// __metadata__ {"format": "phasor-model", "config": <JSON>}.
#include <memory>
#include <string>

#include "models/transformer.h"

namespace phasor {

void save_model(const std::string& path, const CausalLM& model);
// Refuses a file that is not a Phasor model, or whose tensors do not match its config.
std::unique_ptr<CausalLM> load_model(const std::string& path);
ModelConfig read_model_config(const std::string& path);

// The __metadata__ of a model file for `config`.
std::map<std::string, std::string> model_metadata(const ModelConfig& config);
// The config stored in a model file's metadata; `file` names it in errors.
ModelConfig config_from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);

}  // namespace phasor
