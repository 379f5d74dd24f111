#include "models/config.h"

#include <ostream>

#include <nlohmann/json.hpp>

#include "models/options.h"
#include "models/positions.h"
#include "tensor/error.h"

namespace phasor {

// kPositionVariants (config.h) holds every Position once, in the enum's order
// (None is the last enumerator): a row missing, added out of order or left
// empty fails to compile here.
namespace {
constexpr bool variants_in_enum_order() {
  for (size_t i = 0; i < kPositionVariants.size(); ++i)
    if (kPositionVariants[i].position != static_cast<Position>(i) || kPositionVariants[i].name.empty()) return false;
  return static_cast<size_t>(Position::None) + 1 == kPositionVariants.size();
}
static_assert(variants_in_enum_order(), "kPositionVariants: one row per Position, in the enum's order");
}  // namespace


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
  // rather than by the allocator, or after hours of building layers.
  const double parameters = parameter_count();
  constexpr double kMaxParameters = 2147483648.0;  // 2^31: 8 GiB of float32 weights, 24 GiB with AdamW's state
  PHASOR_CHECK(parameters <= kMaxParameters, "config: vocab_size ", vocab_size, ", d_model ", d_model, ", n_layers ",
               n_layers, ", d_ff ", d_ff, " make about ", parameters, " parameters, more than the limit of 2^31");
}

double ModelConfig::parameter_count() const {
  const double V = static_cast<double>(vocab_size), D = static_cast<double>(d_model), F = static_cast<double>(d_ff);
  return V * D * (tie_embeddings ? 1 : 2) + static_cast<double>(n_layers) * (4 * D * D + 3 * D * F + 2 * D) + D +
         make_position_scheme(*this)->parameter_count();
}

void check_positions_fit(const ModelConfig& c, int64_t positions, std::string_view what) {
  make_position_scheme(c)->check_fit(positions, what);
}

nlohmann::json to_json(const ModelConfig& c) {
  nlohmann::json j = fields_to_json(c, kModelConfigFields);
  if (c.max_rel_pos == kDefaultMaxRelPos) j.erase("max_rel_pos");  // the twelve keys earlier versions wrote, byte for byte
  return j;
}

ModelConfig model_config_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.dump());
  ModelConfig c;
  for (const auto& [key, value] : j.items())
    if (!read_field(c, kModelConfigFields, key, value)) fail("config: unknown key '", key, "'");
  return c;
}

}  // namespace phasor
