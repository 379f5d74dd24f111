#pragma once
// A process that forks after a parallel op: libgomp's thread pool does not
// survive fork (its threads are gone in the child, and the child's first
// parallel region waits for them forever). As PyTorch does, the child drops
// to one thread: pthread_atfork runs a handler in every child that sets
// OpenMP's (and OpenBLAS's) thread count to 1, so every op of the library
// runs inline there. A child that asks for threads again (omp_set_num_threads)
// is on its own, as with PyTorch.

namespace phasor::cpu {

// Registers the handler, once per process; called when the CPU backend is
// first used, so before any parallel op can run.
void install_fork_handler();

}  // namespace phasor::cpu
