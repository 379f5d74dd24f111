#!/usr/bin/env bash
# The ctest test simd_kernels_inline: the hot loops' helpers (the fused
# attention's tile products, fastmath's float functions) must be inlined into their
# PHASOR_SIMD_CLONES callers. A copy left out of line is compiled for baseline
# x86-64, so the AVX-512 clone calls SSE2 code: float32 training once ran 25%
# slower that way without a test noticing (tensor/cpu/tile_product.h). A
# library that defines any such function out of line fails.
#   simd_kernels_inline.sh LIBRARY
set -euo pipefail
library=$1
if out_of_line=$(nm -C "$library" | grep -E ' [TtWw] .*(phasor::cpu::tile_product<float|phasor::fastmath::[a-z0-9_]+\(float)'); then
  echo "simd_kernels_inline: $library defines these out of line (baseline x86-64 code):" >&2
  echo "$out_of_line" | cut -c1-200 >&2
  exit 1
fi
echo "simd_kernels_inline: no float32 tile product or fastmath::exp out of line in $library"
