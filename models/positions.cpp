#include "models/positions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "tensor/error.h"

namespace phasor {

// ---------------------------------------------------------------- the base

std::vector<Tensor> PositionScheme::initial_layer_parameters(Generator* /*gen*/) const { return {}; }
std::vector<Tensor> PositionScheme::initial_model_parameters(Generator* /*gen*/) const { return {}; }

double PositionScheme::parameter_count() const {
  auto numbers = [](const std::vector<PositionParameter>& list) {
    double n = 0.0;
    for (const PositionParameter& p : list) {
      double size = 1.0;
      for (int64_t d : p.shape) size *= static_cast<double>(d);
      n += size;
    }
    return n;
  };
  return static_cast<double>(config_.n_layers) * numbers(layer_parameters()) + numbers(model_parameters());
}

int64_t PositionScheme::max_positions() const { return std::min(own_limit(), kMaxPositions); }

void PositionScheme::check_fit(int64_t positions, std::string_view what) const {
  PHASOR_CHECK(positions <= own_limit(), what, " ", positions, " exceeds ", own_limit_reason());
  PHASOR_CHECK(positions <= kMaxPositions, what, " ", positions, " exceeds the ", kMaxPositions, " positions Phasor supports");
}

std::pair<Tensor, Tensor> PositionScheme::rotate(const Tensor& q, const Tensor& k, const RotationArgs& /*args*/) const { return {q, k}; }

// ---------------------------------------------------------------- the variants

namespace {

// x [B, N, D] times w^T (w [O, D]) as one 2-d product [B N, D] x [D, O]: the
// shape the GEMM libraries run fast (a batch of B products against one
// broadcast weight, and its summed weight gradient, took 10x longer here).
Tensor project(const Tensor& x, const Tensor& w) {
  const int64_t b = x.size(0), n = x.size(1);
  return reshape(matmul(reshape(x, {b * n, x.size(2)}), w, MatOp::None, MatOp::Transpose), {b, n, w.size(0)});
}

// none: attention sees no position at all.
class NoPositions : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
};

// rope: q and k turned by exp(i m w_j), one table for both.
class Rope : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& args) const override {
    const Tensor t = table(q.size(1), args.offset, 0, +1, q.device());
    return {phasor::rotate(q, t), phasor::rotate(k, t)};
  }

 protected:
  // ops::rotary_table of `rows` positions from `offset`, on `device`, with
  // the scaled frequencies where scaling() changes them.
  Tensor table(int64_t rows, int64_t offset, int64_t origin, int sign, Device device) const {
    return cached({sign, rows, offset, origin, device, DType::Complex64}, [&] {
      const Tensor t = scaling().identity()
                           ? ops::rotary_table(rows, config().pairs(), offset, config().rope_base, scale_base(), sign, DType::Complex64, origin)
                           : ops::rotary_table(rows, frequencies(config().pairs()), offset, scale_base(), sign, DType::Complex64, origin);
      return ops::to_device(t, device);
    });
  }
  virtual double scale_base() const { return 0.0; }  // no XPos scales
};

// xpos: rope's rotation times zeta_j^(+-(m - origin)/S), queries up, keys down.
class XPos : public Rope {
 public:
  using Rope::Rope;
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& args) const override {
    return {phasor::rotate(q, table(q.size(1), args.offset, args.origin, +1, q.device())),
            phasor::rotate(k, table(k.size(1), args.offset, args.origin, -1, k.device()))};
  }
  int64_t origin(int64_t positions) const override { return xpos_origin(config().xpos_scale_base, positions); }

 protected:
  // pi divides the position in the decay exponent too: (m / S - o) / B and
  // (n / S - o) / B cancel to (m - n) / (S B) between a query and a key.
  double scale_base() const override {
    return config().xpos_scale_base * (scaling().method == RopeScaling::PI ? scaling().factor : 1.0);
  }
  int64_t own_limit() const override { return xpos_max_positions(config().xpos_scale_base); }
  std::string own_limit_reason() const override {
    std::ostringstream os;
    os << "the " << own_limit() << " positions an 'xpos' model with xpos_scale_base " << config().xpos_scale_base
       << " supports (its scales would leave float32)";
    return os.str();
  }
};

// complexformer: the Euler transform and the head-wise adaptive rotation, with
// the layer's delta, phase_bias and beta.
class ComplexFormer : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::vector<PositionParameter> layer_parameters() const override {
    const int64_t h = config().n_heads, p = config().pairs();
    return {{"delta", {h, p}}, {"phase_bias", {h, p}}, {"beta", {h}}};  // none decays (docs/spec.md)
  }
  std::vector<Tensor> initial_layer_parameters(Generator* gen) const override {
    const int64_t h = config().n_heads, p = config().pairs();
    return {config().cmha_init == CmhaInit::Paper ? normal({h, p}, 0.0, 1.0 / std::sqrt(static_cast<double>(p)), DType::Float32, gen)
                                                  : ones({h, p}),
            zeros({h, p}), ones({h})};
  }
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& a) const override {
    const Tensor &delta = (*a.parameters)[0], &phase_bias = (*a.parameters)[1], &beta = (*a.parameters)[2];
    const double base = config().rope_base;
    const Tensor w = scaled_frequencies(q.device());
    if (!a.composed)
      return {cmha_rotate(q, delta, phase_bias, beta, a.offset, base, w), cmha_rotate(k, delta, Tensor(), beta, a.offset, base, w)};
    // The readable reference: the spec's formulas, one autograd op at a time. Keys take no phase_bias.
    return {cmha_rotate_reference(q, delta, phase_bias, beta, a.offset, base, a.q_r, a.q_phi, w),
            cmha_rotate_reference(k, delta, Tensor(), beta, a.offset, base, a.k_r, a.k_phi, w)};
  }
  std::vector<HeadStatistic> head_statistics(const std::vector<Tensor>& layer) const override {
    return {{"delta_mean", mean(layer.at(0), {1}).to_vector<double>()},
            {"phase_bias_mean", mean(layer.at(1), {1}).to_vector<double>()},
            {"beta", layer.at(2).to_vector<double>()}};
  }
  Tensor phase_weight(const std::vector<Tensor>& layer) const override { return layer.at(0); }
  bool has_euler_transform() const override { return true; }

 private:
  // The beta m w_j term's w_j, float64 [P] on `device`; undefined (the kernels' own rope_base^(-2j/d)) when unscaled.
  Tensor scaled_frequencies(Device device) const {
    if (scaling().identity()) return Tensor();
    return cached({0, config().pairs(), 0, 0, device, DType::Float64},
                  [&] { return ops::to_device(from_vector(frequencies(config().pairs())), device); });
  }
};

// carope: per head, a token-dependent frequency f_t = 1 / (1 + softplus(carope_w_h . x_t))
// in (0, 1], and pair j turned by phi_{m,j} = sum_{t <= m} f_t^j (docs/spec.md,
// "carope"). The sums are a scan over positions (cumsum, accumulated in
// float64 for float32 activations); a KV cache carries them on from chunk to chunk.
class CARoPE : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::vector<PositionParameter> layer_parameters() const override {
    return {{"carope_w", {config().n_heads, config().d_model}, /*decays=*/true, /*drawn_as_weight=*/true}};
  }
  std::vector<Tensor> initial_layer_parameters(Generator* /*gen*/) const override {
    return {zeros({config().n_heads, config().d_model})};  // drawn as a projection by CausalLM
  }
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& a) const override {
    PHASOR_CHECK(a.input != nullptr, "carope: the rotation needs the layer's input");
    const Tensor& x = *a.input;
    const int64_t b = q.size(0), n = q.size(1), h = q.size(2), p = q.size(3);
    const DType rt = x.dtype();
    // log f = -log(1 + softplus(w . x)), softplus(u) = max(u, 0) + log(1 + exp(-|u|)) (stable for any u).
    const Tensor u = project(x, (*a.parameters)[0]);  // [B, N, H]
    const Tensor log_f = -log(1.0 + softplus(u));
    // f^j = exp(j log f): f^0 = exp(0) = 1 exactly.
    const Tensor powers = exp(unsqueeze(log_f, 3) * exponents(p, rt, x.device()));  // [B, N, H, P]
    Tensor phi = cumsum(reshape(powers, {b, n, h * p}), 1);  // [B, N, H P]
    if (a.state) {
      if (a.state->defined()) phi = phi + *a.state;  // the sums of the cache's earlier positions
      *a.state = ops::contiguous(ops::narrow(phi.detach(), 1, n - 1, 1));  // [B, 1, H P]
    }
    const double multiplier = scaling().warmup / (scaling().method == RopeScaling::PI ? scaling().factor : 1.0);
    if (multiplier != 1.0) phi = phi * multiplier;
    const Tensor angle = reshape(phi, {b, n, h, p});
    return {polar_rotate(q, angle), polar_rotate(k, angle)};
  }

 private:
  // 0, 1, .., P-1 as [P] in `dtype`.
  Tensor exponents(int64_t pairs, DType dtype, Device device) const {
    return cached({1, pairs, 0, 0, device, dtype}, [&] {
      std::vector<double> j(static_cast<size_t>(pairs));
      for (int64_t i = 0; i < pairs; ++i) j[static_cast<size_t>(i)] = static_cast<double>(i);
      return ops::to_device(ops::to(from_vector(j), dtype), device);
    });
  }
};

// pope: each component c of a head made complex, softplus(q_c) e^{i m theta_c}
// and softplus(k_c) e^{i (n theta_c - pope_bias_c)}, with d frequencies
// theta_c = rope_base^(-c/d) (docs/spec.md, "pope"): the magnitude is the
// content's, the phase the position's. One fused polar rotation each.
class Pope : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::vector<PositionParameter> layer_parameters() const override { return {{"pope_bias", {config().n_heads, config().head_dim()}}}; }
  std::vector<Tensor> initial_layer_parameters(Generator* /*gen*/) const override {
    return {zeros({config().n_heads, config().head_dim()})};
  }
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& a) const override {
    const Tensor position = angles(q.size(1), a.offset, real_dtype(q.dtype()), q.device());  // (offset + m) theta_c, [N, 1, d]
    const Tensor& bias = (*a.parameters)[0];                                                  // [H, d]
    return {polar_rotate(q, position, Tensor(), ops::PolarMagnitude::Softplus),
            polar_rotate(k, position - bias, Tensor(), ops::PolarMagnitude::Softplus)};
  }

 private:
  // (offset + m) theta_c reduced modulo 2 pi in float64 and rounded once to
  // `dtype`, [N, 1, d]: the phase stays exact however far the position.
  Tensor angles(int64_t rows, int64_t offset, DType dtype, Device device) const {
    return cached({0, rows, offset, 0, device, dtype}, [&] {
      const std::vector<double> theta = frequencies(config().head_dim());
      const int64_t d = static_cast<int64_t>(theta.size());
      std::vector<double> phase(static_cast<size_t>(rows * d));
      for (int64_t m = 0; m < rows; ++m)
        for (int64_t c = 0; c < d; ++c)
          phase[static_cast<size_t>(m * d + c)] = std::remainder(static_cast<double>(offset + m) * theta[static_cast<size_t>(c)], 2.0 * M_PI);
      return ops::to_device(ops::to(from_vector(phase, {rows, 1, d}), dtype), device);
    });
  }
};

// complexformer-seed: the seed's code, made well-formed (docs/spec.md,
// "complexformer-seed"). Each component c of a head turned by its own angle
// tanh((x angle_q^T)_{hd+c}) (keys: angle_k), the query's dot products gated by
// sigmoid(alpha_h), and sigmoid(beta_h) rel_bias[min(m - n, R)] added to the scores.
class ComplexFormerSeed : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::vector<PositionParameter> layer_parameters() const override {
    const int64_t D = config().d_model, H = config().n_heads;
    return {{"angle_q", {D, D}, /*decays=*/true, /*drawn_as_weight=*/true},
            {"angle_k", {D, D}, /*decays=*/true, /*drawn_as_weight=*/true},
            {"alpha", {H}},
            {"beta", {H}},
            {"rel_bias", {config().max_rel_pos + 1}}};
  }
  std::vector<Tensor> initial_layer_parameters(Generator* /*gen*/) const override {
    const int64_t D = config().d_model, H = config().n_heads;
    // The angle nets are drawn as projections by CausalLM; the gates start at 1
    // as in the seed, the table at 0 (the seed's N(0, 1) embedding summed over D
    // would start the biases at a standard deviation of sqrt(D)).
    return {zeros({D, D}), zeros({D, D}), ones({H}), ones({H}), zeros({config().max_rel_pos + 1})};
  }
  std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& a) const override {
    PHASOR_CHECK(a.input != nullptr, "complexformer-seed: the rotation needs the layer's input");
    const std::vector<Tensor>& p = *a.parameters;
    const Tensor& x = *a.input;
    const Dims shape = q.shape();  // [B, N, H, d]
    // sigmoid(alpha_h) q exp(i tanh(x angle_q^T)) and k exp(i tanh(x angle_k^T)), one fused polar rotation each
    return {polar_rotate(q, reshape(project(x, p[0]), shape), sigmoid(p[2]), ops::PolarMagnitude::Identity, ops::PolarAngle::Tanh),
            polar_rotate(k, reshape(project(x, p[1]), shape), Tensor(), ops::PolarMagnitude::Identity, ops::PolarAngle::Tanh)};
  }
  Tensor distance_bias(const std::vector<Tensor>& layer) const override {
    return reshape(sigmoid(layer.at(3)), {config().n_heads, 1}) * reshape(layer.at(4), {1, config().max_rel_pos + 1});
  }
  std::vector<HeadStatistic> head_statistics(const std::vector<Tensor>& layer) const override {
    return {{"alpha_gate", sigmoid(layer.at(2)).to_vector<double>()}, {"beta_gate", sigmoid(layer.at(3)).to_vector<double>()}};
  }
};

// alibi: no rotation; a per-head penalty on the scores, linear in the distance.
class Alibi : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  Tensor slopes(Device device) const override {
    return cached({0, config().n_heads, 0, 0, device, DType::Float32}, [&] {
      const std::vector<double> s = alibi_slopes(config().n_heads);
      return ops::to_device(from_vector(std::vector<float>(s.begin(), s.end())), device);
    });
  }
};

// sinusoidal: a fixed table added to the token embeddings.
class Sinusoidal : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  Tensor embed(const Tensor& x, int64_t offset, const std::vector<Tensor>& /*model*/) const override {
    const int64_t n = x.size(1);
    return x + cached({0, n, offset, 0, x.device(), DType::Float32},
                      [&] { return ops::to_device(sinusoidal_positions(n, config().d_model, offset), x.device()); });
  }
};

// learned: a trained table of max_seq_len positions added to the token
// embeddings; it cannot run past its last row.
class Learned : public PositionScheme {
 public:
  using PositionScheme::PositionScheme;
  std::vector<PositionParameter> model_parameters() const override {
    return {{"pos_emb.weight", {config().max_seq_len, config().d_model}, /*decays=*/true, /*drawn_as_weight=*/true}};
  }
  std::vector<Tensor> initial_model_parameters(Generator* gen) const override {
    return {normal({config().max_seq_len, config().d_model}, 0.0, 1.0, DType::Float32, gen)};  // as an nn::Embedding starts
  }
  Tensor embed(const Tensor& x, int64_t offset, const std::vector<Tensor>& model) const override {
    return x + narrow(model.at(0), 0, offset, x.size(1));
  }

 protected:
  int64_t own_limit() const override { return config().max_seq_len; }
  std::string own_limit_reason() const override {
    std::ostringstream os;
    os << "max_seq_len " << config().max_seq_len << " of this '" << name() << "' position model";
    return os.str();
  }
};

template <class Scheme>
std::shared_ptr<const PositionScheme> make(const ModelConfig& c, const PositionScaling& s) {
  return std::make_shared<const Scheme>(c, s);
}

// One maker per row of kPositionVariants, in its order.
constexpr std::array<std::shared_ptr<const PositionScheme> (*)(const ModelConfig&, const PositionScaling&), kPositionVariants.size()> kSchemes = {
    make<ComplexFormer>, make<Rope>, make<XPos>, make<CARoPE>, make<Pope>, make<ComplexFormerSeed>, make<Alibi>, make<Sinusoidal>, make<Learned>, make<NoPositions>,
};
// std::array fills a short initializer with nulls: a variant left out fails here instead.
static_assert(std::ranges::none_of(kSchemes, [](auto maker) { return maker == nullptr; }), "kSchemes: one maker per variant");

}  // namespace

std::shared_ptr<const PositionScheme> make_position_scheme(const ModelConfig& config, const PositionScaling& scaling) {
  scaling.validate(config.variant());
  return kSchemes[static_cast<size_t>(config.position)](config, scaling);
}

// ---------------------------------------------------------------- the tables

std::vector<double> alibi_slopes(int64_t n_heads) {
  auto series = [](int64_t n) {  // 2^(-8 (h+1) / n), h = 0..n-1
    std::vector<double> s;
    for (int64_t h = 0; h < n; ++h) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(n)));
    return s;
  };
  int64_t p2 = 1;
  while (p2 * 2 <= n_heads) p2 *= 2;
  std::vector<double> slopes = series(p2);
  if (p2 == n_heads) return slopes;
  const std::vector<double> extra = series(2 * p2);  // every other slope of the 2*P2 series
  for (size_t i = 0; slopes.size() < static_cast<size_t>(n_heads); i += 2) slopes.push_back(extra[i]);
  return slopes;
}

int64_t xpos_max_distance(double scale_base) {
  constexpr double kMaxExponent = 82.0;
  const double smallest_zeta = 0.4 / 1.4;  // zeta_0, whatever the head width
  return static_cast<int64_t>(std::floor(kMaxExponent * scale_base / std::log(1.0 / smallest_zeta)));
}

int64_t xpos_max_positions(double scale_base) { return 2 * xpos_max_distance(scale_base) + 1; }

int64_t xpos_origin(double scale_base, int64_t positions) { return positions - 1 <= xpos_max_distance(scale_base) ? 0 : positions / 2; }

Tensor sinusoidal_positions(int64_t n, int64_t d_model, int64_t offset) {
  std::vector<float> pe(static_cast<size_t>(n * d_model));
  for (int64_t pos = 0; pos < n; ++pos)
    for (int64_t i = 0; 2 * i < d_model; ++i) {
      const double angle = static_cast<double>(pos + offset) / std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(d_model));
      pe[pos * d_model + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < d_model) pe[pos * d_model + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  return from_vector(pe, {n, d_model});
}

}  // namespace phasor
