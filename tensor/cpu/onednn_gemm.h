#pragma once
// float32 GEMMs on oneDNN's matmul primitive. At the model's shapes it runs
// 1.6-2.1x faster than OpenBLAS on an AMD EPYC and 1.2-1.9x on an Intel Xeon
// (bench_core's BM_gemm_library, docs/benchmarks.md "GEMM library per
// shape"), so it takes
// every float32 product from 2^16 multiply-adds up by default. OpenBLAS
// (gemm.cpp) keeps the small products, float64, the complex dtypes and
// whatever this declines.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/backend.h"

namespace phasor::cpu {

// Which library runs a float32 GEMM: PHASOR_GEMM=openblas or onednn forces
// one; "auto" (the default, also when unset) lets the shape decide
// (onednn_gemm.cpp: oneDNN from 2^16 multiply-adds up).
enum class GemmLibrary { OpenBLAS, OneDNN };

// Forces a library for every float32 GEMM from now on (nullopt: the policy
// decides again), as PHASOR_GEMM does at start; for A/B benchmarks and tests.
void set_gemm_library(std::optional<GemmLibrary> library);

// True when this build has oneDNN (PHASOR_HAVE_ONEDNN).
bool onednn_available();

// out [batch, m, n] (contiguous float32) = op(a) op(b) for each batch item of
// the plan, on oneDNN, on `threads` threads of the OpenMP pool. Returns false,
// having done nothing, when oneDNN should not or cannot take it: the policy
// picks OpenBLAS for the shape, the build has no oneDNN, or the plan's
// strides are not expressible (the caller then runs OpenBLAS).
bool onednn_gemm_f32(float* out, const GemmPlan& plan, int threads);

// The same for bfloat16 operands, with float32 accumulation and a float32 or
// bfloat16 `out`, whatever the size (PHASOR_GEMM=openblas declines it). Returns
// false also where this CPU has no bf16 kernel in oneDNN (it needs AVX-512):
// the caller then widens the operands to float32 (gemm.cpp).
bool onednn_gemm_bf16(void* out, DType out_dtype, const GemmPlan& plan, int threads);

// The primitives kept (one per shape, layout, dtypes and thread count, the
// least recently used dropped past the capacity), for tests and diagnostics:
// entries held, the capacity, and how many primitives this process has made.
struct OneDnnCache {
  size_t entries = 0, capacity = 0;
  uint64_t made = 0;
};
OneDnnCache onednn_cache();

// Another capacity (at least 1; entries past it go at once), for tests.
void set_onednn_cache_capacity(size_t entries);

}  // namespace phasor::cpu
