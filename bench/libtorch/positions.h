#pragma once
// The position maths of docs/spec.md ("Attention variants") as LibTorch tensors: rotary
// frequencies and rotations, xPos scales, ALiBi slopes, the sinusoidal table
// and the eps-regularised phase of the Euler transform. Tables are computed in
// float64 and rounded once to float32 (docs/design.md, "Phases in float32 or wider").
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace phasor::torch_ref {

// eps_euler of the spec: r = sqrt(|z|^2 + eps), and the phase derivative's denominator.
inline constexpr double kEulerEps = 1e-9;

// Positions offset .. offset+n-1 as float64 on `device`.
torch::Tensor positions(int64_t n, int64_t offset, torch::Device device);

// m * w_j with w_j = base^(-2j/d), as [n, d/2] float64.
torch::Tensor rotary_angles(int64_t n, int64_t offset, int64_t head_dim, double base, torch::Device device);

// xPos query scales zeta_j^(m/S), zeta_j = (2j + 0.4 d) / (1.4 d), as [n, d/2]
// float64; keys use the reciprocal, zeta_j^(-n/S).
torch::Tensor xpos_scales(int64_t n, int64_t offset, int64_t head_dim, double scale_base, torch::Device device);

// ALiBi slopes s_h: 2^(-8(h+1)/H) for a power of two H; otherwise the slopes of
// the nearest lower power of two P2, then every other slope of the 2*P2 series.
std::vector<double> alibi_slopes(int64_t n_heads);

// PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...), as [n, D] float64.
torch::Tensor sinusoidal_table(int64_t n, int64_t offset, int64_t d_model, torch::Device device);

// phi = atan2(im, re) with atan2(0, 0) = 0, differentiated with the spec's
// denominator |z|^2 + kEulerEps so the gradient is finite at z = 0
// (torch::angle / torch::atan2 divide by |z|^2 alone and give NaN there).
torch::Tensor euler_phase(const torch::Tensor& re, const torch::Tensor& im);

}  // namespace phasor::torch_ref
