#include "tensor/cpu/fork.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>

#include "tensor/error.h"

namespace phasor::cpu {

namespace {
void single_threaded_child() {
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
}
}  // namespace

void install_fork_handler() {
  // glibc runs child handlers in registration order. Starting the OpenMP
  // runtime first lets its own handler (LLVM's libomp registers one when it
  // initialises) reset its locks before ours calls into it; registered
  // before, ours deadlocks inside libomp in the child.
  static const int registered = (omp_get_max_threads(), pthread_atfork(nullptr, nullptr, single_threaded_child));
  PHASOR_CHECK(registered == 0, "cannot register the fork handler (pthread_atfork: error ", registered, ")");
}

}  // namespace phasor::cpu
