#include "models/config.h"

#include <nlohmann/json.hpp>

#include "models/options.h"
#include "tensor/error.h"

namespace phasor {

namespace {
const char* const kPositions[] = {"complexformer", "rope", "xpos", "alibi", "sinusoidal", "learned", "none"};
}

void ModelConfig::validate() const {
  bool known = false;
  for (const char* p : kPositions) known = known || position == p;
  PHASOR_CHECK(known, "config: unknown position '", position,
               "' (expected complexformer, rope, xpos, alibi, sinusoidal, learned or none)");
  check_bounds(*this, kModelConfigFields, "config");
  PHASOR_CHECK(d_model % n_heads == 0, "config: d_model ", d_model, " is not divisible by n_heads ", n_heads);
  PHASOR_CHECK(!is_rotary() || head_dim() % 2 == 0, "config: position '", position, "' needs an even head width, got d_model/n_heads = ", head_dim());
  PHASOR_CHECK(cmha_init == "rope" || cmha_init == "paper", "config: cmha_init must be 'rope' or 'paper', got '", cmha_init, "'");
  // Bounds what a config (a flag, a config file, a checkpoint's metadata) can ask
  // for before anything is allocated: a hostile or mistyped size is refused here
  // rather than by the allocator, or after hours of building layers. (In double:
  // the exact count of a hostile config overflows 64 bits.)
  const double D = static_cast<double>(d_model), F = static_cast<double>(d_ff);
  const double parameters = static_cast<double>(vocab_size) * D * (tie_embeddings ? 1 : 2) +
                            static_cast<double>(n_layers) * (4 * D * D + 3 * D * F + 2 * D) + D +
                            (position == "learned" ? static_cast<double>(max_seq_len) * D : 0.0);
  constexpr double kMaxParameters = 2147483648.0;  // 2^31: 8 GiB of float32 weights, 24 GiB with AdamW's state
  PHASOR_CHECK(parameters <= kMaxParameters, "config: vocab_size ", vocab_size, ", d_model ", d_model, ", n_layers ",
               n_layers, ", d_ff ", d_ff, " make about ", parameters, " parameters, more than the limit of 2^31");
}

nlohmann::json to_json(const ModelConfig& c) { return fields_to_json(c, kModelConfigFields); }

ModelConfig model_config_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.dump());
  ModelConfig c;
  for (const auto& [key, value] : j.items())
    if (!read_field(c, kModelConfigFields, key, value)) fail("config: unknown key '", key, "'");
  return c;
}

}  // namespace phasor
