#pragma once
// What a program built on Phasor calls first thing in main, before any op:
// the public face of the CPU backend's start-up, so that a program (the
// `phasor` CLI, the tests, the benchmarks) need not include tensor/cpu/.
// May include: nothing.

namespace phasor {

// OpenBLAS picks its kernels for the CPU when it loads, and falls back to slow
// ones on a CPU it does not know: re-executes the program with
// OPENBLAS_CORETYPE set when that gives it faster kernels; returns (and the
// program goes on as it is) otherwise, or if the re-execution fails. Set
// OPENBLAS_CORETYPE yourself to choose (tensor/cpu/openblas_core.h says more).
void use_best_openblas_core(char** argv);

}  // namespace phasor
