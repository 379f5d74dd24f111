// Bulk float32 <-> bfloat16 conversions (tensor/bfloat16.h): the CPU copy
// kernel runs them on every unit-stride run of a conversion.
#include "tensor/bfloat16.h"

#include "tensor/cpu/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PHASOR_HAVE_X86_BF16 1
#endif

namespace phasor {

namespace bf16_paths {

PHASOR_SIMD_CLONES void portable(const float* src, bf16* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i].bits = bf16_bits_from_float(src[i]);
}

#if PHASOR_HAVE_X86_BF16
bool have_avx512bf16() {
  static const bool have = __builtin_cpu_supports("avx512bf16");
  return have;
}

// vcvtne2ps2bf16 rounds like bf16_bits_from_float, but takes a denormal input
// as zero (Intel SDM: "denormal inputs are treated as zero"); RNE keeps it,
// and so does PyTorch. A block holding one goes to the portable loop.
#define PHASOR_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

// Lanes with exponent 0 and a nonzero mantissa: |x| - 1 < 0x7fffff as unsigned (zero wraps around).
PHASOR_TARGET_BF16 static inline __mmask16 denormals(__m512 x) {
  const __m512i m = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(m, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fffff));
}

PHASOR_TARGET_BF16 void avx512bf16(const float* src, bf16* dst, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    if (denormals(lo) | denormals(hi)) {
      portable(src + i, dst + i, 32);
      continue;
    }
    _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));  // lo fills the low half
  }
  portable(src + i, dst + i, n - i);
}
#else
bool have_avx512bf16() { return false; }
void avx512bf16(const float* src, bf16* dst, size_t n) { portable(src, dst, n); }
#endif

}  // namespace bf16_paths

void float_to_bf16(const float* src, bf16* dst, size_t n) {
  if (bf16_paths::have_avx512bf16()) bf16_paths::avx512bf16(src, dst, n);
  else bf16_paths::portable(src, dst, n);
}

PHASOR_SIMD_CLONES void bf16_to_float(const bf16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float_from_bf16_bits(src[i].bits);
}

}  // namespace phasor
