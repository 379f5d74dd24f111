// Vectorised complex64 abs, angle, exp and division (tensor/cpu/complex_math.h).
// Each run of the strided loop is one of two paths: unit-stride runs of
// ordinary values go through branch-free loops compiled for AVX-512, AVX2 and
// baseline x86-64 (tensor/cpu/simd.h); any other run maps the scalar maths of
// tensor/scalar_math.h element by element, as before.
#include "tensor/cpu/complex_math.h"

#include <cmath>
#include <cstdint>
#include <complex>

#include "tensor/cpu/loop.h"
#include "tensor/cpu/simd.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

namespace {

using c64f = std::complex<float>;

// |z| as sqrt(re^2 + im^2) in float64: no overflow or underflow for any
// float32 parts, one rounding to float32 at the end; an infinite part gives
// inf whatever the other (hypot's rule, NaN included).
PHASOR_SIMD_CLONES void abs_run(const float* z, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double re = z[2 * i], im = z[2 * i + 1];
    const float m = static_cast<float>(std::sqrt(re * re + im * im));
    out[i] = std::isinf(z[2 * i]) || std::isinf(z[2 * i + 1]) ? INFINITY : m;
  }
}

// Whether every part of the run is finite (its exponent bits not all set):
// integer tests, counted without a branch, so the check vectorises.
PHASOR_SIMD_CLONES bool finite_run(const float* z, int64_t n) {
  const auto* bits = reinterpret_cast<const uint32_t*>(z);
  int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
  for (int64_t i = 0; i < 2 * n; ++i) bad += (bits[i] & 0x7f800000u) == 0x7f800000u;
  return bad == 0;
}
// Whether every element is finite and in the range where the fast exp and
// sincos agree with libm: re in [-87, 88], |im| within sincos's exact range.
PHASOR_SIMD_CLONES bool exp_range_run(const float* z, int64_t n) {
  int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i)
    bad += !(z[2 * i] >= -87.0f && z[2 * i] <= 88.0f && std::fabs(z[2 * i + 1]) <= fastmath::kSincosExactRange);  // NaN fails too
  return bad == 0;
}

PHASOR_SIMD_CLONES void angle_run(const float* z, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = fastmath::atan2(z[2 * i + 1], z[2 * i]);
}

// e^re (cos im, sin im).
PHASOR_SIMD_CLONES void exp_run(const float* z, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float e = fastmath::exp(z[2 * i]);
    float s, c;
    fastmath::sincos(z[2 * i + 1], s, c);
    out[2 * i] = e * c;
    out[2 * i + 1] = e * s;
  }
}

// a / b = a conj(b) / |b|^2 in float64: exact enough for float32 parts of any
// size (no overflow, no underflow), one rounding at the end.
PHASOR_SIMD_CLONES void div_run(const float* a, const float* b, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    const double scale = 1.0 / (br * br + bi * bi);
    out[2 * i] = static_cast<float>((ar * br + ai * bi) * scale);
    out[2 * i + 1] = static_cast<float>((ai * br - ar * bi) * scale);
  }
}
// Whether a and b are finite and no b is zero.
PHASOR_SIMD_CLONES bool div_inputs_run(const float* a, const float* b, int64_t n) {
  const auto *ba = reinterpret_cast<const uint32_t*>(a), *bb = reinterpret_cast<const uint32_t*>(b);
  int64_t bad = 0;
#pragma omp simd reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t br = bb[2 * i], bi = bb[2 * i + 1];
    bad += ((ba[2 * i] & 0x7f800000u) == 0x7f800000u) + ((ba[2 * i + 1] & 0x7f800000u) == 0x7f800000u) +
           ((br & 0x7f800000u) == 0x7f800000u) + ((bi & 0x7f800000u) == 0x7f800000u) + (((br | bi) & 0x7fffffffu) == 0u);
  }
  return bad == 0;
}

template <class Out, class Scalar>
void scalar_run(char* out, const char* in, int64_t out_stride, int64_t in_stride, int64_t n, Scalar f) {
  for (int64_t i = 0; i < n; ++i) *reinterpret_cast<Out*>(out + i * out_stride) = f(*reinterpret_cast<const c64f*>(in + i * in_stride));
}

}  // namespace

bool complex64_unary(ops::Unary op, const Tensor& out, const Tensor& x) {
  using ops::Unary;
  if (x.dtype() != DType::Complex64 || (op != Unary::Abs && op != Unary::Angle && op != Unary::Exp)) return false;
  run(strided_plan<2>(out, {x}), [op](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    const bool unit = s[1] == static_cast<int64_t>(sizeof(c64f)) && s[0] == (op == Unary::Exp ? 8 : 4);
    const auto* z = reinterpret_cast<const float*>(p[1]);
    switch (op) {
      case Unary::Abs:
        if (unit) abs_run(z, reinterpret_cast<float*>(p[0]), n);
        else scalar_run<float>(p[0], p[1], s[0], s[1], n, [](c64f v) { return scalar::abs_value(v); });
        break;
      case Unary::Angle:
        if (unit && finite_run(z, n)) angle_run(z, reinterpret_cast<float*>(p[0]), n);
        else scalar_run<float>(p[0], p[1], s[0], s[1], n, [](c64f v) { return scalar::angle_value(v); });
        break;
      default:  // Exp
        if (unit && exp_range_run(z, n)) exp_run(z, reinterpret_cast<float*>(p[0]), n);
        else scalar_run<c64f>(p[0], p[1], s[0], s[1], n, [](c64f v) { return scalar::unary_value(Unary::Exp, v); });
    }
  });
  return true;
}

bool complex64_binary(ops::Binary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.dtype() != DType::Complex64 || op != ops::Binary::Div) return false;
  run(strided_plan<3>(out, {a, b}), [](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    constexpr auto w = static_cast<int64_t>(sizeof(c64f));
    const auto *pa = reinterpret_cast<const float*>(p[1]), *pb = reinterpret_cast<const float*>(p[2]);
    if (s[0] == w && s[1] == w && s[2] == w && div_inputs_run(pa, pb, n)) {
      div_run(pa, pb, reinterpret_cast<float*>(p[0]), n);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<c64f*>(p[0] + i * s[0]) =
          scalar::binary_value(ops::Binary::Div, *reinterpret_cast<const c64f*>(p[1] + i * s[1]), *reinterpret_cast<const c64f*>(p[2] + i * s[2]));
  });
  return true;
}

}  // namespace phasor::cpu
