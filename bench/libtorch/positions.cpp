#include "bench/libtorch/positions.h"

#include <cmath>

namespace phasor::torch_ref {

namespace {

torch::TensorOptions wide(torch::Device device) { return torch::TensorOptions().dtype(torch::kFloat64).device(device); }

// w_j = base^(-2j/d), j = 0..d/2-1.
torch::Tensor frequencies(int64_t head_dim, double base, torch::Device device) {
  auto j = torch::arange(head_dim / 2, wide(device));
  return torch::pow(base, -2.0 * j / static_cast<double>(head_dim));
}

// The autograd node behind euler_phase.
struct EulerPhase : torch::autograd::Function<EulerPhase> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& re, const torch::Tensor& im) {
    ctx->save_for_backward({re, im});
    return torch::atan2(im, re);
  }

  // d phi = (re d im - im d re) / (|z|^2 + eps).
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& re = saved[0];
    const auto& im = saved[1];
    const auto g = grads[0] / (re * re + im * im + kEulerEps);
    return {-g * im, g * re};
  }
};

}  // namespace

torch::Tensor positions(int64_t n, int64_t offset, torch::Device device) {
  return torch::arange(offset, offset + n, wide(device));
}

torch::Tensor rotary_angles(int64_t n, int64_t offset, int64_t head_dim, double base, torch::Device device) {
  return torch::outer(positions(n, offset, device), frequencies(head_dim, base, device));
}

torch::Tensor xpos_scales(int64_t n, int64_t offset, int64_t head_dim, double scale_base, torch::Device device) {
  const double d = static_cast<double>(head_dim);
  auto zeta = (2.0 * torch::arange(head_dim / 2, wide(device)) + 0.4 * d) / (1.4 * d);
  return torch::pow(zeta.unsqueeze(0), positions(n, offset, device).unsqueeze(1) / scale_base);
}

std::vector<double> alibi_slopes(int64_t n_heads) {
  const auto series = [](int64_t n) {
    std::vector<double> s;
    for (int64_t i = 0; i < n; ++i) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(i + 1) / static_cast<double>(n)));
    return s;
  };
  int64_t p2 = 1;
  while (p2 * 2 <= n_heads) p2 *= 2;
  auto slopes = series(p2);
  const auto finer = series(2 * p2);
  for (size_t i = 0; static_cast<int64_t>(slopes.size()) < n_heads; i += 2) slopes.push_back(finer[i]);
  return slopes;
}

torch::Tensor sinusoidal_table(int64_t n, int64_t offset, int64_t d_model, torch::Device device) {
  // Column c uses i = c / 2: sin for even c, cos for odd c (d_model may be odd).
  auto column = torch::arange(d_model, wide(device));
  auto pair = torch::floor(column / 2.0);
  auto inv = torch::pow(10000.0, -2.0 * pair / static_cast<double>(d_model));
  auto angle = torch::outer(positions(n, offset, device), inv);
  auto odd = (torch::arange(d_model, torch::TensorOptions().dtype(torch::kLong).device(device)) % 2).to(torch::kBool);
  return torch::where(odd, torch::cos(angle), torch::sin(angle));
}

torch::Tensor euler_phase(const torch::Tensor& re, const torch::Tensor& im) { return EulerPhase::apply(re, im); }

}  // namespace phasor::torch_ref
