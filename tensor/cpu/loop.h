#pragma once
// The strided loop every CPU elementwise kernel runs on, over the shared
// geometry of tensor/strided.h: the inner callback gets runs along the last
// (coalesced) dimension and picks a unit-stride fast path or the general
// strided path. Large loops are split across OpenMP threads by outer rows.
#include <omp.h>

#include <array>
#include <cstdint>

#include "tensor/strided.h"

namespace phasor::cpu {

constexpr int64_t kParallelGrain = 1 << 15;  // elements per thread before threading pays off

// body(begin, end) over equal, contiguous blocks of [0, rows), one block per
// thread when `work` (elements touched) is large enough to pay for waking
// them; the split depends only on the thread count, so per-thread sums stay
// deterministic. Inside a parallel region it runs inline.
template <class Body>
void split_rows(int64_t rows, int64_t work, Body&& body) {
  const int threads = omp_get_max_threads();
  if (work < kParallelGrain || threads == 1 || rows < 2 || omp_in_parallel()) {
    body(int64_t{0}, rows);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    body(rows * t / nt, rows * (t + 1) / nt);
  }
}

// inner(ptrs, inner_strides, n) is called for runs along the last dimension
// of a coalesced plan.
template <size_t N, class Inner>
void run(const StridedPlan<N>& loop, Inner&& inner) {
  if (loop.shape.numel() == 0) return;
  const int nd = loop.shape.size();
  const int64_t n_inner = loop.shape[nd - 1];
  const int64_t rows = loop.shape.numel() / n_inner;
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = loop.strides[k][nd - 1];

  auto run_rows = [&](int64_t row_begin, int64_t row_end) {
    // Multi-index of row_begin over the outer dims, then step it like an odometer.
    Dims index = Dims::filled(nd, 0);
    std::array<char*, N> ptr = loop.base;
    int64_t rem = row_begin;
    for (int d = nd - 2; d >= 0; --d) {
      index[d] = rem % loop.shape[d];
      rem /= loop.shape[d];
      for (size_t k = 0; k < N; ++k) ptr[k] += index[d] * loop.strides[k][d];
    }
    for (int64_t row = row_begin; row < row_end; ++row) {
      inner(ptr, inner_strides, n_inner);
      for (int d = nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) ptr[k] += loop.strides[k][d];
        if (++index[d] < loop.shape[d]) break;
        for (size_t k = 0; k < N; ++k) ptr[k] -= loop.shape[d] * loop.strides[k][d];
        index[d] = 0;
      }
    }
  };

  const int64_t total = rows * n_inner;
  const int threads = omp_get_max_threads();
  if (total < kParallelGrain || threads == 1 || omp_in_parallel()) {
    run_rows(0, rows);
    return;
  }
  if (rows == 1) {  // one long run: split it instead of rows
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = n_inner * t / nt, end = n_inner * (t + 1) / nt;
      std::array<char*, N> ptr = loop.base;
      for (size_t k = 0; k < N; ++k) ptr[k] += begin * inner_strides[k];
      if (end > begin) inner(ptr, inner_strides, end - begin);
    }
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    run_rows(rows * t / nt, rows * (t + 1) / nt);
  }
}

// out[i] = f(in0[i], in1[i], ...) with typed pointers. All operands must
// already have the types Out, Ins... and out's shape (inputs may be broadcast).
template <class Out, class... Ins, class F>
void map(const Tensor& out, const std::array<Tensor, sizeof...(Ins)>& ins, F f) {
  constexpr size_t N = sizeof...(Ins) + 1;
  run(strided_plan<N>(out, ins), [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      bool unit = s[0] == sizeof(Out);
      ((unit = unit && s[I + 1] == static_cast<int64_t>(sizeof(Ins))), ...);
      Out* o = reinterpret_cast<Out*>(p[0]);
      if (unit) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(reinterpret_cast<const Ins*>(p[I + 1])[i]...);
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const Ins*>(p[I + 1] + i * s[I + 1])...);
      }
    }(std::index_sequence_for<Ins...>{});
  });
}

}  // namespace phasor::cpu
