// Reduction CPU kernels over the two contiguous layouts the front-end
// (tensor/reduce.cpp) brings every reduction to: rows (reduce each row's
// trailing block) and columns (sum whole rows into one accumulator row).
// CUDA twin: cuda/reduce.cu.
#include <omp.h>

#include <cmath>
#include <limits>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"

namespace phasor::cpu {

namespace {

// Accumulator type: float32 sums accumulate in double for accuracy.
template <class T> struct acc_of { using type = T; };
template <> struct acc_of<float> { using type = double; };
template <> struct acc_of<c64> { using type = c128; };
template <class T> using acc_t = typename acc_of<T>::type;

template <class T>
T row_max(const T* v, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

template <class T>
void logsumexp_row(const T* v, T* o, int64_t n) {
  const T m = row_max(v, n);
  if (std::isinf(m)) {
    *o = m;
    return;
  }
  acc_t<T> s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
  *o = m + static_cast<T>(std::log(s));
}

template <class T>
void softmax_row(const T* v, T* o, int64_t n) {
  const T m = row_max(v, n);
  if (m == -std::numeric_limits<T>::infinity()) {  // fully masked row: all zeros, not NaN
    for (int64_t i = 0; i < n; ++i) o[i] = T(0);
    return;
  }
  acc_t<T> s = 0;
  for (int64_t i = 0; i < n; ++i) s += (o[i] = std::exp(v[i] - m));
  const T inv = static_cast<T>(1.0 / s);
  for (int64_t i = 0; i < n; ++i) o[i] *= inv;
}

template <class T>
void log_softmax_row(const T* v, T* o, int64_t n) {
  const T m = row_max(v, n);
  acc_t<T> s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
  // (v - m) - log(s), not v - (m + log(s)): v - m is exact for the entries
  // that matter, so the result keeps the precision of its own magnitude
  // rather than that of the largest input (in float32, inputs near 300 would
  // otherwise cost ~1e-5 absolute, which the backward turns into a visible
  // non-zero gradient of a shift along `dim`).
  const T log_s = static_cast<T>(std::log(s));
  for (int64_t i = 0; i < n; ++i) o[i] = (v[i] - m) - log_s;
}

}  // namespace

void CpuBackend::sum_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t n) {
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* px = x.data<T>();
      T* po = out.data<T>();
#pragma omp parallel for if (rows * n > kParallelGrain && rows > 1)
      for (int64_t r = 0; r < rows; ++r) {
        // Eight interleaved partial sums, combined in a fixed order: eight
        // independent chains the compiler can vectorise, where one chain waits
        // on each addition (a whole tensor's sum, one row of millions, ran
        // at a quarter of the speed).
        constexpr int64_t kLanes = 8;
        acc_t<T> lanes[kLanes] = {};
        const T* row = px + r * n;
        const int64_t whole = n - n % kLanes;
        for (int64_t i = 0; i < whole; i += kLanes)
          for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<acc_t<T>>(row[i + l]);
        acc_t<T> acc = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        for (int64_t i = whole; i < n; ++i) acc += static_cast<acc_t<T>>(row[i]);
        po[r] = static_cast<T>(acc);
      }
    }
  });
}

void CpuBackend::sum_columns(const Tensor& out, const Tensor& x, int64_t reduced, int64_t cols) {
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* px = x.data<T>();
      T* po = out.data<T>();
      std::vector<acc_t<T>> acc(static_cast<size_t>(cols));
#pragma omp parallel if (reduced * cols > kParallelGrain && cols >= 64)
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t begin = cols * t / nt, end = cols * (t + 1) / nt;
        for (int64_t r = 0; r < reduced; ++r) {
          const T* row = px + r * cols;
          for (int64_t c = begin; c < end; ++c) acc[c] += static_cast<acc_t<T>>(row[c]);
        }
      }
      for (int64_t c = 0; c < cols; ++c) po[c] = static_cast<T>(acc[c]);
    }
  });
}

// Each outer slice walks its n rows once, carrying the inner dim's running
// sums (accumulated as sum_columns does) in one vector row.
void CpuBackend::cumsum(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* px = x.data<T>();
      T* po = out.data<T>();
#pragma omp parallel for if (outer * n * inner > kParallelGrain && outer > 1)
      for (int64_t o = 0; o < outer; ++o) {
        std::vector<acc_t<T>> acc(static_cast<size_t>(inner));
        for (int64_t step = 0; step < n; ++step) {
          const int64_t r = reverse ? n - 1 - step : step;
          const T* row = px + (o * n + r) * inner;
          T* dst = po + (o * n + r) * inner;
          for (int64_t c = 0; c < inner; ++c) {
            acc[static_cast<size_t>(c)] += static_cast<acc_t<T>>(row[c]);
            dst[c] = static_cast<T>(acc[static_cast<size_t>(c)]);
          }
        }
      }
    }
  });
}

void CpuBackend::extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) {
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!is_complex_v<T>) {
      const T* src = x.data<T>();
      T* pv = values.data<T>();
      int64_t* pi = indices.data<int64_t>();
      for (int64_t row = 0; row < rows; ++row) {
        const T* v = src + row * n;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i) {
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v[best])) break;
            if (std::isnan(v[i])) {
              best = i;
              break;
            }
          }
          if (want_max ? v[i] > v[best] : v[i] < v[best]) best = i;
        }
        pv[row] = v[best];
        pi[row] = best;
      }
    }
  });
}

void CpuBackend::row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) {
  dispatch_floating(x.dtype(), "row_softmax", [&]<class T>() {
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const int64_t out_n = op == RowOp::LogSumExp ? 1 : n;
#pragma omp parallel for if (rows * n > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      switch (op) {
        case RowOp::LogSumExp: logsumexp_row(in + r * n, o + r * out_n, n); break;
        case RowOp::Softmax: softmax_row(in + r * n, o + r * out_n, n); break;
        case RowOp::LogSoftmax: log_softmax_row(in + r * n, o + r * out_n, n); break;
      }
    }
  });
}

bool CpuBackend::all_finite(const Tensor& x) {
  bool ok = true;
  dispatch_floating(x.dtype(), "all_finite", [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel() && ok; ++i) ok = std::isfinite(p[i]);
  });
  return ok;
}

}  // namespace phasor::cpu
