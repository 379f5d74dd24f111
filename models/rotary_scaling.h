#pragma once
// What may change the rotary frequencies of a trained model (docs/spec.md,
// "Context extension" and "The angle warm-up"): position interpolation (PI),
// NTK-aware base scaling and YaRN, which stretch a model trained at L positions
// to S L, and the seed's angle warm-up, which grows every position phase from
// small to full during training. Each is a factor on the frequencies w_k of a
// scheme (models/positions.h asks for them here), plus YaRN's factor on the
// attention logits. Includes nothing of the tensor library.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace phasor {

enum class RopeScaling : uint8_t { None, PI, NTK, YaRN };
inline constexpr std::array<std::string_view, 4> kRopeScalingNames = {"none", "pi", "ntk", "yarn"};  // in the order of RopeScaling

std::string_view rope_scaling_name(RopeScaling s);
// Throws phasor::Error "--rope-scaling must be none, pi, ntk or yarn, got 'x'".
RopeScaling parse_rope_scaling(std::string_view name);

struct PositionScaling {
  RopeScaling method = RopeScaling::None;
  double factor = 1.0;          // S >= 1: the new context is S times the trained one
  int64_t original_length = 0;  // L, the length the model was trained at; 0: unknown (yarn needs it)
  double yarn_alpha = 1.0;      // YaRN's ramp: frequencies turning fewer than alpha times in L are interpolated,
  double yarn_beta = 32.0;      // more than beta times kept, the ones between blended linearly
  // The angle warm-up's multiplier of every position phase, in (0, 1]: 1
  // outside training, and never saved (a saved model means its full phase).
  double warmup = 1.0;

  // The frequencies are the trained ones and the logits unscaled.
  bool identity() const { return method == RopeScaling::None && warmup == 1.0; }
  // One-line phasor::Error for S < 1 or not finite, a yarn without L or with
  // beta <= alpha, a warm-up outside (0, 1], and a method `variant` cannot take
  // ("--rope-scaling ntk does not apply to a 'carope' model: ...").
  void validate(const PositionVariant& variant) const;
  bool operator==(const PositionScaling&) const = default;
};

// The K frequencies w_k = base^(-k / K), k = 0..K-1 (the pair-based variants'
// w_j = base^(-2j/d) with K = d/2 pairs; pope's theta_c = base^(-c/d) with K =
// d), as `s` changes them:
//   pi:   w_k / S
//   ntk:  the base becomes base S^(K / (K - 1)), so that w_{K-1} is divided by S
//         (K = 1: the one frequency is w_0 = 1 whatever the base, divided by S as by pi)
//   yarn: r_k = L w_k / (2 pi), gamma_k = clamp((r_k - alpha) / (beta - alpha), 0, 1),
//         w'_k = (1 - gamma_k) w_k / S + gamma_k w_k
// then times s.warmup. Computed in double.
std::vector<double> scaled_frequencies(double base, int64_t count, const PositionScaling& s);
// The factor on the attention logits (after the 1/sqrt(d) scale): (0.1 ln S + 1)^2 for yarn, else 1.
double logit_factor(const PositionScaling& s);

// The checkpoint metadata's "position_scaling" object (docs/spec.md,
// "Checkpoint layout"): method, factor, original_length, yarn_alpha, yarn_beta.
// The warm-up is never written.
nlohmann::json to_json(const PositionScaling& s);
// Unknown keys and wrong types are one-line errors.
PositionScaling position_scaling_from_json(const nlohmann::json& j);

}  // namespace phasor
