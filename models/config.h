#pragma once
// The model configuration of ../shared/SPEC-complexformer.md, with its JSON form
// (the `config` string inside a checkpoint's __metadata__).
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace phasor {

// Its fields, their JSON keys, flags and bounds: kModelConfigFields (models/options.h).
struct ModelConfig {
  std::string position = "complexformer";  // complexformer|rope|xpos|alibi|sinusoidal|learned|none
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t d_ff = 352;
  int64_t max_seq_len = 256;
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  double xpos_scale_base = 512.0;
  std::string cmha_init = "rope";  // rope|paper

  int64_t head_dim() const { return d_model / n_heads; }
  int64_t pairs() const { return head_dim() / 2; }
  bool is_rotary() const { return position == "complexformer" || position == "rope" || position == "xpos"; }

  // Throws phasor::Error naming the field at fault (d_model % n_heads, odd head width, a size out of bounds...).
  void validate() const;
};

nlohmann::json to_json(const ModelConfig& c);
// Unknown keys and wrong types are errors; missing keys keep their defaults.
ModelConfig model_config_from_json(const nlohmann::json& j);

}  // namespace phasor
