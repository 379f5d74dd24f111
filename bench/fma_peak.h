#pragma once
// The machine's float32 FMA peak: the yardstick of the model FLOP rates in
// bench/compare_libtorch (issue: "the limit is the machine, not a library").
//
// Each thread runs kChains independent chains of vector FMAs, enough to cover
// the FMA latency (4 cycles) times the FMA ports (2) of the cores this runs on,
// with the widest vectors the CPU has: AVX-512, else AVX2 + FMA, else scalar
// (a lower bound, reported as such). The ISA is picked at run time, so the
// binary needs no -march flag and the figure is the one of the CPU it runs on.
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <string>

namespace phasor::bench {

inline constexpr int kChains = 12;

struct FmaPeakRun {
  double flops = 0;  // float32 FLOPs executed (2 per lane of each FMA)
  std::string isa;   // "avx512f", "avx2+fma" or "scalar"
  float checksum = 0;  // keeps the chains alive
};

namespace detail {

__attribute__((target("avx512f"))) inline float fma_chains_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) inline float fma_chains_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float t = 0;
  for (float x : lanes) t += x;
  return t;
}

inline float fma_chains_scalar(int64_t iters) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 0.001f * static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = __builtin_fmaf(acc[c], 0.999999f, 1e-7f);
  float t = 0;
  for (float x : acc) t += x;
  return t;
}

}  // namespace detail

// Runs `iters` iterations of the chains on each of `threads` OpenMP threads.
inline FmaPeakRun fma_peak(int threads, int64_t iters) {
  FmaPeakRun run;
  int lanes = 1;
  float (*chains)(int64_t) = detail::fma_chains_scalar;
  if (__builtin_cpu_supports("avx512f")) {
    run.isa = "avx512f", lanes = 16, chains = detail::fma_chains_avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    run.isa = "avx2+fma", lanes = 8, chains = detail::fma_chains_avx2;
  } else {
    run.isa = "scalar";
  }
  float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  sum += chains(iters);
  run.checksum = sum;
  run.flops = 2.0 * lanes * kChains * static_cast<double>(iters) * threads;
  return run;
}

}  // namespace phasor::bench
