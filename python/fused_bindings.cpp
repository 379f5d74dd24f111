// The transformer's fused differentiable ops (autograd/fused.h) as phasor
// functions: causal attention in O(N d) memory, ComplexFormer's rotation, and
// the rotary tables with the rotation by them. phasor.torch puts the same
// ops inside PyTorch's autograd.
#include <cmath>
#include <optional>

#include <pybind11/stl.h>

#include "autograd/fused.h"
#include "python/bindings.h"
#include "python/gil.h"

namespace py = pybind11;
using namespace py::literals;

namespace phasor::python {

namespace {

Tensor or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

ops::PolarMagnitude parse_magnitude(const std::string& name) {
  if (name == "identity") return ops::PolarMagnitude::Identity;
  PHASOR_CHECK(name == "softplus", "polar_rotate: magnitude must be 'identity' or 'softplus', got '", name, "'");
  return ops::PolarMagnitude::Softplus;
}
ops::PolarAngle parse_angle_map(const std::string& name) {
  if (name == "identity") return ops::PolarAngle::Identity;
  PHASOR_CHECK(name == "tanh", "polar_rotate: angle_map must be 'identity' or 'tanh', got '", name, "'");
  return ops::PolarAngle::Tanh;
}

}  // namespace

void bind_fused(py::module_& m) {
  m.def("causal_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale,
                               std::optional<Tensor> alibi_slopes, int64_t offset, std::optional<Tensor> distance_bias) {
          PHASOR_CHECK(q.dim() == 4, "causal_attention: q must be [B, N, H, d], got ", q.dim(), " dimensions");
          const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
          return causal_attention(q, k, v, s, offset, or_undefined(alibi_slopes), or_undefined(distance_bias));
        }, "q"_a, "k"_a, "v"_a, "scale"_a = py::none(), "alibi_slopes"_a = py::none(), "offset"_a = 0, "distance_bias"_a = py::none(), ReleaseGil(),
        "softmax(scale q k^T - slope_h (i + offset - n) + distance_bias[h, min(i + offset - n, R)], causal) v over "
        "q [B, Nq, H, d], k [B, Nk, H, d] and v [B, Nk, H, dv] (real; dv may differ from d), fused: no [Nq, Nk] matrix is "
        "held. scale defaults to 1/sqrt(d); alibi_slopes [H] and distance_bias [H, R + 1] (with its gradient) are optional");
  m.def("cmha_rotate", [](const Tensor& z, const Tensor& delta, std::optional<Tensor> phase_bias, const Tensor& beta, int64_t offset,
                          double rope_base, std::optional<Tensor> frequencies) {
          return cmha_rotate(z, delta, or_undefined(phase_bias), beta, offset, rope_base, or_undefined(frequencies));
        },
        "z"_a, "delta"_a, "phase_bias"_a, "beta"_a, "offset"_a = 0, "rope_base"_a = 10000.0, "frequencies"_a = py::none(), ReleaseGil(),
        "ComplexFormer's Euler transform and adaptive rotation of complex z [B, N, H, P]: r exp(i (delta phi + phase_bias + "
        "beta m w_j)) with r, phi the modulus and phase of z, m = offset + n, w_j = rope_base^(-j/P); delta, phase_bias [H, P] "
        "(phase_bias None for keys), beta [H]; frequencies (float64 [P], optional) replace the w_j (context extension)");
  m.def("polar_rotate", [](const Tensor& z, const Tensor& angle, std::optional<Tensor> gain, const std::string& magnitude,
                           const std::string& angle_map) {
          return polar_rotate(z, angle, or_undefined(gain), parse_magnitude(magnitude), parse_angle_map(angle_map));
        },
        "z"_a, "angle"_a, "gain"_a = py::none(), "magnitude"_a = "identity", "angle_map"_a = "identity", ReleaseGil(),
        "the polar rotation of pope, carope and complexformer-seed, fused: gain_h m(z) exp(i f(angle)) over z [B, N, H, W] "
        "(complex, or real: m = identity or softplus), angle real and broadcast to z's shape (f = identity or tanh), gain [H] "
        "optional; the result is complex");
  m.def("rotary_table", [](int64_t n, int64_t pairs, int64_t offset, double base, double xpos_scale_base, DType dtype) {
          return ops::rotary_table(n, pairs, offset, base, xpos_scale_base, 1, dtype);
        }, "n"_a, "pairs"_a, "offset"_a = 0, "base"_a = 10000.0, "xpos_scale_base"_a = 0.0, "dtype"_a = DType::Complex64,
        "the complex [n, pairs] table exp(i (offset + m) w_j), w_j = base^(-j/pairs) (RoPE; XPos's scales when "
        "xpos_scale_base > 0); dtype complex64 or complex128");
  m.def("rotary", &rotate, "z"_a, "table"_a, ReleaseGil(),
        "z [B, N, H, P] complex times a rotary table [N, P] (phasor.rotary_table), broadcast over B and H: RoPE");
}

}  // namespace phasor::python
