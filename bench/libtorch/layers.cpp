#include "bench/libtorch/layers.h"

#include <array>
#include <cmath>
#include <limits>

#include "bench/libtorch/positions.h"
#include "models/positions.h"
#include "tensor/error.h"

namespace phasor::torch_ref {

namespace {

torch::nn::Linear linear(int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }

// What a rotation takes: q and k as complex [B, N, H, P] views (pope: the real
// projections [B, N, H, d]), the first position, and the layer's position
// parameters in the scheme's order.
struct RotationInput {
  torch::Tensor q, k;
  int64_t offset;
  const ModelConfig& config;
  const std::vector<torch::Tensor>& parameters;
  const torch::Tensor& x;  // the layer's normalised input [B, N, D]
};
using Rotated = std::pair<torch::Tensor, torch::Tensor>;

// rope and xpos: q and k times rotations [N, 1, P] built in float64 and rounded
// once; xpos scales queries up by zeta_j^(m/S) and keys down by its reciprocal.
Rotated rotate_by_table(const RotationInput& in, bool xpos_scales_too) {
  const ModelConfig& c = in.config;
  const int64_t N = in.q.size(1), d = c.head_dim();
  const auto device = in.q.device();
  auto angles = rotary_angles(N, in.offset, d, c.rope_base, device);
  auto q_scale = torch::ones_like(angles), k_scale = q_scale;
  if (xpos_scales_too) {
    q_scale = xpos_scales(N, in.offset, d, c.xpos_scale_base, device);
    k_scale = q_scale.reciprocal();
  }
  const auto complex_dtype = in.q.scalar_type();  // tables rounded to the activations' dtype
  return {in.q * torch::polar(q_scale, angles).to(complex_dtype).unsqueeze(1),
          in.k * torch::polar(k_scale, angles).to(complex_dtype).unsqueeze(1)};
}
Rotated rope(const RotationInput& in) { return rotate_by_table(in, false); }
Rotated xpos(const RotationInput& in) { return rotate_by_table(in, true); }

// complexformer: Euler transform z = r e^{i phi}, then the head-wise adaptive
// differential rotation delta * phi (+ phase_bias for queries) + beta * m * w.
Rotated complexformer(const RotationInput& in) {
  const torch::Tensor &delta = in.parameters.at(0), &phase_bias = in.parameters.at(1), &beta = in.parameters.at(2);
  const int64_t N = in.q.size(1), H = in.config.n_heads;
  const auto real_dtype = c10::toRealValueType(in.q.scalar_type());
  auto position_angle = beta.view({H, 1}) * rotary_angles(N, in.offset, in.config.head_dim(), in.config.rope_base, in.q.device())
                                                 .to(real_dtype)
                                                 .unsqueeze(1);  // [N, H, P]
  const auto euler = [](const torch::Tensor& z) {
    auto re = torch::real(z), im = torch::imag(z);
    return std::make_pair(torch::sqrt(re * re + im * im + kEulerEps), euler_phase(re, im));
  };
  auto [r_q, phi_q] = euler(in.q);
  auto [r_k, phi_k] = euler(in.k);
  return {torch::polar(r_q, delta * phi_q + phase_bias + position_angle), torch::polar(r_k, delta * phi_k + position_angle)};
}

// carope: f = 1 / (1 + softplus(carope_w_h . x_t)) per head and token, and
// pair j turned by the running sum over the window of f^j (torch::cumsum).
Rotated carope(const RotationInput& in) {
  const int64_t P = in.q.size(3);
  const auto u = torch::matmul(in.x, in.parameters.at(0).t());  // [B, N, H]
  const auto log_f = -torch::log1p(torch::softplus(u));
  const auto j = torch::arange(P, u.options());
  const auto phi = torch::cumsum(torch::exp(log_f.unsqueeze(-1) * j), 1);  // [B, N, H, P]
  const auto turn = torch::polar(torch::ones_like(phi), phi);
  return {in.q * turn, in.k * turn};
}

// pope: softplus(q_c) e^{i m theta_c} and softplus(k_c) e^{i (n theta_c - pope_bias_{h,c})},
// theta_c = rope_base^(-c/d) over the d components, phases in float64 rounded once.
Rotated pope(const RotationInput& in) {
  const int64_t N = in.q.size(1), d = in.q.size(3);
  const auto device = in.q.device();
  const auto c = torch::arange(d, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  const auto theta = torch::pow(in.config.rope_base, -c / static_cast<double>(d));
  const auto angles = positions(N, in.offset, device).unsqueeze(1) * theta;  // [N, d]
  const auto complex_dtype = c10::toComplexType(in.q.scalar_type());
  const auto turn = torch::polar(torch::ones_like(angles), angles).to(complex_dtype).unsqueeze(1);  // [N, 1, d]
  const auto& bias = in.parameters.at(0);                                                       // [H, d]
  const auto unturn_bias = torch::polar(torch::ones_like(bias), -bias);
  return {torch::softplus(in.q) * turn, torch::softplus(in.k) * (turn * unturn_bias)};
}

// complexformer-seed: component c turned by tanh((x angle_q^T)_{hd+c}) (keys:
// angle_k), the queries gated by sigmoid(alpha_h); its distance bias is in scores().
Rotated complexformer_seed(const RotationInput& in) {
  const auto& p = in.parameters;
  const auto turn = [&](const torch::Tensor& angle_net) {
    const auto angle = torch::tanh(torch::matmul(in.x, angle_net.t())).view(in.q.sizes());
    return torch::polar(torch::ones_like(angle), angle);
  };
  const auto gate = torch::sigmoid(p.at(2)).view({1, 1, -1, 1});
  return {(in.q * gate) * turn(p.at(0)), in.k * turn(p.at(1))};
}

// The twin of each scheme's rotation (models/positions.cpp), one per row of
// kPositionVariants in its order; null where the variant does not rotate.
constexpr std::array<Rotated (*)(const RotationInput&), kPositionVariants.size()> kRotations = {
    complexformer, rope, xpos, carope, pope, complexformer_seed, nullptr, nullptr, nullptr, nullptr,
};
// A rotation exactly where the variant turns q and k: a row left out (a null
// from std::array's short initializer) fails here instead of skipping it.
constexpr bool rotations_match_variants() {
  for (size_t i = 0; i < kRotations.size(); ++i)
    if ((kRotations[i] != nullptr) != (kPositionVariants[i].rotary || kPositionVariants[i].complex_components)) return false;
  return true;
}
static_assert(rotations_match_variants(), "kRotations: one rotation per rotating variant, in kPositionVariants' order");

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({dim})); }

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return x * torch::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps) * weight;
}

FeedForwardImpl::FeedForwardImpl(int64_t d_model, int64_t d_ff)
    : w1(register_module("w1", linear(d_model, d_ff))),
      w2(register_module("w2", linear(d_ff, d_model))),
      w3(register_module("w3", linear(d_model, d_ff))) {}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) { return w2(torch::silu(w1(x)) * w3(x)); }

AttentionImpl::AttentionImpl(const ModelConfig& config)
    : config(config),
      wq(register_module("wq", linear(config.d_model, config.d_model))),
      wk(register_module("wk", linear(config.d_model, config.d_model))),
      wv(register_module("wv", linear(config.d_model, config.d_model))),
      wo(register_module("wo", linear(config.d_model, config.d_model))) {
  // The scheme's own parameters by name and shape; Model::initialize gives their values.
  for (const PositionParameter& p : make_position_scheme(config)->layer_parameters())
    position_parameters.push_back(register_parameter(p.name, torch::zeros(std::vector<int64_t>(p.shape.begin(), p.shape.end()))));
  if (config.variant().alibi_bias)
    alibi_slopes = register_buffer("alibi_slopes", torch::tensor(torch_ref::alibi_slopes(config.n_heads), torch::kFloat64));
  const auto rotation = kRotations[static_cast<size_t>(config.position)];
  PHASOR_CHECK((rotation != nullptr) == (config.is_rotary() || config.variant().complex_components),
               "torch_ref::Attention: kRotations disagrees with the variant table on '", config.position, "'");
}

torch::Tensor AttentionImpl::split_heads(const torch::Tensor& t) const {
  return t.view({t.size(0), t.size(1), config.n_heads, config.head_dim()}).transpose(1, 2);
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::rotated_qk(const torch::Tensor& x, int64_t pos_offset) {
  auto q = wq(x), k = wk(x);
  const auto rotation = kRotations[static_cast<size_t>(config.position)];
  if (rotation == nullptr) return {split_heads(q), split_heads(k)};

  const int64_t B = x.size(0), N = x.size(1), H = config.n_heads, P = config.pairs(), d = config.head_dim();
  // z(u)_j = u_{2j} + i u_{2j+1}: a zero-copy complex view [B, N, H, P] (pope reads the real components).
  const auto complex_view = [&](const torch::Tensor& t) {
    return config.is_rotary() ? torch::view_as_complex(t.view({B, N, H, P, 2})) : t.view({B, N, H, d});
  };
  const int64_t width = config.query_key_width();
  const auto back_to_real = [&](const torch::Tensor& z) { return torch::view_as_real(z).reshape({B, N, H, width}).transpose(1, 2); };
  const auto [q_rotated, k_rotated] = rotation({complex_view(q), complex_view(k), pos_offset, config, position_parameters, x});
  return {back_to_real(q_rotated), back_to_real(k_rotated)};
}

torch::Tensor AttentionImpl::scores(const torch::Tensor& x, int64_t pos_offset) {
  auto [q, k] = rotated_qk(x, pos_offset);
  // For the rotary variants this real matmul over interleaved (re, im) pairs is
  // exactly Re(q' conj(k')^T), without a complex GEMM.
  auto s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(config.head_dim()));
  if (config.variant().alibi_bias) {
    auto m = positions(x.size(1), pos_offset, x.device());
    auto distance = m.unsqueeze(1) - m.unsqueeze(0);  // m - n
    s = s - (alibi_slopes.view({-1, 1, 1}) * distance).to(s.scalar_type());
  }
  if (config.position == Position::ComplexFormerSeed) {  // + sigmoid(beta_h) rel_bias[min(m - n, R)] (0 past the diagonal, masked)
    const int64_t N = x.size(1);
    const auto i = torch::arange(N, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    const auto bin = (i.unsqueeze(1) - i.unsqueeze(0)).clamp(0, config.max_rel_pos);  // [N, N]
    const auto table = torch::sigmoid(position_parameters.at(3)).unsqueeze(1) * position_parameters.at(4).unsqueeze(0);  // [H, R + 1]
    s = s + table.index({torch::indexing::Slice(), bin});
  }
  return s;
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, int64_t pos_offset) {
  const int64_t B = x.size(0), N = x.size(1);
  auto s = scores(x, pos_offset);
  auto future = torch::ones({N, N}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  auto a = torch::softmax(s.masked_fill(future, -std::numeric_limits<float>::infinity()), -1);
  auto v = split_heads(wv(x));
  return wo(torch::matmul(a, v).transpose(1, 2).reshape({B, N, config.d_model}));
}

BlockImpl::BlockImpl(const ModelConfig& config)
    : attn_norm(register_module("attn_norm", RMSNorm(config.d_model, config.norm_eps))),
      attn(register_module("attn", Attention(config))),
      ffn_norm(register_module("ffn_norm", RMSNorm(config.d_model, config.norm_eps))),
      ffn(register_module("ffn", FeedForward(config.d_model, config.d_ff))) {}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, int64_t pos_offset) {
  auto h = x + attn(attn_norm(x), pos_offset);
  return h + ffn(ffn_norm(h));
}

}  // namespace phasor::torch_ref
