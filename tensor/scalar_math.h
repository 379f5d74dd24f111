#pragma once
// The scalar maths of the elementwise ops, written once for every backend:
// the CPU kernels (tensor/cpu/elementwise.cpp, compiled by the host compiler
// with std::complex) and the CUDA ones (cuda/elementwise.cu, compiled by nvcc
// with cuda::std::complex) call these same functions, so both backends apply
// the same formulas, NaN rules and signed-zero rules.
#include <cstdint>
#include <complex>
#include <type_traits>

#include "tensor/op_types.h"

#if defined(__CUDACC__)
#include <cuda/std/cmath>
#include <cuda/std/complex>
#define PHASOR_SCALAR __host__ __device__ __forceinline__
#else
#include <cmath>
#define PHASOR_SCALAR inline __attribute__((always_inline))
#endif

namespace phasor::scalar {

#if defined(__CUDACC__)
namespace math = ::cuda::std;
#else
namespace math = ::std;
#endif

// Complex types of either library: std::complex on the host, cuda::std::complex on the device.
template <class T> struct complex_traits : std::false_type { using real = T; };
template <class R> struct complex_traits<std::complex<R>> : std::true_type { using real = R; };
#if defined(__CUDACC__)
template <class R> struct complex_traits<::cuda::std::complex<R>> : std::true_type { using real = R; };
#endif
template <class T> constexpr bool is_complex = complex_traits<T>::value;
template <class T> using real_t = typename complex_traits<T>::real;

constexpr double kPi = 3.14159265358979323846;

// Value conversion between any two types; complex -> real keeps the real part.
template <class D, class S>
PHASOR_SCALAR D convert(S v) {
  if constexpr (is_complex<S> && !is_complex<D>) return static_cast<D>(v.real());
  else if constexpr (is_complex<D> && !is_complex<S>) return D(static_cast<real_t<D>>(v), 0);
  else if constexpr (is_complex<D> && is_complex<S>) return D(static_cast<real_t<D>>(v.real()), static_cast<real_t<D>>(v.imag()));
  else return static_cast<D>(v);
}

// Every unary op whose result has the input's type (abs and angle: below).
// int64 keeps Neg, Square, Sign and Conj; the others never see it.
template <class T>
PHASOR_SCALAR T unary_value(ops::Unary op, T x) {
  using ops::Unary;
  using R = real_t<T>;
  if constexpr (std::is_same_v<T, int64_t>) {
    switch (op) {
      case Unary::Neg: return -x;
      case Unary::Square: return x * x;
      case Unary::Sign: return (x > 0) - (x < 0);
      default: return x;  // Conj
    }
  } else {
    switch (op) {
      case Unary::Neg: return -x;
      case Unary::Exp: return math::exp(x);
      case Unary::Log: return math::log(x);
      case Unary::Sqrt: return math::sqrt(x);
      case Unary::Rsqrt: return R(1) / math::sqrt(x);
      case Unary::Sin: return math::sin(x);
      case Unary::Cos: return math::cos(x);
      case Unary::Tanh: return math::tanh(x);
      case Unary::Sigmoid: return R(1) / (R(1) + math::exp(-x));
      case Unary::Silu: return x / (R(1) + math::exp(-x));
      case Unary::Reciprocal: return R(1) / x;
      case Unary::Square: return x * x;
      case Unary::Conj:
        if constexpr (is_complex<T>) return math::conj(x);
        else return x;
      case Unary::Sign:
        if constexpr (is_complex<T>) {
          const R a = math::abs(x);
          return a == R(0) ? T(0) : x / a;
        } else {
          return T((x > R(0)) - (x < R(0)));
        }
      case Unary::Gelu:
        if constexpr (!is_complex<T>) return R(0.5) * x * (R(1) + math::erf(x * R(0.7071067811865476)));
        break;
      case Unary::Softplus:  // max(x, 0) + log1p(exp(-|x|)): no overflow for any x, and exp(x) itself far below 0
        if constexpr (!is_complex<T>) return (x > R(0) ? x : R(0)) + math::log1p(math::exp(-(x < R(0) ? -x : x)));
        break;
      case Unary::GeluDerivative:  // Phi(x) + x phi(x)
        if constexpr (!is_complex<T>)
          return R(0.5) * (R(1) + math::erf(x * R(0.7071067811865476))) + x * math::exp(R(-0.5) * x * x) * R(0.3989422804014327);
        break;
      default: break;
    }
    return x;  // unreachable: the front-end refuses the other dtype/op pairs
  }
}

// |x| (the modulus for complex x; int64 stays int64).
template <class T>
PHASOR_SCALAR real_t<T> abs_value(T x) {
  if constexpr (std::is_same_v<T, int64_t>) return x < 0 ? -x : x;
  else return static_cast<real_t<T>>(math::abs(x));
}
// arg(x); for real x, pi when x < 0 and 0 otherwise.
template <class T>
PHASOR_SCALAR real_t<T> angle_value(T x) {
  if constexpr (is_complex<T>) return math::arg(x);
  else return x < T(0) ? static_cast<real_t<T>>(kPi) : real_t<T>(0);
}

template <class T>
PHASOR_SCALAR T binary_value(ops::Binary op, T a, T b) {
  using ops::Binary;
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Pow:
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<T>(math::pow(static_cast<double>(a), static_cast<double>(b)));
      else return math::pow(a, b);
    case Binary::Maximum:
      if constexpr (!is_complex<T>) return (a != a || a > b) ? a : b;  // NaN propagates
      break;
    case Binary::Minimum:
      if constexpr (!is_complex<T>) return (a != a || a < b) ? a : b;
      break;
    case Binary::Atan2:
      if constexpr (!is_complex<T> && !std::is_same_v<T, int64_t>) return math::atan2(a, b);
      break;
    case Binary::Count: break;  // not an op
  }
  return a;
}

// Complex types order nothing: only Eq and Ne reach them.
template <class T>
PHASOR_SCALAR bool compare_value(ops::Compare op, T p, T q) {
  using ops::Compare;
  if constexpr (is_complex<T>) {
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
}

// m e^{i p} as the complex type C.
template <class C, class R>
PHASOR_SCALAR C polar_value(R m, R p) {
  return C(m * math::cos(p), m * math::sin(p));
}

// x^p, with the two exponents the models use computed as x x and sqrt(x). The
// mode is chosen once per call (pow_mode), so each kernel loop stays branch-free.
enum class PowMode { General, Square, Sqrt };
inline PowMode pow_mode(double p) { return p == 2.0 ? PowMode::Square : p == 0.5 ? PowMode::Sqrt : PowMode::General; }
template <PowMode M, class T>
PHASOR_SCALAR T pow_scalar_value(T x, real_t<T> p) {
  if constexpr (M == PowMode::Square) return x * x;
  else if constexpr (M == PowMode::Sqrt) return math::sqrt(x);
  else return math::pow(x, p);
}

// One AdamW element update (PyTorch's formula), the step's constants precomputed in T.
template <class T>
struct AdamWConstants {
  T decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, bias_correction2_sqrt, step_size;
};
// A step's hyperparameters in float64, as the host has them; the constants in T
// from them and the step's bias corrections (given here, or read on the device).
struct AdamWHyper {
  double lr, weight_decay, beta1, beta2, eps;
  template <class T>
  PHASOR_SCALAR AdamWConstants<T> constants(double bias_correction1, double bias_correction2_sqrt) const {
    return {static_cast<T>(1.0 - lr * weight_decay), static_cast<T>(beta1),  static_cast<T>(beta2),
            static_cast<T>(1.0 - beta1),             static_cast<T>(1.0 - beta2), static_cast<T>(eps),
            static_cast<T>(bias_correction2_sqrt),   static_cast<T>(lr / bias_correction1)};
  }
};
// A device-decided step (nn::AdamW's schedule {apply, bc1, bc2_sqrt}, or null):
// false where it is not to be taken; else the corrections to use, the
// schedule's where there is one.
PHASOR_SCALAR bool scheduled_corrections(const double* schedule, double& bias_correction1, double& bias_correction2_sqrt) {
  if (!schedule) return true;
  if (schedule[0] == 0.0) return false;
  bias_correction1 = schedule[1];
  bias_correction2_sqrt = schedule[2];
  return true;
}
template <class T>
PHASOR_SCALAR void adamw_update(T& p, T g, T& m, T& v, const AdamWConstants<T>& c) {
  p *= c.decay;
  m = m * c.beta1 + g * c.one_minus_beta1;
  v = v * c.beta2 + g * g * c.one_minus_beta2;
  const T denom = math::sqrt(v) / c.bias_correction2_sqrt + c.eps;
  p -= c.step_size * (m / denom);
}

// Products and sums rounded one by one. nvcc contracts a * b + c into one
// fused multiply-add by default; the host compiler (x86-64 without -march)
// does not. Where both backends must agree to the bit, as in a phase whose
// position term reaches thousands of radians, the device rounds explicitly.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
#else
template <class R>
PHASOR_SCALAR R mul_rn(R a, R b) {
  return a * b;
}
template <class R>
PHASOR_SCALAR R add_rn(R a, R b) {
  return a + b;
}
#endif

// ---- SwiGLU's gate (tensor/fused.h): silu(a) b, given s = sigmoid(a) (each
// backend computes it with its fastest exp) ----
template <class T>
PHASOR_SCALAR T swiglu_value(T a, T b, T s) {
  return a * s * b;
}
// The gradients of g-weighted silu(a) b: silu'(a) = s (1 + a (1 - s)).
template <class T>
PHASOR_SCALAR void swiglu_grads(T a, T b, T s, T g, T& da, T& db) {
  db = g * (a * s);
  da = g * b * (s * (T(1) + a * (T(1) - s)));
}

// ---- RoPE's frequency of pair j of `pairs`: w_j = base^(-2j / d), d = 2 pairs, in
// double. The one formula of the rotary tables (tensor/fused.cpp), the
// ComplexFormer rotation's kernels (tensor/cpu/rotation.cpp, cuda/fused.cu)
// and its reference (autograd/fused.cpp).
PHASOR_SCALAR double rope_frequency(double base, int64_t j, int64_t pairs) {
  return math::pow(base, -2.0 * static_cast<double>(j) / (2.0 * static_cast<double>(pairs)));
}

// ---- the ComplexFormer rotation's phase (tensor/fused.h), formed one way on every backend ----
// m w_j in double, rounded once to R (as the spec's reference does); beta scales it in R.
template <class R>
PHASOR_SCALAR R cmha_position_angle(double m, double w) {
  return static_cast<R>(mul_rn(m, w));
}
// theta = delta phi + phase_bias + beta (m w_j), each operation rounded in R.
template <class R>
PHASOR_SCALAR R cmha_theta(R delta, R phi, R bias, R beta, R position_angle) {
  return add_rn(add_rn(mul_rn(delta, phi), bias), mul_rn(beta, position_angle));
}

// ---- polar rotation (tensor/fused_ops.h): one element's gradients. With
// (mr, mi) the magnitude m(z) (mi = 0 for real z), dm = m'(z), t = (tc, ts),
// df = f'(angle) and G = (gr, gi): u = m t, and
//   dz = gain conj(t) G (complex z) or gain dm Re(conj(t) G) (real z: dzi unused),
//   dangle = gain df Im(conj(u) G),  dgain = Re(conj(u) G).
template <class R>
PHASOR_SCALAR void polar_grads(R mr, R mi, R dm, R tc, R ts, R df, R gain, R gr, R gi, bool complex_z, R& dzr, R& dzi, R& dangle,
                               R& dgain) {
  const R cr = tc * gr + ts * gi, ci = tc * gi - ts * gr;  // conj(t) G
  const R ur = mr * tc - mi * ts, ui = mr * ts + mi * tc;  // u
  dgain = ur * gr + ui * gi;
  dangle = gain * df * (ur * gi - ui * gr);
  dzr = complex_z ? gain * cr : gain * dm * cr;
  dzi = complex_z ? gain * ci : R(0);
}

}  // namespace phasor::scalar
