#pragma once
// The strided loop every CPU elementwise kernel runs on.
//
// N operands share one (broadcast) shape, each with its own byte strides.
// Dimensions that are contiguous in every operand are merged, so a kernel on
// row-major inputs sees one long inner run; the inner callback then picks a
// unit-stride fast path or the general strided path. Large loops are split
// across OpenMP threads by outer rows.
#include <omp.h>

#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace phasor::cpu {

constexpr int64_t kParallelGrain = 1 << 15;  // elements per thread before threading pays off

template <size_t N>
struct Loop {
  Dims shape;
  std::array<Dims, N> strides;  // bytes
  std::array<char*, N> base;
};

// Describes `t` (already broadcast to `shape`, stride 0 on broadcast dims) as operand `k`.
template <size_t N>
void set_operand(Loop<N>& loop, size_t k, const Tensor& t) {
  const Dims& shape = loop.shape;
  const int lead = shape.size() - t.dim();
  const auto item = static_cast<int64_t>(itemsize(t.dtype()));
  loop.strides[k] = Dims::filled(shape.size(), 0);
  for (int i = 0; i < t.dim(); ++i) loop.strides[k][lead + i] = t.size(i) == 1 ? 0 : t.stride(i) * item;
  loop.base[k] = static_cast<char*>(t.raw_data());
}

template <size_t N>
void coalesce(Loop<N>& loop) {
  Dims shape;
  std::array<Dims, N> strides;
  for (int i = 0; i < loop.shape.size(); ++i) {
    if (loop.shape[i] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == loop.strides[k][i] * loop.shape[i];
    if (merge) {
      shape[shape.size() - 1] *= loop.shape[i];
      for (size_t k = 0; k < N; ++k) strides[k][strides[k].size() - 1] = loop.strides[k][i];
    } else {
      shape.push_back(loop.shape[i]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(loop.strides[k][i]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  loop.shape = shape;
  loop.strides = strides;
}

// inner(ptrs, inner_strides, n) is called for runs along the last dimension.
template <size_t N, class Inner>
void run(Loop<N> loop, Inner&& inner) {
  if (loop.shape.numel() == 0) return;
  coalesce(loop);
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
  Loop<N> loop;
  loop.shape = out.shape();
  set_operand(loop, 0, out);
  for (size_t k = 0; k < ins.size(); ++k) set_operand(loop, k + 1, ins[k]);
  run(loop, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
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
