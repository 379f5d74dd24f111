// Seeded random tensors: the front-ends of the fill_uniform / fill_normal
// kernels. Element i of a draw is a pure function of (seed, first block, i), so
// every backend reproduces the CPU's draws exactly.
#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor {

Generator& default_generator() {
  static Generator gen(0x5eed);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

namespace {
// A draw of `shape` on `device`: `fill` gets its real view (complex tensors
// draw real and imaginary parts as consecutive elements) and the stream position.
template <class Fill>
Tensor draw(const Dims& shape, DType dtype, Generator* gen, Device device, const char* op, Fill fill) {
  check_computes_in(dtype, op);  // randomness draws in float32 or float64: convert after
  PHASOR_CHECK(is_inexact(dtype), op, ": expected a floating or complex dtype, got ", dtype);
  Generator& g = gen ? *gen : default_generator();
  Tensor out = empty(shape, dtype, device);
  const Tensor flat = is_complex(dtype) ? ops::view_as_real(out) : out;
  const uint64_t first = g.reserve(static_cast<uint64_t>((flat.numel() + 3) / 4));
  fill(backend(device), flat, g.seed(), first);
  return out;
}
}  // namespace

Tensor uniform(const Dims& shape, double low, double high, DType dtype, Generator* gen, Device device) {
  PHASOR_CHECK(low <= high, "uniform: low ", low, " > high ", high);
  return draw(shape, dtype, gen, device, "uniform",
              [=](Backend& b, const Tensor& t, uint64_t seed, uint64_t first) { b.fill_uniform(t, low, high, seed, first); });
}

Tensor rand(const Dims& shape, DType dtype, Generator* gen, Device device) { return uniform(shape, 0.0, 1.0, dtype, gen, device); }

Tensor normal(const Dims& shape, double mean, double std, DType dtype, Generator* gen, Device device) {
  PHASOR_CHECK(std >= 0.0, "normal: std must be non-negative, got ", std);
  return draw(shape, dtype, gen, device, "normal",
              [=](Backend& b, const Tensor& t, uint64_t seed, uint64_t first) { b.fill_normal(t, mean, std, seed, first); });
}

Tensor randn(const Dims& shape, DType dtype, Generator* gen, Device device) { return normal(shape, 0.0, 1.0, dtype, gen, device); }

}  // namespace phasor
