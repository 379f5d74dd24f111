// AVX512-BF16 scores of the fused attention (tensor/cpu/scores_bf16.h).
#include "tensor/cpu/scores_bf16.h"

#include <cstring>

#include "tensor/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PHASOR_HAVE_X86_BF16 1
#endif

namespace phasor::cpu {

namespace {
thread_local bool widened = false;
}

WidenedScores::WidenedScores() : saved_(widened) { widened = true; }
WidenedScores::~WidenedScores() { widened = saved_; }

bool use_scores_bf16() { return !widened && bf16_paths::have_avx512bf16(); }

void pack_key_pairs(const bf16* keys, int64_t stride, int64_t cols, int64_t d, uint16_t* out) {
  const int64_t pairs = (d + 1) / 2;
  std::memset(out, 0, sizeof(uint16_t) * pairs * 2 * kScoreKeys);
  for (int64_t c = 0; c < cols; ++c) {
    const bf16* key = keys + c * stride;
    for (int64_t e = 0; e < d; ++e) out[(e / 2) * 2 * kScoreKeys + 2 * c + e % 2] = key[e].bits;
  }
}

#if PHASOR_HAVE_X86_BF16

#define PHASOR_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

namespace {

// Rows i..i+R-1: R x 64 scores in 4 R registers across the pairs of d.
template <int R>
PHASOR_TARGET_BF16 inline void score_rows(const bf16* q, int64_t stride, int64_t i, int64_t d, const uint16_t* keys, float* s) {
  constexpr int kVectors = kScoreKeys / 16;
  __m512 acc[R][kVectors];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kVectors; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t p = 0; 2 * p < d; ++p) {
    __m512bh k[kVectors];
    for (int j = 0; j < kVectors; ++j) k[j] = (__m512bh)_mm512_loadu_si512(keys + p * 2 * kScoreKeys + 32 * j);
    for (int r = 0; r < R; ++r) {
      const bf16* row = q + (i + r) * stride + 2 * p;
      // The pair (q[2p], q[2p+1]) in every lane, element 2p low; a missing q[d] is 0.
      const uint32_t pair = row[0].bits | (2 * p + 1 < d ? static_cast<uint32_t>(row[1].bits) << 16 : 0u);
      const __m512bh qp = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      for (int j = 0; j < kVectors; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], qp, k[j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < kVectors; ++j) _mm512_storeu_ps(s + (i + r) * kScoreKeys + 16 * j, acc[r][j]);
}

}  // namespace

PHASOR_TARGET_BF16 void scores_bf16(const bf16* q, int64_t stride, int64_t rows, int64_t d, const uint16_t* keys, float* s) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) score_rows<4>(q, stride, i, d, keys, s);
  for (; i < rows; ++i) score_rows<1>(q, stride, i, d, keys, s);
}

#else

void scores_bf16(const bf16*, int64_t, int64_t, int64_t, const uint16_t*, float*) {
  fail("scores_bf16: this build has no AVX512-BF16 path (use_scores_bf16() is false here)");
}

#endif

}  // namespace phasor::cpu
