#include "tensor/cpu/fork.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>

#include "tensor/error.h"

namespace phasor::cpu {

std::atomic<bool> forked_child{false};

namespace {
void mark_child() { forked_child.store(true, std::memory_order_relaxed); }  // async-signal-safe, as a fork handler must be
}  // namespace

void drop_to_one_thread() {
  forked_child.store(false, std::memory_order_relaxed);
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
}

void install_fork_handler() {
  static const int registered = pthread_atfork(nullptr, nullptr, mark_child);
  PHASOR_CHECK(registered == 0, "cannot register the fork handler (pthread_atfork: error ", registered, ")");
}

}  // namespace phasor::cpu
