#include "models/rotary_scaling.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace phasor {

std::string_view rope_scaling_name(RopeScaling s) { return kRopeScalingNames[static_cast<size_t>(s)]; }

RopeScaling parse_rope_scaling(std::string_view name) {
  for (size_t i = 0; i < kRopeScalingNames.size(); ++i)
    if (kRopeScalingNames[i] == name) return static_cast<RopeScaling>(i);
  fail("--rope-scaling must be none, pi, ntk or yarn, got '", name, "'");
}

void PositionScaling::validate(const PositionVariant& variant) const {
  PHASOR_CHECK(std::isfinite(factor) && factor >= 1.0 && factor <= 1e6, "--rope-factor must be a number in [1, 1e6], got ", factor);
  PHASOR_CHECK(warmup > 0.0 && warmup <= 1.0, "the angle warm-up's phase multiplier must be in (0, 1], got ", warmup);
  PHASOR_CHECK(original_length >= 0, "--original-length must be positive, got ", original_length);
  PHASOR_CHECK(warmup == 1.0 || variant.scaling != ScalingSupport::None, "--angle-warmup applies to the variants whose positions are rotary phases; this model is '",
               variant.name, "'");
  if (method == RopeScaling::None) return;
  const std::string_view name = rope_scaling_name(method);
  PHASOR_CHECK(variant.scaling != ScalingSupport::None, "--rope-scaling ", name, " does not apply to a '", variant.name,
               "' model: its positions are not rotary frequencies");
  PHASOR_CHECK(variant.scaling != ScalingSupport::PIOnly || method == RopeScaling::PI, "--rope-scaling ", name,
               " does not apply to a '", variant.name, "' model: its frequencies depend on the tokens; only pi (dividing its phase by S) does");
  if (method == RopeScaling::YaRN) {
    PHASOR_CHECK(original_length > 0, "--rope-scaling yarn needs the length the model was trained at: this checkpoint does not record it, give --original-length L");
    PHASOR_CHECK(std::isfinite(yarn_alpha) && std::isfinite(yarn_beta) && yarn_alpha >= 0 && yarn_beta > yarn_alpha,
                 "--yarn-alpha and --yarn-beta must be finite with 0 <= alpha < beta, got ", yarn_alpha, " and ", yarn_beta);
  }
}

std::vector<double> scaled_frequencies(double base, int64_t count, const PositionScaling& s) {
  const double k_count = static_cast<double>(count), S = s.factor;
  // NTK: the lowest frequency base^(-(K-1)/K) divided by S.
  const double ntk_base = s.method == RopeScaling::NTK && count > 1 ? base * std::pow(S, k_count / (k_count - 1.0)) : base;
  std::vector<double> w(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    double f = std::pow(ntk_base, -static_cast<double>(k) / k_count);
    switch (s.method) {
      case RopeScaling::None: break;
      case RopeScaling::PI: f /= S; break;
      case RopeScaling::NTK:
        if (count == 1) f /= S;
        break;
      case RopeScaling::YaRN: {
        const double turns = static_cast<double>(s.original_length) * f / (2.0 * M_PI);  // r_k = L / lambda_k
        const double gamma = std::clamp((turns - s.yarn_alpha) / (s.yarn_beta - s.yarn_alpha), 0.0, 1.0);
        f = (1.0 - gamma) * f / S + gamma * f;
        break;
      }
    }
    w[static_cast<size_t>(k)] = f * s.warmup;
  }
  return w;
}

double logit_factor(const PositionScaling& s) {
  if (s.method != RopeScaling::YaRN) return 1.0;
  const double t = 0.1 * std::log(s.factor) + 1.0;
  return t * t;
}

nlohmann::json to_json(const PositionScaling& s) {
  return {{"method", std::string(rope_scaling_name(s.method))},
          {"factor", s.factor},
          {"original_length", s.original_length},
          {"yarn_alpha", s.yarn_alpha},
          {"yarn_beta", s.yarn_beta}};
}

PositionScaling position_scaling_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "position_scaling: expected a JSON object, got ", j.dump());
  PositionScaling s;
  for (const auto& [key, v] : j.items()) {
    if (key == "method") {
      PHASOR_CHECK(v.is_string(), "position_scaling: 'method' must be a string, got ", v.dump());
      s.method = parse_rope_scaling(v.get<std::string>());
    } else if (key == "original_length") {
      PHASOR_CHECK(v.is_number_integer(), "position_scaling: 'original_length' must be an integer, got ", v.dump());
      s.original_length = v.get<int64_t>();
    } else if (key == "factor" || key == "yarn_alpha" || key == "yarn_beta") {
      PHASOR_CHECK(v.is_number(), "position_scaling: '", key, "' must be a number, got ", v.dump());
      (key == "factor" ? s.factor : key == "yarn_alpha" ? s.yarn_alpha : s.yarn_beta) = v.get<double>();
    } else {
      fail("position_scaling: unknown key '", key, "'");
    }
  }
  return s;
}

}  // namespace phasor
