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
  // ops::rotary_table of `rows` positions from `offset`, on `device`.
  Tensor table(int64_t rows, int64_t offset, int64_t origin, int sign, Device device) const {
    return cached({sign, rows, offset, origin, device, DType::Complex64}, [&] {
      return ops::to_device(ops::rotary_table(rows, config().pairs(), offset, config().rope_base, scale_base(), sign, DType::Complex64, origin),
                            device);
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
  double scale_base() const override { return config().xpos_scale_base; }
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
    return {{"delta", {h, p}}, {"phase_bias", {h, p}}, {"beta", {h}}};
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
    if (!a.composed) return {cmha_rotate(q, delta, phase_bias, beta, a.offset, base), cmha_rotate(k, delta, Tensor(), beta, a.offset, base)};
    // The readable reference: the spec's formulas, one autograd op at a time. Keys take no phase_bias.
    return {cmha_rotate_reference(q, delta, phase_bias, beta, a.offset, base, a.q_r, a.q_phi),
            cmha_rotate_reference(k, delta, Tensor(), beta, a.offset, base, a.k_r, a.k_phi)};
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
  std::vector<PositionParameter> model_parameters() const override { return {{"pos_emb.weight", {config().max_seq_len, config().d_model}}}; }
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
std::shared_ptr<const PositionScheme> make(const ModelConfig& c) {
  return std::make_shared<const Scheme>(c);
}

// One maker per row of kPositionVariants, in its order.
constexpr std::array<std::shared_ptr<const PositionScheme> (*)(const ModelConfig&), kPositionVariants.size()> kSchemes = {
    make<ComplexFormer>, make<Rope>, make<XPos>, make<Alibi>, make<Sinusoidal>, make<Learned>, make<NoPositions>,
};

}  // namespace

std::shared_ptr<const PositionScheme> make_position_scheme(const ModelConfig& config) {
  return kSchemes[static_cast<size_t>(config.position)](config);
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
