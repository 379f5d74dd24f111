#pragma once
// The fused attention's scores S = Q K^T on bfloat16 inputs with AVX512-BF16
// (vdpbf16ps: dot products of bfloat16 pairs accumulated in float32). A
// product of two bfloat16 values is exact in float32, so the scores are
// float32 attention's on the rounded inputs, to the summation order; the
// instruction takes denormal inputs and results as zero (below 1.2e-38).
// tensor/cpu/attention.cpp uses it where use_scores_bf16() says so, and
// otherwise widens the tiles to float32.
#include <cstdint>

#include "tensor/bfloat16.h"

namespace phasor::cpu {

constexpr int64_t kScoreKeys = 64;  // keys in a tile of scores (the fused attention's key tile)

// Keys [cols, d] (rows `stride` apart, cols <= kScoreKeys) packed in pairs for
// scores_bf16: out[(e / 2) * 2 kScoreKeys + 2 c + e % 2] holds key c's element
// e, and zeros past d and past cols; ((d + 1) / 2) * 2 kScoreKeys elements.
void pack_key_pairs(const bf16* keys, int64_t stride, int64_t cols, int64_t d, uint16_t* out);

// s[r * kScoreKeys + c] = q_r . k_c for the `rows` query rows (`stride`
// apart) against keys packed by pack_key_pairs. Only where have_avx512bf16().
void scores_bf16(const bf16* q, int64_t stride, int64_t rows, int64_t d, const uint16_t* keys, float* s);

// Whether this thread's fused attention forms bfloat16 scores with
// scores_bf16: where the CPU has AVX512-BF16 and no WidenedScores is alive.
bool use_scores_bf16();

// While one lives, this thread's fused attention widens bfloat16 tiles to
// float32 even where AVX512-BF16 is present: the other path, for tests.
class WidenedScores {
 public:
  WidenedScores();
  ~WidenedScores();
  WidenedScores(const WidenedScores&) = delete;
  WidenedScores& operator=(const WidenedScores&) = delete;

 private:
  bool saved_;
};

}  // namespace phasor::cpu
