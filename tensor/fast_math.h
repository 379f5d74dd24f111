#pragma once
// Branch-free float32 atan2, sincos, exp, tanh and softplus that the compiler
// can vectorise (the libm calls cannot be), for the inner loops of the
// rotations, the fused attention and SwiGLU.
// Cephes-style: range reduction plus minimax polynomials; errors are a few
// float32 ulps (checked against libm in tests/test_fast_math.cpp).
#include <bit>
#include <cmath>
#include <cstdint>

namespace phasor::fastmath {

// Precision-generic front ends: float takes the fast path, double keeps libm.
inline double atan2(double y, double x);
inline void sincos(double t, double& s, double& c);
inline double exp(double x);
inline double tanh(double x);
inline void softplus_sigmoid(double x, double& softplus, double& sigmoid);

constexpr float kPi = 3.14159265358979f;
constexpr float kPiOver2 = 1.57079632679490f;
constexpr float kPiOver4 = 0.785398163397448f;

// atan(a) for a in [0, 1].
inline float atan_unit(float a) {
  // atan(a) = pi/4 + atan((a - 1) / (a + 1)) brings a > tan(pi/8) into [-0.1716, 0.4142].
  // Both branches are computed and one is selected: no division under a
  // condition, so the compiler can if-convert and vectorise the caller's loop.
  const bool reduce = a > 0.41421356f;
  const float reduced = (a - 1.0f) / (a + 1.0f);
  const float x = reduce ? reduced : a;
  const float z = x * x;
  const float p = (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z * x + x;
  return reduce ? p + kPiOver4 : p;
}

// atan2(y, x) with std::atan2's results for finite inputs, signed zeros
// included: atan2(+-0, +0) = +-0 and atan2(+-0, -0) = +-pi.
inline float atan2(float y, float x) {
  const float ax = std::fabs(x), ay = std::fabs(y);
  const float hi = ax > ay ? ax : ay, lo = ax > ay ? ay : ax;
  const float a = lo / (hi > 0.0f ? hi : 1.0f);  // 0 / 1 at the origin
  float r = atan_unit(a);
  r = ay > ax ? kPiOver2 - r : r;
  r = std::signbit(x) ? kPi - r : r;  // signbit, not x < 0: -0 is on the negative side
  return std::copysign(r, y);
}

// sin and cos of t. The reduction is exact while |t| <= kSincosExactRange;
// past it the error grows like |t| 2^-24 (float32's own spacing of t there).
constexpr float kSincosExactRange = 1e5f;
inline void sincos(float t, float& s, float& c) {
  // Quadrant q = round(t 2/pi), by the 1.5 * 2^23 trick (vectorises without SSE4.1): t ~ q pi/2 + r, |r| <= pi/4.
  const float q = (t * 0.636619772367581f + 12582912.0f) - 12582912.0f;
  // Cody-Waite: pi/2 split in three parts, each product q * part exact.
  const float r = ((t - q * 1.5703125f) - q * 4.837512969970703125e-4f) - q * 7.54978995489188216e-8f;
  const float z = r * r;
  const float sr = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
  const float cr = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
  // Quadrant bits (no short-circuit logic, which would block vectorisation):
  // odd quadrants swap sin and cos; sin is negative in 2, 3 and cos in 1, 2.
  const int quadrant = static_cast<int>(q);
  const bool swap = quadrant & 1;
  const float s0 = swap ? cr : sr, c0 = swap ? sr : cr;
  s = (quadrant & 2) ? -s0 : s0;
  c = ((quadrant + 1) & 2) ? -c0 : c0;
}

// e^x for x <= 88 (the softmax's exponent is never positive); x < -87.3 gives 0
// (e^x is then below the smallest normal float), -inf gives 0, NaN stays NaN.
// x > 88 gives e^88: enough for SwiGLU's sigmoid 1 / (1 + e^-a), which is
// then below 1e-38 either way.
// Always inlined, so that it is compiled for its caller's SIMD clone.
[[gnu::always_inline]] inline float exp(float x) {
  constexpr float kLowest = -87.3365447f, kHighest = 88.0f;
  const float finite = x != x ? 0.0f : x;  // NaN never reaches the float-to-int conversion below
  const float xc = finite < kLowest ? kLowest : (finite > kHighest ? kHighest : finite);
  // e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts, Cody-Waite), |r| <= ln2 / 2.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  const float p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r +
                   5.0000001201e-1f) * (r * r) + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);  // 2^n, n in [-126, 127]
  const float e = p * two_n;
  return x != x ? x : (x < kLowest ? 0.0f : e);
}

// log(1 + u) for u in [0, 1]: 2 atanh(s) with s = u / (2 + u) in [0, 1/3],
// whose odd series converges by 1/9 a term (the last kept term's successor is
// below 2e-8 of the sum).
[[gnu::always_inline]] inline float log1p_unit(float u) {
  const float s = u / (2.0f + u), z = s * s;
  const float p = ((((((z * (1.0f / 13) + 1.0f / 11) * z + 1.0f / 9) * z + 1.0f / 7) * z + 1.0f / 5) * z + 1.0f / 3) * z) * s + s;
  return 2.0f * p;
}

// softplus(x) = max(x, 0) + log(1 + e^-|x|), and its derivative sigmoid(x),
// from one exponential; no overflow for any x.
[[gnu::always_inline]] inline void softplus_sigmoid(float x, float& softplus, float& sigmoid) {
  const float ax = std::fabs(x);
  const float e = exp(-ax);  // in (0, 1]
  softplus = (x > 0.0f ? x : 0.0f) + log1p_unit(e);
  const float r = 1.0f / (1.0f + e);
  sigmoid = x >= 0.0f ? r : e * r;
}

// tanh(x): Cephes' odd polynomial below |x| = 0.625 (no cancellation near 0),
// 1 - 2 / (e^2|x| + 1) above, with x's sign; both computed, one selected.
[[gnu::always_inline]] inline float tanh(float x) {
  const float ax = std::fabs(x), z = x * x;
  const float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
  const float large = std::copysign(1.0f - 2.0f / (exp(2.0f * (ax < 44.0f ? ax : 44.0f)) + 1.0f), x);
  return ax < 0.625f ? small : large;
}

inline double atan2(double y, double x) { return std::atan2(y, x); }
inline double exp(double x) { return std::exp(x); }
inline double tanh(double x) { return std::tanh(x); }
inline void softplus_sigmoid(double x, double& softplus, double& sigmoid) {
  const double e = std::exp(-std::fabs(x));
  softplus = (x > 0.0 ? x : 0.0) + std::log1p(e);
  sigmoid = x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
inline void sincos(double t, double& s, double& c) {
  s = std::sin(t);
  c = std::cos(t);
}

}  // namespace phasor::fastmath
