// Seeded random tensors. Element i of a draw is a pure function of
// (seed, first block, i), so the CUDA backend can reproduce CPU draws exactly.
#include "tensor/loop.h"
#include "tensor/ops.h"

namespace phasor {

Generator& default_generator() {
  static Generator gen(0x5eed);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

namespace {
template <class Draw>
Tensor draw(const Dims& shape, DType dtype, Generator* gen, const char* op, Draw value) {
  PHASOR_CHECK(is_inexact(dtype), op, ": expected a floating or complex dtype, got ", dtype);
  Generator& g = gen ? *gen : default_generator();
  Tensor out = empty(shape, dtype);
  // Complex tensors draw real and imaginary parts as consecutive elements.
  const Tensor flat = is_complex(dtype) ? ops::view_as_real(out) : out;
  const int64_t n = flat.numel();
  const uint64_t first = g.reserve(static_cast<uint64_t>((n + 3) / 4));
  const uint64_t seed = g.seed();
  dispatch_floating(flat.dtype(), op, [&]<class R>() {
    R* p = static_cast<R*>(flat.raw_data());
#pragma omp parallel for if (n > cpu::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<R>(value(seed, first, static_cast<uint64_t>(i)));
  });
  return out;
}
}  // namespace

Tensor uniform(const Dims& shape, double low, double high, DType dtype, Generator* gen) {
  PHASOR_CHECK(low <= high, "uniform: low ", low, " > high ", high);
  return draw(shape, dtype, gen, "uniform", [=](uint64_t s, uint64_t f, uint64_t i) {
    return low + (high - low) * philox_uniform(s, f, i);
  });
}

Tensor rand(const Dims& shape, DType dtype, Generator* gen) { return uniform(shape, 0.0, 1.0, dtype, gen); }

Tensor normal(const Dims& shape, double mean, double std, DType dtype, Generator* gen) {
  PHASOR_CHECK(std >= 0.0, "normal: std must be non-negative, got ", std);
  return draw(shape, dtype, gen, "normal", [=](uint64_t s, uint64_t f, uint64_t i) { return mean + std * philox_normal(s, f, i); });
}

Tensor randn(const Dims& shape, DType dtype, Generator* gen) { return normal(shape, 0.0, 1.0, dtype, gen); }

}  // namespace phasor
