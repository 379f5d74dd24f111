#include "models/config.h"

#include <cmath>
#include <ostream>

#include <nlohmann/json.hpp>

#include "models/options.h"
#include "tensor/error.h"

namespace phasor {

static_assert([] {
  for (size_t i = 0; i < kPositionVariants.size(); ++i)
    if (static_cast<size_t>(kPositionVariants[i].position) != i) return false;
  return true;
}(), "kPositionVariants lists the variants in the order of Position");

std::string position_names(std::string_view separator) {
  std::string out;
  for (const PositionVariant& v : kPositionVariants) out.append(out.empty() ? "" : separator).append(v.name);
  return out;
}

Position parse_position(std::string_view name) {
  for (const PositionVariant& v : kPositionVariants)
    if (v.name == name) return v.position;
  std::string expected;  // "complexformer, rope, ... or none"
  for (size_t i = 0; i < kPositionVariants.size(); ++i)
    expected.append(i == 0 ? "" : i + 1 < kPositionVariants.size() ? ", " : " or ").append(kPositionVariants[i].name);
  fail("config: unknown position '", name, "' (expected ", expected, ")");
}

std::ostream& operator<<(std::ostream& os, Position p) { return os << position_name(p); }

std::string cmha_init_names(std::string_view separator) {
  std::string out;
  for (std::string_view name : kCmhaInitNames) out.append(out.empty() ? "" : separator).append(name);
  return out;
}

CmhaInit parse_cmha_init(std::string_view name) {
  for (size_t i = 0; i < kCmhaInitNames.size(); ++i)
    if (kCmhaInitNames[i] == name) return static_cast<CmhaInit>(i);
  fail("config: cmha_init must be '", cmha_init_names("' or '"), "', got '", name, "'");
}

std::ostream& operator<<(std::ostream& os, CmhaInit i) { return os << cmha_init_name(i); }

void ModelConfig::validate() const {
  check_bounds(*this, kModelConfigFields, "config");
  PHASOR_CHECK(d_model % n_heads == 0, "config: d_model ", d_model, " is not divisible by n_heads ", n_heads);
  PHASOR_CHECK(!is_rotary() || head_dim() % 2 == 0, "config: position '", position, "' needs an even head width, got d_model/n_heads = ", head_dim());
  // Bounds what a config (a flag, a config file, a checkpoint's metadata) can ask
  // for before anything is allocated: a hostile or mistyped size is refused here
  // rather than by the allocator, or after hours of building layers. (In double:
  // the exact count of a hostile config overflows 64 bits.)
  const double D = static_cast<double>(d_model), F = static_cast<double>(d_ff);
  const double parameters = static_cast<double>(vocab_size) * D * (tie_embeddings ? 1 : 2) +
                            static_cast<double>(n_layers) * (4 * D * D + 3 * D * F + 2 * D) + D +
                            (variant().embedding == PositionEmbedding::Learned ? static_cast<double>(max_seq_len) * D : 0.0);
  constexpr double kMaxParameters = 2147483648.0;  // 2^31: 8 GiB of float32 weights, 24 GiB with AdamW's state
  PHASOR_CHECK(parameters <= kMaxParameters, "config: vocab_size ", vocab_size, ", d_model ", d_model, ", n_layers ",
               n_layers, ", d_ff ", d_ff, " make about ", parameters, " parameters, more than the limit of 2^31");
}

void check_positions_fit(const ModelConfig& c, int64_t positions, std::string_view what) {
  PHASOR_CHECK(c.variant().embedding != PositionEmbedding::Learned || positions <= c.max_seq_len, what, " ", positions,
               " exceeds max_seq_len ", c.max_seq_len, " of this '", c.position, "' position model");
  PHASOR_CHECK(c.position != Position::XPos || positions <= xpos_max_positions(c.xpos_scale_base), what, " ", positions, " exceeds the ",
               xpos_max_positions(c.xpos_scale_base), " positions an 'xpos' model with xpos_scale_base ", c.xpos_scale_base,
               " supports (its scales would leave float32)");
  PHASOR_CHECK(positions <= kMaxPositions, what, " ", positions, " exceeds the ", kMaxPositions, " positions Phasor supports");
}

int64_t xpos_max_distance(double scale_base) {
  constexpr double kMaxExponent = 82.0;
  const double smallest_zeta = 0.4 / 1.4;  // zeta_0, whatever the head width
  return static_cast<int64_t>(std::floor(kMaxExponent * scale_base / std::log(1.0 / smallest_zeta)));
}

int64_t xpos_max_positions(double scale_base) { return 2 * xpos_max_distance(scale_base) + 1; }

int64_t xpos_origin(double scale_base, int64_t positions) { return positions - 1 <= xpos_max_distance(scale_base) ? 0 : positions / 2; }

nlohmann::json to_json(const ModelConfig& c) { return fields_to_json(c, kModelConfigFields); }

ModelConfig model_config_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.dump());
  ModelConfig c;
  for (const auto& [key, value] : j.items())
    if (!read_field(c, kModelConfigFields, key, value)) fail("config: unknown key '", key, "'");
  return c;
}

}  // namespace phasor
