#include "bench/libtorch/layers.h"

#include <cmath>
#include <limits>

#include "bench/libtorch/positions.h"

namespace phasor::torch_ref {

namespace {
torch::nn::Linear linear(int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); }
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
  const int64_t H = config.n_heads, P = config.pairs();
  if (config.position == Position::ComplexFormer) {
    // The cmha_init = rope values; Model::initialize applies `paper` when asked.
    delta = register_parameter("delta", torch::ones({H, P}));
    phase_bias = register_parameter("phase_bias", torch::zeros({H, P}));
    beta = register_parameter("beta", torch::ones({H}));
  } else if (config.variant().alibi_bias) {
    alibi_slopes = register_buffer("alibi_slopes", torch::tensor(torch_ref::alibi_slopes(H), torch::kFloat64));
  }
}

torch::Tensor AttentionImpl::split_heads(const torch::Tensor& t) const {
  return t.view({t.size(0), t.size(1), config.n_heads, config.head_dim()}).transpose(1, 2);
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::rotated_qk(const torch::Tensor& x, int64_t pos_offset) {
  auto q = wq(x), k = wk(x);
  const Position pos = config.position;
  if (!config.is_rotary()) return {split_heads(q), split_heads(k)};

  const int64_t B = x.size(0), N = x.size(1), H = config.n_heads, P = config.pairs(), d = config.head_dim();
  const auto device = x.device();
  // Tables are rounded to the activations' dtype (float32 in use; float64 for gradient checks).
  const auto real_dtype = x.scalar_type(), complex_dtype = c10::toComplexType(real_dtype);
  // z(u)_j = u_{2j} + i u_{2j+1}: a zero-copy complex view [B, N, H, P].
  const auto complex_view = [&](const torch::Tensor& t) { return torch::view_as_complex(t.view({B, N, H, P, 2})); };
  const auto back_to_real = [&](const torch::Tensor& z) { return torch::view_as_real(z).reshape({B, N, H, d}).transpose(1, 2); };

  if (pos == Position::Rope || pos == Position::XPos) {
    // Rotations [N, 1, P], built in float64 and rounded once.
    auto angles = rotary_angles(N, pos_offset, d, config.rope_base, device);
    auto q_scale = torch::ones_like(angles), k_scale = q_scale;
    if (pos == Position::XPos) {
      q_scale = xpos_scales(N, pos_offset, d, config.xpos_scale_base, device);
      k_scale = q_scale.reciprocal();
    }
    auto q_rot = torch::polar(q_scale, angles).to(complex_dtype).unsqueeze(1);
    auto k_rot = torch::polar(k_scale, angles).to(complex_dtype).unsqueeze(1);
    return {back_to_real(complex_view(q) * q_rot), back_to_real(complex_view(k) * k_rot)};
  }

  // complexformer: Euler transform z = r e^{i phi}, then the head-wise adaptive
  // differential rotation delta * phi (+ phase_bias for queries) + beta * m * w.
  auto position_angle = beta.view({H, 1}) * rotary_angles(N, pos_offset, d, config.rope_base, device)
                                                 .to(real_dtype)
                                                 .unsqueeze(1);  // [N, H, P]
  const auto euler = [&](const torch::Tensor& t) {
    auto z = complex_view(t);
    auto re = torch::real(z), im = torch::imag(z);
    return std::make_pair(torch::sqrt(re * re + im * im + kEulerEps), euler_phase(re, im));
  };
  auto [r_q, phi_q] = euler(q);
  auto [r_k, phi_k] = euler(k);
  auto q_rotated = torch::polar(r_q, delta * phi_q + phase_bias + position_angle);
  auto k_rotated = torch::polar(r_k, delta * phi_k + position_angle);
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
