#pragma once
// The register-blocked micro-kernel of the fused attention's tile products
// (tensor/cpu/attention.cpp), in a header so that bench_core can time it
// against OpenBLAS on the same tiles. Callers wrap their loops in a function
// marked PHASOR_SIMD_CLONES and inline this into it, so it is compiled for
// AVX-512, AVX2 and baseline x86-64, the best picked when the library loads.
#include <algorithm>
#include <cstdint>

#include "tensor/cpu/simd.h"

namespace phasor::cpu {

// C[m, n] (+)= op(A)[m, k] B[k, n], row-major; op(A) = A, or A^T when A is
// stored [k, m]. Blocks of 4 rows x 32 columns stay in registers across k;
// a last block of 16 columns (head width 16, 48, ...) keeps a fixed width too.
template <class T, bool kTransA, bool kAccumulate>
[[gnu::always_inline]] inline void tile_product(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
                                                int64_t ldc) {
  constexpr int64_t kRows = 4, kCols = 32;
  // Rows i..i+R-1, columns j..j+w-1: w = W when W is set at compile time, else `width`.
  // Both lambdas always inline: a call left out of line is compiled for
  // baseline x86-64, not for the caller's SIMD clone (the fused attention then
  // ran 2x slower once it had more instantiations for the inliner to weigh).
  auto block = [&]<int64_t R, int64_t W>(int64_t i, int64_t j, int64_t width) __attribute__((always_inline)) {
    const int64_t w = W ? W : width;
    T acc[R][kCols] = {};
    if constexpr (kAccumulate)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t cc = 0; cc < w; ++cc) acc[r][cc] = c[(i + r) * ldc + j + cc];
    for (int64_t p = 0; p < k; ++p) {
      const T* brow = b + p * ldb + j;
      for (int64_t r = 0; r < R; ++r) {
        const T av = kTransA ? a[p * lda + i + r] : a[(i + r) * lda + p];
#pragma omp simd
        for (int64_t cc = 0; cc < w; ++cc) acc[r][cc] += av * brow[cc];
      }
    }
    for (int64_t r = 0; r < R; ++r)
      for (int64_t cc = 0; cc < w; ++cc) c[(i + r) * ldc + j + cc] = acc[r][cc];
  };
  auto rows = [&]<int64_t R>(int64_t i) __attribute__((always_inline)) {
    int64_t j = 0;
    for (; j + kCols <= n; j += kCols) block.template operator()<R, kCols>(i, j, kCols);
    if (j + kCols / 2 <= n) {
      block.template operator()<R, kCols / 2>(i, j, kCols / 2);
      j += kCols / 2;
    }
    if (j < n) block.template operator()<R, 0>(i, j, n - j);
  };
  int64_t i = 0;
  for (; i + kRows <= m; i += kRows) rows.template operator()<kRows>(i);
  for (; i < m; ++i) rows.template operator()<1>(i);
}

}  // namespace phasor::cpu
