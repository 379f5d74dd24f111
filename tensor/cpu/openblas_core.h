#pragma once
// OpenBLAS picks its kernels for the CPU when it loads. Debian 12's 0.3.21
// does not know recent Intel models (Emerald Rapids, model 207, for one) and
// falls back to its Prescott (SSE3) kernels: sgemm then runs about 7x slower
// than with its AVX-512 ones (docs/benchmarks.md, "OpenBLAS and the CPU").
// OPENBLAS_CORETYPE chooses the kernels, but is read only at load time, so a
// program calls use_best_openblas_core(argv) first thing in main: when the
// core was mis-detected and the variable is unset, it sets it to the best
// core the CPU supports and executes the program again. Header-only: the
// LibTorch reference programs, which do not link Phasor, use it too, so both
// sides of a comparison run the same GEMM kernels.
#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace phasor {

// The core to put in OPENBLAS_CORETYPE: the best this CPU supports when
// OpenBLAS fell back to Prescott and the variable is unset; otherwise null.
inline const char* openblas_core_to_set() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::strcmp(openblas_get_corename(), "Prescott") != 0) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

// Re-executes the program with OPENBLAS_CORETYPE set when that gives it
// faster kernels; returns (and the program goes on as it is) otherwise, or if
// the re-execution fails. Set OPENBLAS_CORETYPE yourself to choose.
inline void use_best_openblas_core(char** argv) {
  const char* core = openblas_core_to_set();
  if (core == nullptr || setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // not re-executed: leave the environment as it was
}

}  // namespace phasor
