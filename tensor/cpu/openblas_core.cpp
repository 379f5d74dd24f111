// The OpenBLAS core check of tensor/cpu/openblas_core.h.
#include "tensor/cpu/openblas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace phasor {

const char* openblas_core_to_set() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::strcmp(openblas_get_corename(), "Prescott") != 0) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

void use_best_openblas_core(char** argv) {
  const char* core = openblas_core_to_set();
  if (core == nullptr || setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // not re-executed: leave the environment as it was
}

}  // namespace phasor
