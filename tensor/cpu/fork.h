#pragma once
// A process that forks after a parallel op: the OpenMP thread pool does not
// survive fork (libgomp's child waits forever for the parent's threads). As
// PyTorch does, the child drops to one thread: a pthread_atfork handler marks
// the child, and the child's first op (every op looks up its backend through
// settle_after_fork) sets OpenMP's and OpenBLAS's thread counts to 1, so every
// op of the library runs inline there. oneDNN's primitives are made and run at
// the caller's thread count, part of their key (onednn_gemm.cpp): the child
// makes one-thread primitives of its own rather than run its parent's, whose
// team was sized for the pool it lost. The handler itself calls into neither
// runtime: LLVM's libomp resets its locks in a fork handler of its own that
// may run after ours. A child that asks for threads again
// (omp_set_num_threads) is on its own, as with PyTorch.
#include <atomic>

namespace phasor::cpu {

// Registers the handler, once per process; called when the CPU backend is
// first used, so before any parallel op can run.
void install_fork_handler();

// Set in a forked child until its first op has dropped it to one thread.
extern std::atomic<bool> forked_child;
void drop_to_one_thread();
inline void settle_after_fork() {
  if (forked_child.load(std::memory_order_relaxed)) drop_to_one_thread();
}

}  // namespace phasor::cpu
