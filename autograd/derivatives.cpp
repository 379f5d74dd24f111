// Every derivative of the differentiable API, written as maths.
//
// Convention (docs/design.md, "Complex gradients", as PyTorch): for a real loss L and complex z = x + iy,
// the gradient is G_z = dL/dx + i dL/dy. For y = f(z) the chain rule reads
//     G_z = G_y * conj(df/dz) + conj(G_y) * (df/dz*),
// so a holomorphic f gives G_z = G_y * conj(f'(z)), and a real function of z
// gives G_z = G_y * 2 df/dz*. Formulas below return "raw" gradients; the
// engine then sums broadcast dims away and takes the real part for real
// inputs (autograd/engine.cpp), so none of that is repeated here.
//
// A first-order backward runs with grad mode off, so the ops below compute
// directly and record nothing (record() then costs nothing: autograd/node.h).
// Under create_graph (autograd/engine.cpp) grad mode is on during backward:
// the same formulas then record a graph, so every derivative is itself
// differentiable.
#include <cfloat>
#include <cmath>
#include <numeric>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace phasor {

using Grads = std::vector<Tensor>;
using ops::Binary;
using ops::Unary;

namespace {
Tensor imag_unit(const Tensor& like) { return scalar_tensor(c128(0, 1), complex_dtype(real_dtype(like.dtype()))); }

// A gradient shaped like `shape` that is `g` inside the slice and zero elsewhere
// (raw_slice and slice: the same slice as a raw view and as a differentiable op).
template <class RawSlice, class Slice>
Tensor embed(const Tensor& g, const Dims& shape, RawSlice raw_slice, Slice slice) {
  Tensor out = zeros(shape, g.dtype(), g.device());
  ops::copy_(raw_slice(out), g);
  return record("embed", out, {g}, [slice](const Tensor& gg) -> Grads { return {slice(gg)}; });
}

// sgn(x) = sign(x) for real x, a constant (derivative 0 almost everywhere);
// sgn(z) = z / |z| for complex z, 0 at z = 0. Its derivatives, from
// d sgn/dz = 1 / (2|z|) and d sgn/dz* = -sgn(z)^2 / (2|z|), give
// G_z = (G - conj(G) sgn(z)^2) / (2|z|), taken as 0 at z = 0.
Tensor sgn(const Tensor& t) {
  Tensor out = ops::unary(Unary::Sign, t);
  if (!t.is_complex()) return out;
  return record("sgn", out, {t}, [st = SavedTensor(t), so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor s = so.get(), r = abs(st.get());
    const Tensor zero = eq(r, zeros({}, r.dtype()));
    return {where(zero, zeros({}, g.dtype()), (g - conj(g) * s * s) / (2.0 * where(zero, ones({}, r.dtype()), r)))};
  });
}
}  // namespace


namespace {
// The shape `x` reduced over `dims` with keepdim.
Dims keepdim_shape(const Dims& shape, const std::vector<int64_t>& dims) {
  Dims out = shape;
  if (dims.empty()) return Dims::filled(shape.size(), 1);
  for (int64_t d : dims) out[wrap_dim(d, shape.size(), "sum")] = 1;
  return out;
}
}  // namespace

Tensor scalar_like(const Tensor& like, c128 value) {
  const DType base = is_inexact(like.dtype()) ? like.dtype() : DType::Float32;
  const DType dtype = value.imag() != 0.0 ? complex_dtype(real_dtype(base)) : real_dtype(base);
  // An operand beyond float's range is +-inf in single precision, as the
  // result in float would be (PyTorch's x * 1e300 is inf); only storing such
  // a value (fill_, full) is refused.
  const auto in_float = [dtype](double v) {
    return real_dtype(dtype) == DType::Float32 && std::isfinite(v) && std::abs(v) > FLT_MAX ? std::copysign(INFINITY, v) : v;
  };
  return scalar_tensor(c128(in_float(value.real()), in_float(value.imag())), dtype);
}

// ---------------------------------------------------------------- views

Tensor reshape(const Tensor& t, const Dims& shape) {
  return record("reshape", ops::reshape(t, shape), {t}, [in = t.shape()](const Tensor& g) -> Grads { return {reshape(g, in)}; });
}
Tensor view(const Tensor& t, const Dims& shape) {
  return record("view", ops::view(t, shape), {t}, [in = t.shape()](const Tensor& g) -> Grads { return {reshape(g, in)}; });
}
Tensor permute(const Tensor& t, const Dims& order) {
  Dims inverse = Dims::filled(order.size(), 0);
  for (int i = 0; i < order.size(); ++i) inverse[wrap_dim(order[i], t.dim(), "permute")] = i;
  return record("permute", ops::permute(t, order), {t}, [inverse](const Tensor& g) -> Grads { return {permute(g, inverse)}; });
}
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  return record("transpose", ops::transpose(t, d0, d1), {t}, [=](const Tensor& g) -> Grads { return {transpose(g, d0, d1)}; });
}
namespace {
// Records `slice`, the part [start, start + length) of t along dim, as a narrow of t.
Tensor record_narrow(const Tensor& t, const Tensor& slice, int64_t dim, int64_t start, int64_t length) {
  return record("narrow", slice, {t}, [=, in = t.shape()](const Tensor& g) -> Grads {
    return {embed(g, in, [&](const Tensor& o) { return ops::narrow(o, dim, start, length); },
                  [=](const Tensor& o) { return narrow(o, dim, start, length); })};
  });
}
}  // namespace
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  return record_narrow(t, ops::narrow(t, dim, start, length), dim, start, length);
}
Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  return record("select", ops::select(t, dim, index), {t}, [=, in = t.shape()](const Tensor& g) -> Grads {
    return {embed(g, in, [&](const Tensor& o) { return ops::select(o, dim, index); },
                      [=](const Tensor& o) { return select(o, dim, index); })};
  });
}
Tensor expand(const Tensor& t, const Dims& shape) {
  return record("expand", ops::expand(t, shape), {t}, [](const Tensor& g) -> Grads { return {g}; });  // engine sums
}
Tensor squeeze(const Tensor& t, int64_t dim) {
  return record("squeeze", ops::squeeze(t, dim), {t}, [in = t.shape()](const Tensor& g) -> Grads { return {reshape(g, in)}; });
}
Tensor unsqueeze(const Tensor& t, int64_t dim) {
  return record("unsqueeze", ops::unsqueeze(t, dim), {t}, [in = t.shape()](const Tensor& g) -> Grads { return {reshape(g, in)}; });
}
Tensor flatten(const Tensor& t, int64_t start, int64_t end) {
  return record("flatten", ops::flatten(t, start, end), {t}, [in = t.shape()](const Tensor& g) -> Grads { return {reshape(g, in)}; });
}
// z -> (x, y) pairs: G_z = G_x + i G_y, the pairs read back as a complex number.
Tensor view_as_real(const Tensor& t) {
  return record("view_as_real", ops::view_as_real(t), {t}, [](const Tensor& g) -> Grads {
    // The pairs must start at an even offset (a slice of a gradient may not): copy then.
    const bool aligned = g.is_contiguous() && g.impl()->offset % 2 == 0;
    return {view_as_complex(aligned ? g : clone(g))};
  });
}
Tensor view_as_complex(const Tensor& t) {
  return record("view_as_complex", ops::view_as_complex(t), {t}, [](const Tensor& g) -> Grads { return {view_as_real(g)}; });
}
// Re z: dL/dx = G, dL/dy = 0, so G_z = G (a real gradient; the engine widens it).
Tensor real(const Tensor& t) {
  if (!t.is_complex()) return t;
  return record("real", ops::real(t), {t}, [](const Tensor& g) -> Grads { return {g}; });
}
// Im z: dL/dx = 0, dL/dy = G, so G_z = i G.
Tensor imag(const Tensor& t) {
  return record("imag", ops::imag(t), {t}, [](const Tensor& g) -> Grads { return {complex(zeros({}, g.dtype()), g)}; });
}
Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  return record("contiguous", ops::contiguous(t), {t}, [](const Tensor& g) -> Grads { return {g}; });
}
Tensor clone(const Tensor& t) {
  return record("clone", ops::clone(t), {t}, [](const Tensor& g) -> Grads { return {g}; });
}
// The engine casts the gradient back to the input dtype (real part for real inputs).
Tensor to(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  return record("to", ops::to(t, dtype), {t}, [](const Tensor& g) -> Grads { return {g}; });
}
Tensor round_through(const Tensor& t, DType storage) {
  if (t.dtype() == storage) return t;
  return record("round_through", ops::to(ops::to(t, storage), t.dtype()), {t}, [](const Tensor& g) -> Grads { return {g}; });
}
Tensor to(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return record("to_device", ops::to_device(t, device), {t}, [from = t.device()](const Tensor& g) -> Grads {
    return {to(g, from)};
  });
}

// ---------------------------------------------------------------- arithmetic

Tensor add(const Tensor& a, const Tensor& b) {
  return record("add", ops::binary(Binary::Add, a, b), {a, b}, [](const Tensor& g) -> Grads { return {g, g}; });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return record("sub", ops::binary(Binary::Sub, a, b), {a, b}, [](const Tensor& g) -> Grads { return {g, -g}; });
}
// d(ab)/da = b: G_a = G conj(b), G_b = G conj(a).
Tensor mul(const Tensor& a, const Tensor& b) {
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return record("mul", ops::binary(Binary::Mul, a, b), {a, b},
                [sa = SavedTensor(need_b ? a : Tensor()), sb = SavedTensor(need_a ? b : Tensor())](const Tensor& g) -> Grads {
                  return {sb.defined() ? g * conj(sb.get()) : Tensor(), sa.defined() ? g * conj(sa.get()) : Tensor()};
                });
}
// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b.
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary(Binary::Div, a, b);
  return record("div", out, {a, b}, [sb = SavedTensor(b), so = SavedTensor(out, SavedTensor::Role::Output), need_b = b.requires_grad()](const Tensor& g) -> Grads {
    const Tensor grad_a = g / conj(sb.get());
    return {grad_a, need_b ? -grad_a * conj(so.get()) : Tensor()};
  });
}
// d(a^b)/da = b a^(b-1), d(a^b)/db = a^b log a.
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = ops::binary(Binary::Pow, a, b);
  return record("pow", out, {a, b},
                [sa = SavedTensor(a), sb = SavedTensor(b), so = SavedTensor(out, SavedTensor::Role::Output), need_b = b.requires_grad()](const Tensor& g) -> Grads {
                  const Tensor x = sa.get(), p = sb.get();
                  const Tensor grad_a = g * conj(p * pow(x, p - 1.0));
                  return {grad_a, need_b ? g * conj(so.get() * log(x)) : Tensor()};
                });
}
Tensor pow(const Tensor& a, double exponent) {
  return record("pow", ops::pow_scalar(a, exponent), {a}, [sa = SavedTensor(a), exponent](const Tensor& g) -> Grads {
    if (exponent == 0.0) return {zeros(g.shape(), g.dtype(), g.device())};
    return {g * conj(exponent * pow(sa.get(), exponent - 1.0))};
  });
}
// The larger input takes the gradient; ties share it equally (as PyTorch).
Tensor maximum(const Tensor& a, const Tensor& b) {
  return record("maximum", ops::binary(Binary::Maximum, a, b), {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g) -> Grads {
    const Tensor x = sa.get(), y = sb.get();
    const Tensor share = where(eq(x, y), g * 0.5, g);
    return {where(lt(x, y), zeros({}, g.dtype()), share), where(gt(x, y), zeros({}, g.dtype()), share)};
  });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return record("minimum", ops::binary(Binary::Minimum, a, b), {a, b}, [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g) -> Grads {
    const Tensor x = sa.get(), y = sb.get();
    const Tensor share = where(eq(x, y), g * 0.5, g);
    return {where(gt(x, y), zeros({}, g.dtype()), share), where(lt(x, y), zeros({}, g.dtype()), share)};
  });
}
// atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2).
Tensor atan2(const Tensor& y, const Tensor& x) {
  return record("atan2", ops::binary(Binary::Atan2, y, x), {y, x}, [sy = SavedTensor(y), sx = SavedTensor(x)](const Tensor& g) -> Grads {
    const Tensor a = sy.get(), b = sx.get();
    const Tensor scale = g / (a * a + b * b);
    return {scale * b, -scale * a};
  });
}

// ---------------------------------------------------------------- unary maths

Tensor neg(const Tensor& x) {
  return record("neg", ops::unary(Unary::Neg, x), {x}, [](const Tensor& g) -> Grads { return {-g}; });
}
// (e^z)' = e^z.
Tensor exp(const Tensor& x) {
  Tensor out = ops::unary(Unary::Exp, x);
  return record("exp", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads { return {g * conj(so.get())}; });
}
// (log z)' = 1/z.
Tensor log(const Tensor& x) {
  return record("log", ops::unary(Unary::Log, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads { return {g / conj(sx.get())}; });
}
// (sqrt z)' = 1 / (2 sqrt z).
Tensor sqrt(const Tensor& x) {
  Tensor out = ops::unary(Unary::Sqrt, x);
  return record("sqrt", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads { return {g / (2.0 * conj(so.get()))}; });
}
// (z^-1/2)' = -z^-3/2 / 2.
Tensor rsqrt(const Tensor& x) {
  Tensor out = ops::unary(Unary::Rsqrt, x);
  return record("rsqrt", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor r = conj(so.get());
    return {g * (-0.5) * r * r * r};
  });
}
Tensor sin(const Tensor& x) {
  return record("sin", ops::unary(Unary::Sin, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {g * conj(cos(sx.get()))};
  });
}
Tensor cos(const Tensor& x) {
  return record("cos", ops::unary(Unary::Cos, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {-g * conj(sin(sx.get()))};
  });
}
// tanh' = 1 - tanh^2.
Tensor tanh(const Tensor& x) {
  Tensor out = ops::unary(Unary::Tanh, x);
  return record("tanh", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor t = so.get();
    return {g * conj(1.0 - t * t)};
  });
}
// sigmoid' = s (1 - s).
Tensor sigmoid(const Tensor& x) {
  Tensor out = ops::unary(Unary::Sigmoid, x);
  return record("sigmoid", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor s = so.get();
    return {g * conj(s * (1.0 - s))};
  });
}
// silu(x) = x s(x): silu' = s (1 + x (1 - s)).
Tensor silu(const Tensor& x) {
  return record("silu", ops::unary(Unary::Silu, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    const Tensor v = sx.get(), s = sigmoid(v);
    return {g * conj(s * (1.0 + v * (1.0 - s)))};
  });
}
// softplus(x) = log(1 + exp(x)): softplus' = sigmoid(x).
Tensor softplus(const Tensor& x) {
  return record("softplus", ops::unary(Unary::Softplus, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {g * sigmoid(sx.get())};
  });
}
// gelu(x) = x Phi(x): gelu' = Phi(x) + x phi(x).
Tensor gelu(const Tensor& x) {
  return record("gelu", ops::unary(Unary::Gelu, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {g * gelu_derivative(sx.get())};
  });
}
// gelu'' = 2 phi(x) - x^2 phi(x) = phi(x) (2 - x^2), phi the standard normal density.
Tensor gelu_derivative(const Tensor& x) {
  return record("gelu_derivative", ops::unary(Unary::GeluDerivative, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    const Tensor v = sx.get();
    return {g * (exp(v * v * (-0.5)) * 0.3989422804014327 * (2.0 - v * v))};
  });
}
// |x|: real G sign(x); complex |z| = sqrt(z z*), 2 d|z|/dz* = z/|z|, so G_z = G sgn(z), 0 at z = 0.
Tensor abs(const Tensor& x) {
  return record("abs", ops::unary(Unary::Abs, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {g * sgn(sx.get())};
  });
}
Tensor square(const Tensor& x) {
  return record("square", ops::unary(Unary::Square, x), {x}, [sx = SavedTensor(x)](const Tensor& g) -> Grads {
    return {g * (2.0 * conj(sx.get()))};
  });
}
// (1/z)' = -1/z^2.
Tensor reciprocal(const Tensor& x) {
  Tensor out = ops::unary(Unary::Reciprocal, x);
  return record("reciprocal", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor r = conj(so.get());
    return {-g * r * r};
  });
}
// conj is antiholomorphic (d z*/dz* = 1): G_z = conj(G).
Tensor conj(const Tensor& z) {
  if (!z.is_complex()) return z;
  return record("conj", ops::unary(Unary::Conj, z), {z}, [](const Tensor& g) -> Grads { return {conj(g)}; });
}
// angle(z) = atan2(y, x): dL/dx = -G y/|z|^2, dL/dy = G x/|z|^2, so G_z = G i z/|z|^2
// = G i sgn(z)/|z|, written this way so 1e-30 + 0i does not underflow; 0 at z = 0.
Tensor angle(const Tensor& z) {
  return record("angle", ops::unary(Unary::Angle, z), {z}, [sz = SavedTensor(z)](const Tensor& g) -> Grads {
    const Tensor v = sz.get();
    if (!v.is_complex()) return {zeros(g.shape(), g.dtype(), g.device())};
    const Tensor r = abs(v);
    const Tensor safe_r = where(eq(r, zeros({}, r.dtype())), ones({}, r.dtype()), r);
    return {g * imag_unit(v) * sgn(v) / safe_r};
  });
}
// The phase of the spec's Euler transform: angle(z) forward, and the
// eps-regularised derivative dphi/d(x, y) = (-y, x) / (|z|^2 + eps) backward
// (docs/spec.md, "complexformer", step 1), so G_z = G i z / (|z|^2 + eps):
// finite at the origin and equal to angle's wherever |z|^2 >> eps. The fused
// rotation kernels use the same rule.
Tensor euler_phase(const Tensor& z, double eps) {
  PHASOR_CHECK(z.is_complex(), "euler_phase: expected a complex tensor, got ", z.dtype());
  return record("euler_phase", ops::unary(Unary::Angle, z), {z}, [sz = SavedTensor(z), eps](const Tensor& g) -> Grads {
    const Tensor v = sz.get();
    const Tensor eps_t = scalar_tensor(eps, real_dtype(v.dtype()));
    const Tensor r2 = square(abs(v)) + eps_t;
    return {g * imag_unit(v) * v / r2};
  });
}
// y = r e^{i theta}: dL/dr = Re(conj(G) e^{i theta}), dL/dtheta = Re(conj(G) i y).
// The engine takes real parts for the real inputs.
Tensor polar(const Tensor& abs_, const Tensor& angle_) {
  Tensor out = ops::polar(abs_, angle_);
  return record("polar", out, {abs_, angle_}, [st = SavedTensor(angle_), so = SavedTensor(out, SavedTensor::Role::Output)](const Tensor& g) -> Grads {
    const Tensor gc = conj(g);
    const Tensor unit = polar(ones({}, st.get().dtype()), st.get());
    return {gc * unit, gc * imag_unit(g) * so.get()};
  });
}
// y = re + i im: dL/dre = Re G, dL/dim = Im G.
Tensor complex(const Tensor& re, const Tensor& im) {
  return record("complex", ops::complex(re, im), {re, im}, [](const Tensor& g) -> Grads { return {real(g), imag(g)}; });
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return record("where", ops::where(cond, a, b), {a, b}, [sc = SavedTensor(cond)](const Tensor& g) -> Grads {
    const Tensor zero = zeros({}, g.dtype());
    return {where(sc.get(), g, zero), where(sc.get(), zero, g)};
  });
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, c128 value) {
  return record("masked_fill", ops::masked_fill(x, mask, value), {x}, [sm = SavedTensor(mask)](const Tensor& g) -> Grads {
    return {where(sm.get(), zeros({}, g.dtype()), g)};
  });
}

Tensor eq(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::compare(ops::Compare::Ge, a, b); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, c128 s) { return add(a, scalar_like(a, s)); }
Tensor operator-(const Tensor& a, c128 s) { return sub(a, scalar_like(a, s)); }
Tensor operator*(const Tensor& a, c128 s) { return mul(a, scalar_like(a, s)); }
Tensor operator/(const Tensor& a, c128 s) { return div(a, scalar_like(a, s)); }
Tensor operator+(c128 s, const Tensor& a) { return add(scalar_like(a, s), a); }
Tensor operator-(c128 s, const Tensor& a) { return sub(scalar_like(a, s), a); }
Tensor operator*(c128 s, const Tensor& a) { return mul(scalar_like(a, s), a); }
Tensor operator/(c128 s, const Tensor& a) { return div(scalar_like(a, s), a); }

// ---------------------------------------------------------------- reductions

// Sum: every summed element receives G.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return record("sum", ops::sum(x, dims, keepdim), {x}, [in = x.shape(), keep = keepdim_shape(x.shape(), dims)](const Tensor& g) -> Grads {
    return {expand(reshape(g, keep), in)};
  });
}
Tensor sum_to(const Tensor& x, const Dims& shape) {
  return record("sum_to", ops::sum_to(x, shape), {x}, [in = x.shape()](const Tensor& g) -> Grads { return {expand(g, in)}; });
}
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  return record("cumsum", ops::cumsum(x, dim, reverse), {x}, [dim, reverse](const Tensor& g) -> Grads { return {cumsum(g, dim, !reverse)}; });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Dims keep = keepdim_shape(x.shape(), dims);
  const double count = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(keep.numel(), 1));
  return record("mean", ops::mean(x, dims, keepdim), {x}, [in = x.shape(), keep, count](const Tensor& g) -> Grads {
    return {expand(reshape(g / count, keep), in)};
  });
}
namespace {
// max/min along a dim: the gradient goes to the selected element.
ops::ValuesIndices extreme(const char* name, ops::ValuesIndices r, const Tensor& x, int64_t dim, bool keepdim) {
  const int d = wrap_dim(dim, x.dim(), name);
  // The reduced dim is put back unless it is there (keepdim) or there is none (a 0-d x).
  const bool put_back = !keepdim && x.dim() > 0;
  r.values = record(name, r.values, {x}, [in = x.shape(), d, put_back, si = SavedTensor(r.indices)](const Tensor& g) -> Grads {
    const Tensor idx = put_back ? ops::unsqueeze(si.get(), d) : si.get();
    const Tensor gk = put_back ? unsqueeze(g, d) : g;
    return {scatter_add(in, d, idx, contiguous(gk))};
  });
  return r;
}
}  // namespace
ops::ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme("max", ops::max(x, dim, keepdim), x, dim, keepdim); }
ops::ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme("min", ops::min(x, dim, keepdim), x, dim, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return ops::argmax(x, dim, keepdim); }
// d logsumexp / dx = softmax(x).
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out = ops::logsumexp(x, dim, keepdim);
  const bool put_back = !keepdim && x.dim() > 0;  // as for max: a 0-d x has no dim to put back
  return record("logsumexp", out, {x}, [sx = SavedTensor(x), so = SavedTensor(out, SavedTensor::Role::Output), dim, put_back](const Tensor& g) -> Grads {
    const int d = wrap_dim(dim, sx.get().dim(), "logsumexp");
    const Tensor o = put_back ? unsqueeze(so.get(), d) : so.get(), gk = put_back ? unsqueeze(g, d) : g;
    return {gk * exp(sx.get() - o)};
  });
}
// ||z||: G_z = G z / ||z||, 0 where the norm is 0.
Tensor norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = ops::norm(x, dims, keepdim);
  return record("norm", out, {x}, [sx = SavedTensor(x), so = SavedTensor(out, SavedTensor::Role::Output), keep = keepdim_shape(x.shape(), dims)](const Tensor& g) -> Grads {
    const Tensor n = reshape(so.get(), keep);
    const Tensor safe = where(eq(n, zeros({}, n.dtype())), ones({}, n.dtype()), n);
    return {reshape(g, keep) * sx.get() / safe};
  });
}
// softmax: dx = y (g - sum(g y)).
Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor out = ops::softmax(x, dim);
  return record("softmax", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output), dim](const Tensor& g) -> Grads {
    const Tensor y = so.get();
    return {y * (g - sum(g * y, {dim}, true))};
  });
}
// log_softmax: dx = g - softmax(x) sum(g).
Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor out = ops::log_softmax(x, dim);
  return record("log_softmax", out, {x}, [so = SavedTensor(out, SavedTensor::Role::Output), dim](const Tensor& g) -> Grads {
    return {g - exp(so.get()) * sum(g, {dim}, true)};
  });
}

// ---------------------------------------------------------------- matmul

namespace {
// op(X)^H expressed as (tensor, flag) for a GEMM operand, without copies
// except for the rare complex transpose-without-conjugate.
std::pair<Tensor, MatOp> adjoint_of(const Tensor& x, MatOp op) {
  switch (op) {
    case MatOp::None: return {x, MatOp::ConjTranspose};
    case MatOp::ConjTranspose: return {x, MatOp::None};
    case MatOp::Transpose: return {conj(x), MatOp::None};
  }
  return {x, MatOp::None};
}
// Gradient of X from the gradient of op(X).
Tensor undo_op(const Tensor& g, MatOp op) {
  switch (op) {
    case MatOp::None: return g;
    case MatOp::Transpose: return transpose(g, -1, -2);
    case MatOp::ConjTranspose: return conj(transpose(g, -1, -2));
  }
  return g;
}
}  // namespace

// C = op_a(A) op_b(B): G_op(A) = G op_b(B)^H, G_op(B) = op_a(A)^H G.
Tensor matmul(const Tensor& a_in, const Tensor& b_in, MatOp op_a, MatOp op_b) {
  if (a_in.dim() == 1 || b_in.dim() == 1) {  // vectors as 1-row / 1-column matrices
    PHASOR_CHECK(op_a == MatOp::None && op_b == MatOp::None, "matmul: transpose flags need 2-d operands");
    const Tensor a = a_in.dim() == 1 ? unsqueeze(a_in, 0) : a_in, b = b_in.dim() == 1 ? unsqueeze(b_in, 1) : b_in;
    Tensor out = matmul(a, b);
    if (a_in.dim() == 1) out = squeeze(out, -2);
    if (b_in.dim() == 1) out = squeeze(out, -1);
    return out;
  }
  const bool need_a = a_in.requires_grad(), need_b = b_in.requires_grad();
  return record("matmul", ops::matmul(a_in, b_in, op_a, op_b), {a_in, b_in},
                [sa = SavedTensor(need_b ? a_in : Tensor()), sb = SavedTensor(need_a ? b_in : Tensor()), op_a, op_b,
                 sb_is_matrix = b_in.dim() == 2](const Tensor& g) -> Grads {
                  Tensor grad_a, grad_b;
                  if (sb.defined()) {
                    auto [b, flag] = adjoint_of(sb.get(), op_b);
                    grad_a = undo_op(matmul(g, b, MatOp::None, flag), op_a);
                  }
                  if (sa.defined()) {
                    const Tensor a = sa.get();
                    if (op_a == MatOp::None && a.dim() > 2 && a.dim() == g.dim() && a.is_contiguous() && sb_is_matrix) {
                      // A weight shared by a batch: one GEMM over the folded batch instead of per-item products summed.
                      // A strided gradient (the real part of a complex one: pope's, complexformer-seed's) is copied
                      // first: one pass, where the per-item products cost ten times the step.
                      const Tensor a2 = reshape(a, fold_to_matrix(a.shape())), g2 = reshape(contiguous(g), fold_to_matrix(g.shape()));
                      grad_b = undo_op(matmul(a2, g2, MatOp::ConjTranspose, MatOp::None), op_b);
                    } else {
                      auto [ah, flag] = adjoint_of(a, op_a);
                      grad_b = undo_op(matmul(ah, g, flag, MatOp::None), op_b);
                    }
                  }
                  return {grad_a, grad_b};
                });
}

// y = x op(w) in `compute`: with X, W the rounded operands and G the rounded
// gradient (all [rows, .] after folding x's batch), dX = G op(W)^T and
// dW = G^T X (op Transpose: W is [N, K]) or X^T G (op None: W is [K, N]).
Tensor matmul_in(DType compute, const Tensor& x, const Tensor& w, MatOp op_w, const Tensor& x_rounded, const Tensor& w_rounded) {
  PHASOR_CHECK(w.dim() == 2 && x.dim() >= 2 && op_w != MatOp::ConjTranspose && !is_complex(x.dtype()) && !is_complex(w.dtype()),
               "matmul_in: expects a real x [.., M, K] and a 2-d w (op None or Transpose), got ", x.shape(), " and ", w.shape());
  auto rounded = [compute](const Tensor& t, const Tensor& given, const char* name) {
    if (!given.defined()) return ops::to(t, compute);
    PHASOR_CHECK(given.dtype() == compute && given.shape() == t.shape(), "matmul_in: the rounded ", name, " must be ", name, "'s shape in ",
                 compute);
    return given;
  };
  const Tensor xc = rounded(x, x_rounded, "x"), wc = rounded(w, w_rounded, "w");
  const Tensor y = ops::matmul(xc, wc, MatOp::None, op_w, DType::Float32);
  const bool need_x = x.requires_grad(), need_w = w.requires_grad();
  return record("matmul_in", y, {x, w},
                [xs = need_w ? xc : Tensor(), ws = need_x ? wc : Tensor(), compute, op_w, x_dtype = x.dtype(),
                 w_dtype = w.dtype()](const Tensor& g) -> Grads {
                  PHASOR_CHECK(!GradMode::enabled(), "matmul_in: no second order through mixed precision (create_graph)");
                  const Tensor gc = ops::to(ops::contiguous(g), compute);
                  Tensor dx, dw;
                  if (ws.defined())
                    dx = ops::to(ops::matmul(gc, ws, MatOp::None, op_w == MatOp::None ? MatOp::Transpose : MatOp::None, DType::Float32),
                                 x_dtype);
                  if (xs.defined()) {
                    const Tensor x2 = ops::reshape(xs, fold_to_matrix(xs.shape())), g2 = ops::reshape(gc, fold_to_matrix(gc.shape()));
                    dw = op_w == MatOp::Transpose ? ops::matmul(g2, x2, MatOp::Transpose, MatOp::None, DType::Float32)
                                                  : ops::matmul(x2, g2, MatOp::Transpose, MatOp::None, DType::Float32);
                    dw = ops::to(dw, w_dtype);
                  }
                  return {dx, dw};
                });
}

// ---------------------------------------------------------------- indexing

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return record("index_select", ops::index_select(x, dim, index), {x}, [in = x.shape(), dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
    const Tensor idx = ops::reshape(si.get(), Dims{-1});
    return {index_add(zeros(in, g.dtype(), g.device()), dim, idx, contiguous(g))};
  });
}
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  PHASOR_CHECK(weight.dim() == 2, "embedding: weight must be [vocab, dim], got shape ", weight.shape());
  Dims shape = ids.shape();
  shape.push_back(weight.size(1));
  return reshape(index_select(weight, 0, ops::reshape(ids, Dims{-1})), shape);
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return record("index_add", ops::index_add(x, dim, index, src), {x, src}, [dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
    return {g, index_select(g, dim, ops::reshape(si.get(), Dims{-1}))};
  });
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return record("gather", ops::gather(x, dim, index), {x}, [in = x.shape(), dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
    return {scatter_add(in, dim, si.get(), g)};
  });
}
Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  return record("scatter_add", ops::scatter_add(shape, dim, index, src), {src}, [dim, si = SavedTensor(index)](const Tensor& g) -> Grads {
    return {gather(g, dim, si.get())};
  });
}
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = ops::cat(tensors, dim);
  std::vector<int64_t> sizes;  // -1: left out by cat (its gradient is empty)
  for (const Tensor& t : tensors) sizes.push_back(ops::skipped_by_cat(t) ? -1 : t.size(dim));
  return record("cat", out, tensors, [sizes, dim](const Tensor& g) -> Grads {
    Grads grads;
    int64_t at = 0;
    for (int64_t n : sizes) {
      if (n < 0) {
        grads.push_back(zeros(Dims{0}, g.dtype(), g.device()));
        continue;
      }
      grads.push_back(narrow(g, dim, at, n));
      at += n;
    }
    return grads;
  });
}
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  PHASOR_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  const int d = wrap_dim(dim, tensors.front().dim() + 1, "stack");  // a dim of the result
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}
namespace {
// The pieces of split and chunk are the tensor library's (ops::split holds the
// rule); each is recorded as a narrow of x at the offset where it starts.
std::vector<Tensor> record_pieces(const Tensor& x, std::vector<Tensor> pieces, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), "split");
  int64_t at = 0;
  for (Tensor& piece : pieces) {
    const int64_t n = piece.size(d);
    piece = record_narrow(x, piece, d, at, n);
    at += n;
  }
  return pieces;
}
}  // namespace
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) { return record_pieces(x, ops::split(x, size, dim), dim); }
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { return record_pieces(x, ops::chunk(x, chunks, dim), dim); }

}  // namespace phasor
