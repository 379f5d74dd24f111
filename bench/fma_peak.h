#pragma once
// The machine's float32 FMA peak: the yardstick of the model FLOP rates in
// bench/compare_libtorch (issue: "the limit is the machine, not a library").
//
// Each thread runs kChains independent chains of vector FMAs, enough to cover
// the FMA latency (4 cycles) times the FMA ports (2) of the cores this runs on,
// each chain in its own register whatever the optimisation level (the figure
// agrees at -O1, -O2 and -O3: tests/fma_peak_levels.sh),
// with the widest vectors the CPU has: AVX-512, else AVX2 + FMA, else scalar
// (a lower bound, reported as such). The ISA is picked at run time, so the
// binary needs no -march flag and the figure is the one of the CPU it runs on.
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace phasor::bench {

inline constexpr int kChains = 12;

struct FmaPeakRun {
  double flops = 0;  // float32 FLOPs executed (2 per lane of each FMA)
  std::string isa;   // "avx512f", "avx2+fma" or "scalar"
  float checksum = 0;  // keeps the chains alive
};

namespace detail {

// kChains FMA chains, c_k = c_k * a + b, `iters` times: one asm loop on
// kChains named vector registers, so no optimisation level can keep a chain in
// memory, merge chains or drop the loop (the compiler picks the registers; the
// operand's type, __m512 or __m256, picks zmm or ymm). Returns the chains' sum.
// Inlined into the target("...") functions below, whose ISA it then has. The
// chains are early-clobber ("+&v"): no input may share a chain's register (c0
// starts equal to b, and sharing one would chain every FMA to the last).
template <class V>
[[gnu::always_inline]] inline float fma_chains(int64_t iters) {
  const V a = V{} + 0.999999f, b = V{} + 1e-7f;
  V c0 = b, c1 = b * 2, c2 = b * 3, c3 = b * 4, c4 = b * 5, c5 = b * 6, c6 = b * 7, c7 = b * 8, c8 = b * 9,
    c9 = b * 10, c10 = b * 11, c11 = b * 12;
  static_assert(kChains == 12, "one register per chain: the asm below names twelve");
  if (iters > 0)
    asm volatile(
        "1:\n\t"
        "vfmadd213ps %[b], %[a], %[c0]\n\t"
        "vfmadd213ps %[b], %[a], %[c1]\n\t"
        "vfmadd213ps %[b], %[a], %[c2]\n\t"
        "vfmadd213ps %[b], %[a], %[c3]\n\t"
        "vfmadd213ps %[b], %[a], %[c4]\n\t"
        "vfmadd213ps %[b], %[a], %[c5]\n\t"
        "vfmadd213ps %[b], %[a], %[c6]\n\t"
        "vfmadd213ps %[b], %[a], %[c7]\n\t"
        "vfmadd213ps %[b], %[a], %[c8]\n\t"
        "vfmadd213ps %[b], %[a], %[c9]\n\t"
        "vfmadd213ps %[b], %[a], %[c10]\n\t"
        "vfmadd213ps %[b], %[a], %[c11]\n\t"
        "dec %[n]\n\t"
        "jnz 1b"
        : [c0] "+&v"(c0), [c1] "+&v"(c1), [c2] "+&v"(c2), [c3] "+&v"(c3), [c4] "+&v"(c4), [c5] "+&v"(c5),
          [c6] "+&v"(c6), [c7] "+&v"(c7), [c8] "+&v"(c8), [c9] "+&v"(c9), [c10] "+&v"(c10), [c11] "+&v"(c11),
          [n] "+r"(iters)
        : [a] "v"(a), [b] "v"(b)
        : "cc");
  const V sum = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)) + ((c8 + c9) + (c10 + c11));
  float t = 0;
  for (size_t i = 0; i < sizeof(V) / sizeof(float); ++i) t += sum[i];
  return t;
}

__attribute__((target("avx512f"))) inline float fma_chains_avx512(int64_t iters) {
  return fma_chains<__m512>(iters);
}

__attribute__((target("avx2,fma"))) inline float fma_chains_avx2(int64_t iters) {
  return fma_chains<__m256>(iters);
}

// No FMA instruction: multiply-adds in plain C++, a lower bound (reported as "scalar").
inline float fma_chains_scalar(int64_t iters) {
  float c0 = 0, c1 = 1e-3f, c2 = 2e-3f, c3 = 3e-3f;
  for (int64_t i = 0; i < iters; ++i) {
    c0 = c0 * 0.999999f + 1e-7f, c1 = c1 * 0.999999f + 1e-7f;
    c2 = c2 * 0.999999f + 1e-7f, c3 = c3 * 0.999999f + 1e-7f;
  }
  return (c0 + c1) + (c2 + c3);
}

}  // namespace detail

// The widest FMA vectors of the CPU this runs on.
struct FmaIsa {
  const char* name;
  int lanes;   // float32 lanes per vector
  int chains;  // independent chains per thread
  float (*run)(int64_t iters);
};

inline FmaIsa fma_isa() {
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, kChains, detail::fma_chains_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2+fma", 8, kChains, detail::fma_chains_avx2};
  return {"scalar", 1, 4, detail::fma_chains_scalar};
}

// Runs `iters` iterations of the chains on each of `threads` OpenMP threads.
inline FmaPeakRun fma_peak(int threads, int64_t iters) {
  const FmaIsa isa = fma_isa();
  float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  sum += isa.run(iters);
  FmaPeakRun run;
  run.isa = isa.name;
  run.checksum = sum;
  run.flops = 2.0 * isa.lanes * isa.chains * static_cast<double>(iters) * threads;
  return run;
}

// The CPU's float32 rate at its nominal clock, in GFLOP/s: lanes x 2 FMA ports
// x 2 FLOPs x the `cpu MHz` of /proc/cpuinfo x threads (0 where the file or
// the field is missing). Turbo clocks run above it; a probe far below it ran
// on cores that other work shared.
inline double nominal_peak_gflops(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0 && line.find(':') != std::string::npos) {
      const double mhz = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
      return fma_isa().lanes * 2.0 * 2.0 * mhz * 1e-3 * threads;
    }
  return 0.0;
}

}  // namespace phasor::bench
