#pragma once
// What the LibTorch comparison suites share (torch_op_parity, torch_edge_shapes):
// a tensor's values read from LibTorch, the error measure and the comparison
// of a Phasor tensor with a LibTorch one, and LibTorch references that work
// around defects of Debian's LibTorch 1.13. Include after tests/helpers.h
// (with PHASOR_TEST_WITH_TORCH defined).
#include <cmath>
#include <complex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/helpers.h"

namespace phasor::test {

inline std::vector<std::complex<double>> values_of(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().resolve_conj().to(torch::kComplexDouble).contiguous();
  const auto* p = reinterpret_cast<const std::complex<double>*>(c.data_ptr());
  return {p, p + c.numel()};
}

inline bool all_finite(const torch::Tensor& t) {
  if (!t.defined()) return true;
  for (const auto& v : values_of(t))
    if (!std::isfinite(v.real()) || !std::isfinite(v.imag())) return false;
  return true;
}

// The error measure of compare() and distance(): the largest
// |got_i - want_i| / (s + |want_i|) with s = min(1, max_j |want_j|), relative
// to each element and, below 1, to the tensor's largest entry (not to 1: a
// tensor of values far below 1 would be compared absolutely, and pass with
// any values). Equal elements count 0 (also NaN against NaN, an infinity against the
// same infinity), any other NaN infinity; *at is the worst index.
// Both parts equal, or NaN in both (an infinity equals only itself).
inline bool same_value(std::complex<double> a, std::complex<double> b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return same(a.real(), b.real()) && same(a.imag(), b.imag());
}

inline double worst_error(const std::vector<std::complex<double>>& got, const std::vector<std::complex<double>>& want, size_t* at = nullptr) {
  double scale = 0.0;
  for (const auto& w : want) scale = std::max(scale, std::abs(w));
  const double s = std::min(1.0, scale);
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (same_value(got[i], want[i])) continue;
    const double d = std::abs(got[i] - want[i]);
    const double excess = d == 0.0 ? 0.0 : d / (s + std::abs(want[i]));
    if (!(excess <= worst)) {  // NaN counts as a mismatch
      worst = std::isnan(excess) ? INFINITY : excess;
      if (at) *at = i;
    }
  }
  return worst;
}

// "" when `p` matches `t` in shape, dtype and values within tol (worst_error);
// an undefined gradient counts as zeros.
inline std::string compare(const std::string& what, phasor::Tensor p, torch::Tensor t, double tol) {
  if (!p.defined() && !t.defined()) return "";
  if (!t.defined()) t = torch::zeros(sizes_of(p.shape()), torch::TensorOptions().dtype(torch_dtype(p.dtype())));
  if (!p.defined()) {
    const phasor::DType dt = t.scalar_type() == torch::kFloat          ? phasor::DType::Float32
                             : t.scalar_type() == torch::kComplexFloat  ? phasor::DType::Complex64
                             : t.scalar_type() == torch::kComplexDouble ? phasor::DType::Complex128
                                                                        : phasor::DType::Float64;
    p = phasor::zeros(phasor::Dims(t.sizes().vec()), dt);
  }
  std::ostringstream os;
  if (sizes_of(p.shape()) != t.sizes().vec()) {
    os << what << ": shape " << p.shape() << " vs LibTorch " << t.sizes();
    return os.str();
  }
  if (torch_dtype(p.dtype()) != t.scalar_type()) {
    os << what << ": dtype " << p.dtype() << " vs LibTorch " << t.scalar_type();
    return os.str();
  }
  const auto want = values_of(t);
  const auto got = phasor::ops::to(p, phasor::DType::Complex128).to_vector<std::complex<double>>();
  size_t at = 0;
  const double worst = worst_error(got, want, &at);
  if (worst > tol) {
    os << what << ": element " << at << " is " << got[at] << " vs LibTorch " << want[at] << " (relative error " << worst
       << ", tolerance " << tol << ")";
    return os.str();
  }
  return "";
}

// Transpose or conjugate-transpose in LibTorch, to mirror Phasor's MatOp flags.
inline torch::Tensor torch_op(const torch::Tensor& t, phasor::MatOp op) {
  if (op == phasor::MatOp::None) return t;
  const torch::Tensor tt = t.transpose(-1, -2);
  return op == phasor::MatOp::ConjTranspose ? tt.conj() : tt;
}
// Debian's LibTorch 1.13 returns 0 for the complex dot product (torch::dot, and
// so matmul of two vectors: the cdotu/zdotu return convention of its BLAS does
// not match), while matrix products are right. The reference therefore takes a
// vector-vector product as a 1x1 matrix product.
inline torch::Tensor torch_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.dim() == 1 && b.dim() == 1) return torch::matmul(a.unsqueeze(0), b.unsqueeze(1)).squeeze(-1).squeeze(-1);
  return torch::matmul(a, b);
}
// LibTorch 1.13's backward of view_as_real calls view_as_complex on the
// incoming gradient, which refuses odd strides even on size-1 dims (a
// transposed [2, 1] gradient, say); the reference builds the same pairs with
// stack, whose backward never sees such strides.
inline torch::Tensor torch_view_as_real(const torch::Tensor& t) {
  const torch::Tensor r = t.resolve_conj();
  return torch::stack({torch::real(r), torch::imag(r)}, -1);
}

}  // namespace phasor::test
