#pragma once
// OpenBLAS picks its kernels for the CPU when it loads. Debian 12's 0.3.21
// does not know recent Intel models (Emerald Rapids, model 207, for one) and
// falls back to its Prescott (SSE3) kernels: sgemm then runs about 7x slower
// than with its AVX-512 ones (docs/benchmarks.md, "OpenBLAS and the CPU").
// OPENBLAS_CORETYPE chooses the kernels, but is read only at load time, so a
// program calls use_best_openblas_core(argv) first thing in main: when the
// core was mis-detected and the variable is unset, it sets it to the best
// core the CPU supports and executes the program again. Programs reach it
// through tensor/startup.h, which declares use_best_openblas_core.
#include "tensor/startup.h"

namespace phasor {

// The core to put in OPENBLAS_CORETYPE: the best this CPU supports when
// OpenBLAS fell back to Prescott and the variable is unset; otherwise null.
const char* openblas_core_to_set();

}  // namespace phasor
