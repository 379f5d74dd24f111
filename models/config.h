#pragma once
// The model configuration of docs/spec.md ("Configuration"), with its JSON form
// (the `config` string inside a checkpoint's __metadata__).
#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace phasor {

// The position variants of the spec.
enum class Position : uint8_t { ComplexFormer, Rope, XPos, CARoPE, PoPE, ComplexFormerSeed, Alibi, Sinusoidal, Learned, None };

// What a variant adds to the token embeddings before the first layer.
enum class PositionEmbedding : uint8_t { None, Sinusoidal, Learned };

// Which context extensions (models/rotary_scaling.h) a variant's positions take.
enum class ScalingSupport : uint8_t { None, All, PIOnly };

// What a position variant is called and what it does to the model.
struct PositionVariant {
  Position position;
  std::string_view name;        // in the config JSON, a checkpoint's metadata, the CLI and the logs
  bool rotary;                  // q and k turned pair-wise as complex numbers (needs an even head width)
  bool complex_components;      // each of q's and k's d components made a complex number: the scores read 2d reals
  PositionEmbedding embedding;  // added to the token embeddings
  bool alibi_bias;              // a per-head penalty on the scores, linear in the distance
  bool reads_cmha_init;         // its parameters start as cmha_init says
  ScalingSupport scaling;       // --rope-scaling methods (and the angle warm-up where not None)
};

// The one list of the variants, in the order of Position.
inline constexpr std::array<PositionVariant, 10> kPositionVariants = {{
    // position               name             rotary  complex_components  embedding                      alibi_bias  reads_cmha_init  scaling
    {Position::ComplexFormer, "complexformer", true,   false,              PositionEmbedding::None,       false,      true,            ScalingSupport::All},
    {Position::Rope,          "rope",          true,   false,              PositionEmbedding::None,       false,      false,           ScalingSupport::All},
    {Position::XPos,          "xpos",          true,   false,              PositionEmbedding::None,       false,      false,           ScalingSupport::All},
    {Position::CARoPE,        "carope",        true,   false,              PositionEmbedding::None,       false,      false,           ScalingSupport::PIOnly},
    {Position::PoPE,          "pope",          false,  true,               PositionEmbedding::None,       false,      false,           ScalingSupport::All},
    {Position::ComplexFormerSeed, "complexformer-seed", false, true,       PositionEmbedding::None,       false,      false,           ScalingSupport::None},
    {Position::Alibi,         "alibi",         false,  false,              PositionEmbedding::None,       true,       false,           ScalingSupport::None},
    {Position::Sinusoidal,    "sinusoidal",    false,  false,              PositionEmbedding::Sinusoidal, false,      false,           ScalingSupport::None},
    {Position::Learned,       "learned",       false,  false,              PositionEmbedding::Learned,    false,      false,           ScalingSupport::None},
    {Position::None,          "none",          false,  false,              PositionEmbedding::None,       false,      false,           ScalingSupport::None},
}};

constexpr const PositionVariant& position_variant(Position p) { return kPositionVariants[static_cast<size_t>(p)]; }
constexpr std::string_view position_name(Position p) { return position_variant(p).name; }

// Every variant, in the table's order: complexformer, rope, xpos, carope, pope, complexformer-seed, alibi, sinusoidal, learned, none.
constexpr std::array<Position, kPositionVariants.size()> all_positions() {
  std::array<Position, kPositionVariants.size()> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = kPositionVariants[i].position;
  return out;
}

// The names joined by `separator` ("complexformer|rope|...|none" for a flag's help).
std::string position_names(std::string_view separator);
// Throws phasor::Error "config: unknown position 'x' (expected complexformer, rope, ... or none)".
Position parse_position(std::string_view name);
std::ostream& operator<<(std::ostream& os, Position p);  // its name

// How complexformer's delta starts: 1 (rope: plain RoPE at init) or N(0, 1/P) (paper).
enum class CmhaInit : uint8_t { Rope, Paper };

inline constexpr std::array<std::string_view, 2> kCmhaInitNames = {"rope", "paper"};  // in the order of CmhaInit

constexpr std::string_view cmha_init_name(CmhaInit i) { return kCmhaInitNames[static_cast<size_t>(i)]; }
std::string cmha_init_names(std::string_view separator);
// Throws phasor::Error "config: cmha_init must be 'rope' or 'paper', got 'x'".
CmhaInit parse_cmha_init(std::string_view name);
std::ostream& operator<<(std::ostream& os, CmhaInit i);  // its name

inline constexpr int64_t kDefaultMaxRelPos = 1024;  // the seed's clamp

// Its fields, their JSON keys, flags and bounds: kModelConfigFields (models/options.h).
struct ModelConfig {
  Position position = Position::ComplexFormer;
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
  CmhaInit cmha_init = CmhaInit::Rope;
  int64_t max_rel_pos = kDefaultMaxRelPos;  // complexformer-seed's clamp R of the relative distance (its table has R + 1 rows)

  int64_t head_dim() const { return d_model / n_heads; }
  int64_t pairs() const { return head_dim() / 2; }
  // The width of a head's queries and keys as the scores read them: 2d for
  // the variants that make each component complex (pope), else d.
  int64_t query_key_width() const { return variant().complex_components ? 2 * head_dim() : head_dim(); }
  const PositionVariant& variant() const { return position_variant(position); }
  bool is_rotary() const { return variant().rotary; }
  // The number of parameters of its model (docs/spec.md, "Parameter count"),
  // position scheme included (models/positions.h). In double: exact below 2^53,
  // and a hostile config cannot overflow it. Needs the checks of validate()
  // up to the even head width.
  double parameter_count() const;

  // Throws phasor::Error naming the field at fault (d_model % n_heads, odd head width, a size out of bounds...).
  void validate() const;
};

// The one rule on sequence lengths (docs/spec.md, "Positions far out"), kept
// by each variant's scheme (PositionScheme::check_fit, models/positions.h):
// - a `learned` model has a table of max_seq_len positions and cannot run past it;
// - `xpos` runs up to xpos_max_positions (its scales must stay in float32);
// - no variant runs past kMaxPositions (the float32 phases of the rotary
//   variants would carry more than 0.06 rad of rounding).
// Throws phasor::Error "<what> <positions> exceeds ...", `what` in the caller's
// words: "eval: --seq-len" for the CLI, "Model.evaluate: seq_len" for Python.
void check_positions_fit(const ModelConfig& c, int64_t positions, std::string_view what);
inline constexpr int64_t kMaxPositions = int64_t{1} << 20;

nlohmann::json to_json(const ModelConfig& c);
// Unknown keys and wrong types are errors; missing keys keep their defaults.
ModelConfig model_config_from_json(const nlohmann::json& j);

}  // namespace phasor
