#pragma once
// A model checkpoint file: the spec's safetensors layout with
// __metadata__ {"format": "phasor-model", "config": <JSON>} and, for a model
// that knows the length it was trained at or runs with a context extension,
// "position_scaling": <JSON> (models/rotary_scaling.h).
#include <memory>
#include <string>

#include "models/transformer.h"
#include "nn/module.h"

namespace phasor {

void save_model(const std::string& path, const CausalLM& model);
// Refuses a file that is not a Phasor model, or whose tensors do not match its
// config (read_model_file), before building a model of the config's size.
std::unique_ptr<CausalLM> load_model(const std::string& path);
ModelConfig read_model_config(const std::string& path);

// A model file read and checked whole (format, config, every tensor against
// the config), without building the model: what `phasor info` needs.
struct ModelFile {
  ModelConfig config;
  PositionScaling scaling;  // none, original_length 0 where the file records none
  nn::StateDict tensors;
};
ModelFile read_model_file(const std::string& path);

// Checks tensors read from `file` against the model `config` describes, using
// only the config and the tensors (nothing of the config's size is allocated):
// the layer count against the tensor count, every expected name present and
// none other, the data section large enough for the config, each tensor F32 of
// the expected shape, every value finite. A mismatch throws one phasor::Error
// line naming the file and the tensor or field.
void check_model_tensors(const nn::StateDict& tensors, const ModelConfig& config, const std::string& file);

// The __metadata__ of a model file for `config` (and `scaling`, written unless
// it is the default: no method and no known training length).
std::map<std::string, std::string> model_metadata(const ModelConfig& config, const PositionScaling& scaling = {});
// The scaling a model file records (the default where it records none),
// checked against its config's variant; `file` names it in errors.
PositionScaling scaling_from_metadata(const std::map<std::string, std::string>& metadata, const ModelConfig& config, const std::string& file);
// The config stored in a model file's metadata; `file` names it in errors.
ModelConfig config_from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file);

}  // namespace phasor
