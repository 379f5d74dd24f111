// The vectorisable float32 atan2 / sincos of the rotation kernels, against libm.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/fast_math.h"
#include "tensor/random.h"

using namespace phasor;

TEST_CASE("fast atan2 is within 2 float ulps of pi of libm, with libm's signs and atan2(0, 0) = 0") {
  Generator g(1);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float y = static_cast<float>(20 * g.next_unit() - 10), x = static_cast<float>(20 * g.next_unit() - 10);
    for (auto [a, b] : {std::pair{y, x}, {y, 0.0f}, {0.0f, x}, {y, y}, {y, -y}})
      worst = std::max(worst, std::abs(static_cast<double>(fastmath::atan2(a, b)) - std::atan2(static_cast<double>(a), static_cast<double>(b))));
  }
  CHECK(worst < 5e-7);
  CHECK(fastmath::atan2(0.0f, 0.0f) == 0.0f);
  CHECK(fastmath::atan2(-0.0f, -1.0f) == doctest::Approx(-M_PI));
  // A tiny angle is compared relative to itself (Approx's default epsilon, 1.2e-5):
  // with scale 1, any value below 1e-5 would pass.
  CHECK(fastmath::atan2(1e-30f, 1.0f) == doctest::Approx(1e-30).scale(0));
}

TEST_CASE("fast sincos matches libm over the phases attention produces") {
  Generator g(2);
  double worst_small = 0, worst_large = 0;
  for (int i = 0; i < 200000; ++i) {
    const float t = static_cast<float>(20 * g.next_unit() - 10), big = static_cast<float>(8000 * g.next_unit() - 4000);
    float s, c;
    fastmath::sincos(t, s, c);
    worst_small = std::max({worst_small, std::abs(static_cast<double>(s) - std::sin(static_cast<double>(t))), std::abs(static_cast<double>(c) - std::cos(static_cast<double>(t)))});
    fastmath::sincos(big, s, c);
    worst_large = std::max({worst_large, std::abs(static_cast<double>(s) - std::sin(static_cast<double>(big))), std::abs(static_cast<double>(c) - std::cos(static_cast<double>(big)))});
  }
  CHECK(worst_small < 2e-7);
  CHECK(worst_large < 2e-7);
}

TEST_CASE("fast atan2 follows libm on signed zeros: atan2(+-0, -0) = +-pi, atan2(+-0, +0) = +-0") {
  for (float y : {0.0f, -0.0f})
    for (float x : {0.0f, -0.0f}) {
      const float fast = fastmath::atan2(y, x), ref = std::atan2(y, x);
      CAPTURE(y);
      CAPTURE(x);
      CHECK(fast == ref);
      CHECK(std::signbit(fast) == std::signbit(ref));
    }
}

TEST_CASE("fast exp is within a few float ulps of libm over the softmax's range, 0 below it, NaN through") {
  Generator g(3);
  double worst = 0;  // relative to e^x
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(175 * g.next_unit() - 87);  // [-87, 88]
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(static_cast<double>(fastmath::exp(x)) - want) / want);
  }
  CHECK(worst < 4e-7);  // 2^-24 = 6e-8 is half an ulp
  CHECK(fastmath::exp(0.0f) == 1.0f);
  CHECK(fastmath::exp(-88.0f) == 0.0f);  // below the smallest normal float: flushed
  CHECK(fastmath::exp(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(fastmath::exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("fast tanh, softplus and sigmoid are within a few float ulps of libm, relative, over every magnitude") {
  Generator g(5);
  double worst_tanh = 0, worst_softplus = 0, worst_sigmoid = 0;
  for (int i = 0; i < 200000; ++i) {
    // Log-uniform magnitudes from 1e-6 to 1e2, both signs: the relative error is what matters near 0.
    const double magnitude = std::pow(10.0, 8 * g.next_unit() - 6);
    const float x = static_cast<float>(g.next_unit() < 0.5 ? -magnitude : magnitude);
    const double xd = x;
    const auto rel = [](double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-300); };
    worst_tanh = std::max(worst_tanh, rel(fastmath::tanh(x), std::tanh(xd)));
    float softplus, sigmoid;
    fastmath::softplus_sigmoid(x, softplus, sigmoid);
    const double want_softplus = std::max(xd, 0.0) + std::log1p(std::exp(-std::abs(xd)));
    if (want_softplus > 1e-37) worst_softplus = std::max(worst_softplus, rel(softplus, want_softplus));  // below, e^x leaves float's normal range
    const double want_sigmoid = 1.0 / (1.0 + std::exp(-xd));
    if (want_sigmoid > 1e-37) worst_sigmoid = std::max(worst_sigmoid, rel(sigmoid, want_sigmoid));
  }
  CHECK(worst_tanh < 6e-7);
  CHECK(worst_softplus < 6e-7);
  CHECK(worst_sigmoid < 6e-7);
  float softplus, sigmoid;
  fastmath::softplus_sigmoid(-200.0f, softplus, sigmoid);  // e^-200 is below float: 0 and 0, never NaN
  CHECK(softplus == 0.0f);
  CHECK(sigmoid == 0.0f);
  fastmath::softplus_sigmoid(200.0f, softplus, sigmoid);
  CHECK(softplus == 200.0f);
  CHECK(sigmoid == 1.0f);
  CHECK(fastmath::tanh(-60.0f) == -1.0f);
}
