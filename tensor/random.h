#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// A Generator is just (seed, offset): the i-th block of four 32-bit words is
// philox(counter = offset + i, key = seed). Any element of any draw can be
// computed independently, so CPU threads and CUDA kernels reproduce the same
// stream bit for bit, and saving a generator is saving two integers.
#include <array>
#include <cmath>
#include <cstdint>

namespace phasor {

struct PhiloxBlock {
  std::array<uint32_t, 4> words;
};

#if defined(__CUDACC__)
#define PHASOR_HOST_DEVICE __host__ __device__
#else
#define PHASOR_HOST_DEVICE
#endif

PHASOR_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32_10(uint64_t counter, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// Uniform in (0, 1]: never 0, so log() in Box-Muller is always finite.
PHASOR_HOST_DEVICE inline double uint_to_unit(uint32_t x) { return (static_cast<double>(x) + 1.0) * (1.0 / 4294967296.0); }

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }

  // Reserves `blocks` consecutive Philox blocks and returns the first counter.
  uint64_t reserve(uint64_t blocks) {
    const uint64_t first = offset_;
    offset_ += blocks;
    return first;
  }
  // One uniform 64-bit integer (uses one block), for host-side sampling.
  uint64_t next_u64() {
    auto w = philox4x32_10(reserve(1), seed_);
    return (uint64_t{w[0]} << 32) | w[1];
  }
  double next_unit() { return uint_to_unit(philox4x32_10(reserve(1), seed_)[0]); }

 private:
  uint64_t seed_;
  uint64_t offset_;
};

// Element i of a uniform draw starting at block `first`.
PHASOR_HOST_DEVICE inline double philox_uniform(uint64_t seed, uint64_t first, uint64_t i) {
  return uint_to_unit(philox4x32_10(first + i / 4, seed)[i % 4]);
}
// Element i of a standard-normal draw: Box-Muller on lanes (0,1) and (2,3) of block i/4.
PHASOR_HOST_DEVICE inline double philox_normal(uint64_t seed, uint64_t first, uint64_t i) {
  const auto w = philox4x32_10(first + i / 4, seed);
  const unsigned lane = static_cast<unsigned>(i % 4), pair = lane & ~1u;
  const double u1 = uint_to_unit(w[pair]), u2 = uint_to_unit(w[pair + 1]);
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.283185307179586 * u2;
  return (lane & 1u) ? radius * std::sin(theta) : radius * std::cos(theta);
}

}  // namespace phasor
