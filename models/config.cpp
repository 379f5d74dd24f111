#include "models/config.h"

#include <nlohmann/json.hpp>

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
  PHASOR_CHECK(vocab_size > 0, "config: vocab_size must be positive, got ", vocab_size);
  PHASOR_CHECK(d_model > 0 && n_heads > 0 && n_layers > 0 && d_ff > 0 && max_seq_len > 0,
               "config: d_model, n_heads, n_layers, d_ff and max_seq_len must be positive");
  PHASOR_CHECK(d_model % n_heads == 0, "config: d_model ", d_model, " is not divisible by n_heads ", n_heads);
  PHASOR_CHECK(!is_rotary() || head_dim() % 2 == 0, "config: position '", position, "' needs an even head width, got d_model/n_heads = ", head_dim());
  PHASOR_CHECK(rope_base > 1.0, "config: rope_base must be > 1, got ", rope_base);
  PHASOR_CHECK(norm_eps > 0.0, "config: norm_eps must be positive, got ", norm_eps);
  PHASOR_CHECK(xpos_scale_base > 0.0, "config: xpos_scale_base must be positive, got ", xpos_scale_base);
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

nlohmann::json to_json(const ModelConfig& c) {
  return {{"position", c.position},       {"vocab_size", c.vocab_size},   {"d_model", c.d_model},
          {"n_layers", c.n_layers},       {"n_heads", c.n_heads},         {"d_ff", c.d_ff},
          {"max_seq_len", c.max_seq_len}, {"rope_base", c.rope_base},     {"norm_eps", c.norm_eps},
          {"tie_embeddings", c.tie_embeddings}, {"xpos_scale_base", c.xpos_scale_base}, {"cmha_init", c.cmha_init}};
}

namespace {
template <class T>
void read_field(const nlohmann::json& j, const std::string& key, T& out) {
  const auto& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    PHASOR_CHECK(v.is_string(), "config: '", key, "' must be a string, got ", v.dump());
  } else if constexpr (std::is_same_v<T, bool>) {
    PHASOR_CHECK(v.is_boolean(), "config: '", key, "' must be true or false, got ", v.dump());
  } else if constexpr (std::is_integral_v<T>) {
    PHASOR_CHECK(v.is_number_integer(), "config: '", key, "' must be an integer, got ", v.dump());
  } else {
    PHASOR_CHECK(v.is_number(), "config: '", key, "' must be a number, got ", v.dump());
  }
  out = v.get<T>();
}
}  // namespace

ModelConfig model_config_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.dump());
  ModelConfig c;
  for (const auto& [key, value] : j.items()) {
    if (key == "position") read_field(j, key, c.position);
    else if (key == "vocab_size") read_field(j, key, c.vocab_size);
    else if (key == "d_model") read_field(j, key, c.d_model);
    else if (key == "n_layers") read_field(j, key, c.n_layers);
    else if (key == "n_heads") read_field(j, key, c.n_heads);
    else if (key == "d_ff") read_field(j, key, c.d_ff);
    else if (key == "max_seq_len") read_field(j, key, c.max_seq_len);
    else if (key == "rope_base") read_field(j, key, c.rope_base);
    else if (key == "norm_eps") read_field(j, key, c.norm_eps);
    else if (key == "tie_embeddings") read_field(j, key, c.tie_embeddings);
    else if (key == "xpos_scale_base") read_field(j, key, c.xpos_scale_base);
    else if (key == "cmha_init") read_field(j, key, c.cmha_init);
    else fail("config: unknown key '", key, "'");
  }
  return c;
}

}  // namespace phasor
