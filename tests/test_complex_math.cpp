// The vectorised complex64 abs, angle, exp and division (tensor/cpu/complex_math.h)
// against libm's complex128 results, over magnitudes from 1e-30 to 1e30, on
// contiguous and strided operands, and with the values that take the scalar
// path (infinities, NaN, zeros, division by zero, phases past sincos's range).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "phasor.h"

using namespace phasor;

namespace {
using c64f = std::complex<float>;
using c128d = std::complex<double>;

// Random complex64 values with log-uniform magnitudes and both signs in each part.
std::vector<c64f> draw(size_t n, uint64_t seed, double lo_exp, double hi_exp) {
  Generator g(seed);
  std::vector<c64f> v(n);
  const auto part = [&] {
    const double m = std::pow(10.0, lo_exp + (hi_exp - lo_exp) * g.next_unit());
    return static_cast<float>(g.next_unit() < 0.5 ? -m : m);
  };
  for (c64f& z : v) z = c64f(part(), part());
  return v;
}
Tensor tensor_of(const std::vector<c64f>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// |got - want| within `ulps` float32 spacings of the reference's magnitude
// scale (at least float32's smallest normal: a result in the subnormals is
// rounded to their fixed spacing); the reference is first rounded to float32,
// so a quotient past float32's range must be infinite.
bool close(double got, double want_exact, double scale, double ulps) {
  const double want = static_cast<float>(want_exact);
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= ulps * 0x1p-23 * std::max(std::abs(scale), 0x1p-126);
}
bool same(float got, float want) { return got == want || (std::isnan(got) && std::isnan(want)); }
}  // namespace

TEST_CASE("complex64 abs, angle, exp and division agree with libm over every magnitude, contiguous and strided") {
  const std::vector<c64f> a = draw(4096, 1, -30, 30), b = draw(4096, 2, -30, 30), small = draw(4096, 3, -3, 1.9);
  const Tensor ta = tensor_of(a), tb = tensor_of(b), ts = tensor_of(small);
  // A strided view over the same values: every other element of a doubled tensor.
  const Tensor strided = ops::narrow(reshape(ops::stack({ta, ta}, 1), {8192}), 0, 0, 8192);
  const Tensor every_other = as_strided(ops::contiguous(strided), {4096}, {2}, 0);
  const std::vector<float> abs_got = ops::unary(ops::Unary::Abs, ta).to_vector<float>();
  const std::vector<float> abs_strided = ops::unary(ops::Unary::Abs, every_other).to_vector<float>();
  const std::vector<float> angle_got = ops::unary(ops::Unary::Angle, ta).to_vector<float>();
  const std::vector<c64f> exp_got = ops::unary(ops::Unary::Exp, ts).to_vector<c64f>();
  const std::vector<c64f> div_got = ops::binary(ops::Binary::Div, ta, tb).to_vector<c64f>();
  int bad_abs = 0, bad_angle = 0, bad_exp = 0, bad_div = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const c128d za(a[i].real(), a[i].imag()), zb(b[i].real(), b[i].imag()), zs(small[i].real(), small[i].imag());
    bad_abs += !close(abs_got[i], std::abs(za), std::abs(za), 1) + (abs_got[i] != abs_strided[i]);
    bad_angle += !close(angle_got[i], std::arg(za), M_PI, 4);
    const c128d e = std::exp(zs), q = za / zb;
    bad_exp += !close(exp_got[i].real(), e.real(), std::abs(e), 4) + !close(exp_got[i].imag(), e.imag(), std::abs(e), 4);
    bad_div += !close(div_got[i].real(), q.real(), std::abs(q), 2) + !close(div_got[i].imag(), q.imag(), std::abs(q), 2);
  }
  CHECK(bad_abs == 0);
  CHECK(bad_angle == 0);
  CHECK(bad_exp == 0);
  CHECK(bad_div == 0);
}

TEST_CASE("complex64 abs, angle, exp and division keep libm's answers for infinities, NaN, zeros and far phases") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<c64f> special = {{inf, 1.0f}, {1.0f, -inf}, {inf, nan}, {nan, 2.0f}, {0.0f, 0.0f}, {-0.0f, 0.0f},
                                     {-1.0f, -0.0f}, {3.0f, 4e6f}, {100.0f, 1.0f}, {-100.0f, 1.0f}, {1.0f, 2.0f}};
  const Tensor t = tensor_of(special);
  const std::vector<float> abs_got = ops::unary(ops::Unary::Abs, t).to_vector<float>();
  const std::vector<float> angle_got = ops::unary(ops::Unary::Angle, t).to_vector<float>();
  const std::vector<c64f> exp_got = ops::unary(ops::Unary::Exp, t).to_vector<c64f>();
  for (size_t i = 0; i < special.size(); ++i) {
    const c64f z = special[i];
    CAPTURE(i);
    const float want_abs = std::abs(z), want_angle = std::arg(z);
    CHECK(same(abs_got[i], want_abs));
    CHECK(same(angle_got[i], want_angle));
    CHECK(std::signbit(angle_got[i]) == std::signbit(want_angle));
    const c64f want_exp = std::exp(z);
    CHECK(same(exp_got[i].real(), want_exp.real()));
    CHECK(same(exp_got[i].imag(), want_exp.imag()));
  }
  // Division by zero and by infinity: the scalar path's answers.
  const std::vector<c64f> num = {{1.0f, 2.0f}, {1.0f, 2.0f}, {0.0f, 0.0f}}, den = {{0.0f, 0.0f}, {inf, 0.0f}, {2.0f, 1.0f}};
  const std::vector<c64f> q = ops::binary(ops::Binary::Div, tensor_of(num), tensor_of(den)).to_vector<c64f>();
  for (size_t i = 0; i < num.size(); ++i) {
    const c64f want = num[i] / den[i];
    CAPTURE(i);
    CHECK(std::isnan(q[i].real()) == std::isnan(want.real()));
    if (!std::isnan(want.real())) CHECK(q[i] == want);
  }
}
