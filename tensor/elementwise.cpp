// Elementwise CPU kernels: unary maths, binary arithmetic with broadcasting and
// type promotion, comparisons, and conversions. One functor per op, one loop
// (tensor/loop.h) for all of them.
#include "tensor/backend.h"
#include <cmath>

#include "tensor/loop.h"
#include "tensor/ops.h"

namespace phasor::ops {

const char* name(Unary op) {
  static const char* const names[] = {"neg",  "exp",  "log", "sqrt",       "rsqrt", "sin",   "cos",  "tanh",  "sigmoid",
                                      "silu", "gelu", "abs", "reciprocal", "conj",  "angle", "sign", "square",
                                      "gelu_derivative"};
  return names[static_cast<int>(op)];
}
const char* name(Binary op) {
  static const char* const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2"};
  return names[static_cast<int>(op)];
}

namespace {

// The operand of a kernel: `t` converted to dtype and broadcast to shape.
Tensor operand(const Tensor& t, DType dtype, const Dims& shape) { return expand(to(t, dtype), shape); }

template <class T>
inline __attribute__((always_inline)) T unary_value(Unary op, T x) {
  using R = real_of<T>;
  switch (op) {
    case Unary::Neg: return -x;
    case Unary::Exp: return std::exp(x);
    case Unary::Log: return std::log(x);
    case Unary::Sqrt: return std::sqrt(x);
    case Unary::Rsqrt: return R(1) / std::sqrt(x);
    case Unary::Sin: return std::sin(x);
    case Unary::Cos: return std::cos(x);
    case Unary::Tanh: return std::tanh(x);
    case Unary::Sigmoid: return R(1) / (R(1) + std::exp(-x));
    case Unary::Silu: return x / (R(1) + std::exp(-x));
    case Unary::Reciprocal: return R(1) / x;
    case Unary::Square: return x * x;
    case Unary::Conj:
      if constexpr (is_complex_v<T>) return std::conj(x);
      else return x;
    case Unary::Sign:
      if constexpr (is_complex_v<T>) {
        const R a = std::abs(x);
        return a == R(0) ? T(0) : x / a;
      } else {
        return T((x > R(0)) - (x < R(0)));
      }
    case Unary::Gelu:
      if constexpr (!is_complex_v<T>) return R(0.5) * x * (R(1) + std::erf(x * R(0.7071067811865476)));
      break;
    case Unary::GeluDerivative:  // Phi(x) + x phi(x)
      if constexpr (!is_complex_v<T>)
        return R(0.5) * (R(1) + std::erf(x * R(0.7071067811865476))) + x * std::exp(R(-0.5) * x * x) * R(0.3989422804014327);
      break;
    default: break;
  }
  return x;  // unreachable: dtype checks happen before the loop
}

bool complex_unsupported(Unary op) { return op == Unary::Gelu || op == Unary::GeluDerivative; }

template <class T>
T binary_value(Binary op, T a, T b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Pow:
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      else return std::pow(a, b);
    case Binary::Maximum:
      if constexpr (!is_complex_v<T>) return (a != a || a > b) ? a : b;  // NaN propagates
      break;
    case Binary::Minimum:
      if constexpr (!is_complex_v<T>) return (a != a || a < b) ? a : b;
      break;
    case Binary::Atan2:
      if constexpr (!is_complex_v<T> && !std::is_same_v<T, int64_t>) return std::atan2(a, b);
      break;
  }
  return a;
}

// Ops whose inputs are promoted to a floating type even when both are integers.
bool needs_inexact(Binary op) { return op == Binary::Div || op == Binary::Atan2; }

}  // namespace

Tensor unary(Unary op, const Tensor& x) {
  if (Backend* b = device_backend(name(op), x)) return b->unary(op, x);
  const DType in = x.dtype();
  PHASOR_CHECK(in != DType::Bool, name(op), ": not defined for bool tensors");
  PHASOR_CHECK(!(is_complex(in) && complex_unsupported(op)), name(op), ": not defined for complex dtype ", in);
  // These keep integer dtypes; the others compute in float32 for integer input.
  const bool keeps_int = op == Unary::Neg || op == Unary::Square || op == Unary::Conj || op == Unary::Sign || op == Unary::Abs;
  const DType work = (in == DType::Int64 && !keeps_int) ? DType::Float32 : in;
  const Tensor src = to(x, work);

  if (op == Unary::Abs || op == Unary::Angle) {  // complex -> real results
    Tensor out = empty(x.shape(), real_dtype(work));
    dispatch(work, [&]<class T>() {
      using R = real_of<T>;
      if constexpr (std::is_same_v<T, bool>) {
      } else if (op == Unary::Abs) {
        cpu::map<R, T>(out, {src}, [](T v) { return static_cast<R>(std::abs(v)); });
      } else if constexpr (is_complex_v<T>) {
        cpu::map<R, T>(out, {src}, [](T v) { return std::arg(v); });
      } else {
        cpu::map<R, T>(out, {src}, [](T v) { return v < T(0) ? static_cast<R>(M_PI) : R(0); });
      }
    });
    return out;
  }
  Tensor out = empty(x.shape(), work);
  dispatch(work, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      // One loop per op: the switch stays outside the element loop so each loop vectorises.
      switch (op) {
        case Unary::Neg: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Neg, v); }); break;
        case Unary::Exp: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Exp, v); }); break;
        case Unary::Sigmoid: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Sigmoid, v); }); break;
        case Unary::Silu: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Silu, v); }); break;
        case Unary::Square: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Square, v); }); break;
        case Unary::Rsqrt: cpu::map<T, T>(out, {src}, [](T v) { return unary_value(Unary::Rsqrt, v); }); break;
        default: cpu::map<T, T>(out, {src}, [op](T v) { return unary_value(op, v); });
      }
    }
  });
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  if (Backend* be = device_backend(name(op), a, {b})) return be->binary(op, a, b);
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), name(op));
  DType dt = promote(a.dtype(), b.dtype());
  if (dt == DType::Bool) dt = DType::Int64;
  if (needs_inexact(op) && !is_inexact(dt)) dt = DType::Float32;
  const bool real_only = op == Binary::Maximum || op == Binary::Minimum || op == Binary::Atan2;
  PHASOR_CHECK(!(real_only && is_complex(dt)), name(op), ": not defined for complex dtype ", dt, " (inputs ",
               a.dtype(), " and ", b.dtype(), ")");
  Tensor out = empty(shape, dt);
  const Tensor x = operand(a, dt, shape), y = operand(b, dt, shape);
  dispatch(dt, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      switch (op) {  // the common ops get their own loops so the compiler can vectorise them
        case Binary::Add: cpu::map<T, T, T>(out, {x, y}, [](T p, T q) { return p + q; }); break;
        case Binary::Sub: cpu::map<T, T, T>(out, {x, y}, [](T p, T q) { return p - q; }); break;
        case Binary::Mul: cpu::map<T, T, T>(out, {x, y}, [](T p, T q) { return p * q; }); break;
        default: cpu::map<T, T, T>(out, {x, y}, [op](T p, T q) { return binary_value(op, p, q); });
      }
    }
  });
  return out;
}

void binary_(Binary op, const Tensor& dst, const Tensor& src) {
  if (Backend* b = device_backend(name(op), dst, {src})) return b->binary_(op, dst, src);
  PHASOR_CHECK(promote(dst.dtype(), src.dtype()) == dst.dtype(), name(op), "_: result dtype ",
               promote(dst.dtype(), src.dtype()), " cannot be stored in place in a ", dst.dtype(), " tensor");
  const Tensor y = operand(src, dst.dtype(), dst.shape());
  dispatch(dst.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      cpu::map<T, T, T>(dst, {dst, y}, [op](T p, T q) { return binary_value(op, p, q); });
    }
  });
  dst.storage()->bump_version();
}

void axpy_(const Tensor& dst, const Tensor& src, double alpha) {
  if (Backend* b = device_backend("axpy_", dst, {src})) return b->axpy_(dst, src, alpha);
  const Tensor y = operand(src, dst.dtype(), dst.shape());
  dispatch_inexact(dst.dtype(), "axpy_", [&]<class T>() {
    const auto a = static_cast<real_of<T>>(alpha);
    cpu::map<T, T, T>(dst, {dst, y}, [a](T p, T q) { return p + a * q; });
  });
  dst.storage()->bump_version();
}

Tensor compare(Compare op, const Tensor& a, const Tensor& b) {
  if (Backend* be = device_backend("compare", a, {b})) return be->compare(op, a, b);
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), "compare");
  const DType dt = promote(a.dtype(), b.dtype());
  PHASOR_CHECK(!is_complex(dt) || op == Compare::Eq || op == Compare::Ne,
               "compare: ordering comparisons are not defined for complex dtype ", dt);
  Tensor out = empty(shape, DType::Bool);
  const Tensor x = operand(a, dt, shape), y = operand(b, dt, shape);
  dispatch(dt, [&]<class T>() {
    cpu::map<bool, T, T>(out, {x, y}, [op](T p, T q) -> bool {
      if constexpr (is_complex_v<T>) {
        return op == Compare::Eq ? p == q : p != q;
      } else {
        switch (op) {
          case Compare::Eq: return p == q;
          case Compare::Ne: return p != q;
          case Compare::Lt: return p < q;
          case Compare::Le: return p <= q;
          case Compare::Gt: return p > q;
          case Compare::Ge: return p >= q;
        }
        return false;
      }
    });
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (Backend* be = device_backend("where", cond, {a, b})) return be->where(cond, a, b);
  PHASOR_CHECK(cond.dtype() == DType::Bool, "where: condition must be bool, got ", cond.dtype());
  const Dims shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  const DType dt = promote(a.dtype(), b.dtype());
  Tensor out = empty(shape, dt);
  const Tensor c = expand(cond, shape), x = operand(a, dt, shape), y = operand(b, dt, shape);
  dispatch(dt, [&]<class T>() { cpu::map<T, bool, T, T>(out, {c, x, y}, [](bool k, T p, T q) { return k ? p : q; }); });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, c128 value) {
  return where(mask, scalar_tensor(value, x.dtype()), x);
}

Tensor polar(const Tensor& abs, const Tensor& angle) {
  if (Backend* b = device_backend("polar", abs, {angle})) return b->polar(abs, angle);
  const Dims shape = broadcast_shapes(abs.shape(), angle.shape(), "polar");
  const DType rt = promote(abs.dtype(), angle.dtype());
  PHASOR_CHECK(is_floating(rt), "polar: expected real floating inputs, got ", abs.dtype(), " and ", angle.dtype());
  Tensor out = empty(shape, complex_dtype(rt));
  const Tensor r = operand(abs, rt, shape), th = operand(angle, rt, shape);
  dispatch_floating(rt, "polar", [&]<class R>() {
    cpu::map<std::complex<R>, R, R>(out, {r, th}, [](R m, R p) { return std::complex<R>(m * std::cos(p), m * std::sin(p)); });
  });
  return out;
}

Tensor complex(const Tensor& re, const Tensor& im) {
  if (Backend* b = device_backend("complex", re, {im})) return b->complex(re, im);
  const Dims shape = broadcast_shapes(re.shape(), im.shape(), "complex");
  const DType rt = promote(re.dtype(), im.dtype());
  PHASOR_CHECK(is_floating(rt), "complex: expected real floating inputs, got ", re.dtype(), " and ", im.dtype());
  Tensor out = empty(shape, complex_dtype(rt));
  const Tensor x = operand(re, rt, shape), y = operand(im, rt, shape);
  dispatch_floating(rt, "complex", [&]<class R>() {
    cpu::map<std::complex<R>, R, R>(out, {x, y}, [](R p, R q) { return std::complex<R>(p, q); });
  });
  return out;
}

Tensor pow_scalar(const Tensor& x, double p) {
  if (Backend* b = device_backend("pow", x)) return b->pow_scalar(x, p);
  const DType dt = is_inexact(x.dtype()) ? x.dtype() : DType::Float32;
  Tensor out = empty(x.shape(), dt);
  const Tensor src = to(x, dt);
  dispatch_inexact(dt, "pow", [&]<class T>() {
    using R = real_of<T>;
    const R e = static_cast<R>(p);
    if (p == 2.0) cpu::map<T, T>(out, {src}, [](T v) { return v * v; });
    else if (p == 0.5) cpu::map<T, T>(out, {src}, [](T v) { return std::sqrt(v); });
    else cpu::map<T, T>(out, {src}, [e](T v) { return std::pow(v, e); });
  });
  return out;
}

// ---- copies and conversion ----

namespace {
// Value conversion between any two dtypes; complex -> real keeps the real part.
template <class D, class S>
D convert(S v) {
  if constexpr (is_complex_v<S> && !is_complex_v<D>) return static_cast<D>(v.real());
  else if constexpr (is_complex_v<D> && !is_complex_v<S>) return D(static_cast<real_of<D>>(v), 0);
  else return static_cast<D>(v);
}
}  // namespace

void copy_(const Tensor& dst, const Tensor& src) {
  PHASOR_CHECK(dst.device() == src.device(), "copy_: devices differ (", dst.device(), " and ", src.device(), ")");
  const Tensor s = expand(src, dst.shape());
  dispatch(dst.dtype(), [&]<class D>() {
  if (Backend* b = backend_for(dst.device())) return b->copy_(dst, src);
    dispatch(src.dtype(), [&]<class S>() {
      cpu::map<D, S>(dst, {s}, [](S v) { return convert<D>(v); });
    });
  });
  dst.storage()->bump_version();
}

void fill_(const Tensor& dst, c128 value) {
  if (Backend* b = backend_for(dst.device())) return b->fill_(dst, value);
  dispatch(dst.dtype(), [&]<class T>() {
    T v;
    if constexpr (is_complex_v<T>) v = T(static_cast<real_of<T>>(value.real()), static_cast<real_of<T>>(value.imag()));
    else v = static_cast<T>(value.real());
    cpu::map<T>(dst, {}, [v]() { return v; });
  });
  dst.storage()->bump_version();
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_(out, t);
  return out;
}

namespace {
DeviceCopy device_copy = nullptr;
}
void register_device_copy(DeviceCopy copy) { device_copy = copy; }

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  PHASOR_CHECK(device_copy != nullptr, "to: device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return device_copy(t, device);
}

Tensor to(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_(out, t);
  return out;
}

}  // namespace phasor::ops

namespace phasor {
Tensor contiguous_copy(const Tensor& t) { return ops::clone(t); }
}  // namespace phasor
