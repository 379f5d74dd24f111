#pragma once
// bfloat16: the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa
// bits). A storage dtype: tensors hold it, ops compute in float32. The scalar
// conversions compile on the host and under nvcc; the bulk ones for
// contiguous arrays are in tensor/cpu/bfloat16.cpp.
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PHASOR_BF16_FN __host__ __device__ inline
#else
#define PHASOR_BF16_FN inline
#endif

namespace phasor {

// float32 -> bfloat16 bits, rounded to nearest, ties to even (as PyTorch's
// c10::BFloat16 and the AVX512-BF16 instructions on normal numbers). A NaN
// stays a NaN of the same sign, made quiet (its payload truncated); values
// past the largest bfloat16 round to infinity as RNE says.
PHASOR_BF16_FN uint16_t bf16_bits_from_float(float f) {
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  std::memcpy(&u, &f, sizeof u);
#endif
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // half an ulp, plus one on ties to an odd result
  // A NaN keeps its sign and top payload bits, with the quiet bit set: one
  // whose payload sits in the low 16 bits would otherwise become an infinity.
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  // Branch-free, so that the bulk loop vectorises.
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// bfloat16 bits -> float32, exact.
PHASOR_BF16_FN float float_from_bf16_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// One bfloat16 element. No arithmetic on purpose: convert to float32 first.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  PHASOR_BF16_FN explicit bf16(float f) : bits(bf16_bits_from_float(f)) {}
  PHASOR_BF16_FN explicit operator float() const { return float_from_bf16_bits(bits); }
  PHASOR_BF16_FN static bf16 from_bits(uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

// Bulk conversions of n contiguous elements (tensor/cpu/bfloat16.cpp). The
// float -> bf16 one runs on AVX512-BF16 (vcvtne2ps2bf16) when the CPU has it,
// else on a loop the compiler vectorises (AVX-512, AVX2 or SSE2 clones); both
// give the bits of bf16_bits_from_float.
void float_to_bf16(const float* src, bf16* dst, size_t n);
void bf16_to_float(const bf16* src, float* dst, size_t n);

// The two float -> bf16 paths by name, for the test that compares them.
namespace bf16_paths {
bool have_avx512bf16();                                    // the CPU runs vcvtne2ps2bf16
void portable(const float* src, bf16* dst, size_t n);      // any x86-64 (and other) CPU
void avx512bf16(const float* src, bf16* dst, size_t n);    // only where have_avx512bf16()
}  // namespace bf16_paths

}  // namespace phasor
