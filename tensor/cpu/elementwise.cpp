// Elementwise CPU kernels: every op is one scalar function of
// tensor/scalar_math.h mapped by the strided loop (tensor/cpu/loop.h). The
// common ops get loops of their own, with the op fixed at compile time, so
// the compiler can vectorise them. CUDA twin: cuda/elementwise.cu.
#include <cmath>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/complex_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/bfloat16.h"
#include "tensor/random.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

using ops::Binary;
using ops::Unary;
using scalar::binary_value;
using scalar::unary_value;

namespace {
// A conversion to or from bfloat16: unit-stride runs between float32 and
// bfloat16 go to the bulk converters (tensor/bfloat16.h), the rest element by element.
template <class D, class S>
void convert_bf16(const Tensor& dst, const Tensor& src) {
  constexpr bool bulk = std::is_same_v<D, bf16> ? std::is_same_v<S, float> : std::is_same_v<S, bf16> && std::is_same_v<D, float>;
  if constexpr (std::is_same_v<D, S>) {
    map<D, S>(dst, {src}, [](S v) { return v; });  // the bits as they are (a signalling NaN stays one)
  } else if constexpr (!bulk) {
    map<D, S>(dst, {src}, [](S v) { return element_cast<D>(v); });
  } else {
    run(strided_plan<2>(dst, {src}), [](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
        if constexpr (std::is_same_v<D, bf16>) float_to_bf16(reinterpret_cast<const float*>(p[1]), reinterpret_cast<bf16*>(p[0]), n);
        else bf16_to_float(reinterpret_cast<const bf16*>(p[1]), reinterpret_cast<float*>(p[0]), n);
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<D*>(p[0] + i * s[0]) = element_cast<D>(*reinterpret_cast<const S*>(p[1] + i * s[1]));
      }
    });
  }
}
}  // namespace

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  dispatch_storage(dst.dtype(), [&]<class D>() {
    dispatch_storage(src.dtype(), [&]<class S>() {
      if constexpr (std::is_same_v<D, bf16> || std::is_same_v<S, bf16>) convert_bf16<D, S>(dst, src);
      else map<D, S>(dst, {src}, [](S v) { return scalar::convert<D>(v); });
    });
  });
}

void CpuBackend::fill(const Tensor& dst, c128 value) {
  dispatch_storage(dst.dtype(), [&]<class T>() {
    T v;
    if constexpr (std::is_same_v<T, bf16>) v = element_cast<bf16>(value);
    else v = scalar::convert<T>(value);
    map<T>(dst, {}, [v]() { return v; });
  });
}

void CpuBackend::unary(Unary op, const Tensor& out, const Tensor& x) {
  if (complex64_unary(op, out, x)) return;  // abs, angle, exp of complex64, vectorised (tensor/cpu/complex_math.h)
  dispatch(x.dtype(), [&]<class T>() {
    using R = real_of<T>;
    if constexpr (std::is_same_v<T, bool>) {
    } else if (op == Unary::Abs) {
      map<R, T>(out, {x}, [](T v) { return scalar::abs_value(v); });
    } else if (op == Unary::Angle) {
      map<R, T>(out, {x}, [](T v) { return scalar::angle_value(v); });
    } else {
      switch (op) {
        case Unary::Neg: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Neg, v); }); break;
        case Unary::Exp: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Exp, v); }); break;
        case Unary::Sigmoid: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Sigmoid, v); }); break;
        case Unary::Silu: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Silu, v); }); break;
        case Unary::Square: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Square, v); }); break;
        case Unary::Rsqrt: map<T, T>(out, {x}, [](T v) { return unary_value(Unary::Rsqrt, v); }); break;
        default: map<T, T>(out, {x}, [op](T v) { return unary_value(op, v); });
      }
    }
  });
}

void CpuBackend::binary(Binary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (complex64_binary(op, out, a, b)) return;  // complex64 division, vectorised (tensor/cpu/complex_math.h)
  dispatch(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      switch (op) {
        case Binary::Add: map<T, T, T>(out, {a, b}, [](T p, T q) { return p + q; }); break;
        case Binary::Sub: map<T, T, T>(out, {a, b}, [](T p, T q) { return p - q; }); break;
        case Binary::Mul: map<T, T, T>(out, {a, b}, [](T p, T q) { return p * q; }); break;
        default: map<T, T, T>(out, {a, b}, [op](T p, T q) { return binary_value(op, p, q); });
      }
    }
  });
}

void CpuBackend::axpy(const Tensor& dst, const Tensor& src, double alpha) {
  dispatch_inexact(dst.dtype(), "axpy_", [&]<class T>() {
    const auto a = static_cast<real_of<T>>(alpha);
    map<T, T, T>(dst, {dst, src}, [a](T p, T q) { return p + a * q; });
  });
}

void CpuBackend::compare(ops::Compare op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch(a.dtype(), [&]<class T>() { map<bool, T, T>(out, {a, b}, [op](T p, T q) { return scalar::compare_value(op, p, q); }); });
}

void CpuBackend::where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch(out.dtype(), [&]<class T>() { map<T, bool, T, T>(out, {cond, a, b}, [](bool k, T p, T q) { return k ? p : q; }); });
}

void CpuBackend::polar(const Tensor& out, const Tensor& abs, const Tensor& angle) {
  dispatch_floating(abs.dtype(), "polar", [&]<class R>() {
    map<std::complex<R>, R, R>(out, {abs, angle}, [](R m, R p) { return scalar::polar_value<std::complex<R>>(m, p); });
  });
}

void CpuBackend::complex(const Tensor& out, const Tensor& re, const Tensor& im) {
  dispatch_floating(re.dtype(), "complex", [&]<class R>() {
    map<std::complex<R>, R, R>(out, {re, im}, [](R p, R q) { return std::complex<R>(p, q); });
  });
}

void CpuBackend::pow_scalar(const Tensor& out, const Tensor& x, double p) {
  using scalar::PowMode;
  dispatch_inexact(x.dtype(), "pow", [&]<class T>() {
    const auto e = static_cast<real_of<T>>(p);
    switch (scalar::pow_mode(p)) {
      case PowMode::Square: map<T, T>(out, {x}, [e](T v) { return scalar::pow_scalar_value<PowMode::Square>(v, e); }); break;
      case PowMode::Sqrt: map<T, T>(out, {x}, [e](T v) { return scalar::pow_scalar_value<PowMode::Sqrt>(v, e); }); break;
      case PowMode::General: map<T, T>(out, {x}, [e](T v) { return scalar::pow_scalar_value<PowMode::General>(v, e); }); break;
    }
  });
}

namespace {
template <class Draw>
void fill_random(const Tensor& dst, const char* op, Draw value) {
  const int64_t n = dst.numel();
  dispatch_floating(dst.dtype(), op, [&]<class R>() {
    R* p = static_cast<R*>(dst.raw_data());
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<R>(value(static_cast<uint64_t>(i)));
  });
}
}  // namespace

void CpuBackend::fill_uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first) {
  fill_random(dst, "uniform", [=](uint64_t i) { return low + (high - low) * philox_uniform(seed, first, i); });
}

void CpuBackend::fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first) {
  fill_random(dst, "normal", [=](uint64_t i) { return mean + std * philox_normal(seed, first, i); });
}

}  // namespace phasor::cpu
