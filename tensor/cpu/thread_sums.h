#pragma once
// Per-thread accumulators for the per-parameter reductions of the fused
// backward kernels (RMSNorm's weight, the ComplexFormer rotation's delta,
// phase_bias and beta): each thread adds into its own row in double, and the
// rows are summed once at the end in thread order, so results are
// deterministic for a given thread count without atomics.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace phasor::cpu {

class ThreadSums {
 public:
  explicit ThreadSums(int64_t n) : n_(n), threads_(omp_get_max_threads()), sums_(static_cast<size_t>(n * threads_), 0.0) {}
  // The calling thread's row (thread 0's outside a parallel region).
  double* mine() { return sums_.data() + static_cast<size_t>(n_ * omp_get_thread_num()); }
  template <class T>
  void total_into(T* out) const {
    for (int64_t i = 0; i < n_; ++i) {
      double s = 0;
      for (int t = 0; t < threads_; ++t) s += sums_[static_cast<size_t>(t * n_ + i)];
      out[i] = static_cast<T>(s);
    }
  }

 private:
  int64_t n_;
  int threads_;
  std::vector<double> sums_;
};

}  // namespace phasor::cpu
