// Reductions and the softmax family on CUDA. CPU reference:
// tensor/cpu/reduce.cpp (sum, cumsum, max/min, logsumexp, softmax,
// log_softmax, all_finite). Every reduction runs in a fixed order (block
// trees, then partials in order), so results are the same from run to run.
// Indexing is in cuda/index.cu, beside tensor/cpu/index.cpp.
#include "cuda/common.cuh"

namespace phasor::gpu {

namespace {

// ---------------------------------------------------------------- sums

// One block per (row, chunk): the chunk's sum of the row, in A.
template <class T, class A>
__global__ void sum_rows_kernel(const T* x, A* out, int64_t n, int64_t chunk) {
  const int64_t row = blockIdx.x;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < n ? begin + chunk : n;
  const T* r = x + row * n;
  A acc = A(0);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += static_cast<A>(r[i]);
  acc = block_sum(acc);
  if (threadIdx.x == 0) out[row * gridDim.y + blockIdx.y] = acc;
}
template <class A, class T>
__global__ void finish_rows_kernel(const A* partial, T* out, int64_t rows, int64_t chunks) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  A acc = A(0);
  for (int64_t c = 0; c < chunks; ++c) acc += partial[row * chunks + c];
  out[row] = static_cast<T>(acc);
}

// Columns: each thread of a block owns a column; blockIdx.y takes a slice of the reduced rows.
template <class T, class A>
__global__ void sum_columns_kernel(const T* x, A* partial, int64_t reduced, int64_t cols, int64_t chunk) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < reduced ? begin + chunk : reduced;
  A acc = A(0);
  for (int64_t r = begin; r < end; ++r) acc += static_cast<A>(x[r * cols + c]);
  partial[blockIdx.y * cols + c] = acc;
}
// One thread per column (outer, inner) walks its n elements in order: the CPU's
// accumulation order, so both backends give the same sums.
template <class T, class A>
__global__ void cumsum_kernel(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  const int64_t columns = outer * inner, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < columns; col += step) {
    const int64_t o = col / inner, c = col % inner;
    A acc = A(0);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t at = (o * n + (reverse ? n - 1 - s : s)) * inner + c;
      acc += static_cast<A>(x[at]);
      out[at] = static_cast<T>(acc);
    }
  }
}
template <class A, class T>
__global__ void finish_columns_kernel(const A* partial, T* out, int64_t cols, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  A acc = A(0);
  for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
  out[c] = static_cast<T>(acc);
}

// ---------------------------------------------------------------- max / min

template <class T>
struct Best {
  T v;
  int64_t i;
};
template <class T>
__device__ inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}
// The CPU rule: the first NaN wins; otherwise the first strict extreme.
template <class T>
__device__ inline Best<T> better(Best<T> a, Best<T> b, bool want_max) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an || bn) {
    if (an && bn) return a.i < b.i ? a : b;
    return an ? a : b;
  }
  const bool b_wins = want_max ? b.v > a.v : b.v < a.v;
  if (b_wins) return b;
  if (a.v == b.v) return a.i < b.i ? a : b;
  return a;
}
template <class T>
__device__ inline Best<T> shfl_best(Best<T> v, int o) {
  Best<T> r;
  if constexpr (std::is_same_v<T, bool>) r.v = __shfl_down_sync(0xffffffffu, static_cast<int>(v.v), o) != 0;
  else r.v = __shfl_down_sync(0xffffffffu, v.v, o);
  r.i = __shfl_down_sync(0xffffffffu, v.i, o);
  return r;
}

template <class T>
__global__ void extreme_kernel(const T* x, T* values, int64_t* indices, int64_t n, bool want_max) {
  PHASOR_SHARED(unsigned char, raw, 32 * sizeof(Best<double>));
  Best<T>* s = reinterpret_cast<Best<T>*>(raw);
  const int64_t row = blockIdx.x;
  const T* r = x + row * n;
  Best<T> best{T(0), -1};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) best = better(best, Best<T>{r[i], i}, want_max);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) best = better(best, shfl_best(best, o), want_max);
  if (lane == 0) s[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best = lane < warps ? s[lane] : Best<T>{T(0), -1};
    for (int o = 16; o > 0; o >>= 1) best = better(best, shfl_best(best, o), want_max);
    if (lane == 0) {
      values[row] = best.v;
      indices[row] = best.i;
    }
  }
}

// ---------------------------------------------------------------- softmax family

template <class T>
__global__ void row_softmax_kernel(const T* x, T* out, int64_t n, RowOp op) {
  using A = acc_t<T>;
  const int64_t row = blockIdx.x;
  const T* r = x + row * n;
  T m = -::cuda::std::numeric_limits<T>::infinity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = r[i] > m ? r[i] : m;
  m = block_reduce(m, MaxOp{}, -::cuda::std::numeric_limits<T>::infinity());
  if (op == RowOp::LogSumExp && ::cuda::std::isinf(m)) {
    if (threadIdx.x == 0) out[row] = m;
    return;
  }
  if (op == RowOp::Softmax && m == -::cuda::std::numeric_limits<T>::infinity()) {  // fully masked row: zeros, not NaN
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[row * n + i] = T(0);
    return;
  }
  A s = A(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<A>(::cuda::std::exp(r[i] - m));
  s = block_sum(s);
  if (op == RowOp::LogSumExp) {
    if (threadIdx.x == 0) out[row] = m + static_cast<T>(::cuda::std::log(s));
  } else if (op == RowOp::Softmax) {
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[row * n + i] = ::cuda::std::exp(r[i] - m) * inv;
  } else {
    const T lse = m + static_cast<T>(::cuda::std::log(s));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[row * n + i] = r[i] - lse;
  }
}

template <class T>
__global__ void finite_kernel(const T* x, int64_t n, int* ok) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool good = true;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) good = good && ::cuda::std::isfinite(x[i]);
  if (!good) *ok = 0;
}

}  // namespace

void launch_sum_rows(DType t, const void* x, void* out, int64_t rows, int64_t n) {
  if (rows == 0) return;
  dispatch_dev(t, "sum", [&]<class T>() {
    if constexpr (summable<T>) {
      using A = acc_t<T>;
      // Few long rows: split each row into chunks so every SM has work.
      const int64_t want = rows >= multiprocessors() * 2 || n < 65536 ? 1 : std::min<int64_t>(n / 16384, 4 * multiprocessors());
      const int64_t chunks = std::max<int64_t>(want, 1), chunk = (n + chunks - 1) / chunks;
      Buffer partial(static_cast<size_t>(rows * chunks) * sizeof(A));
      const int threads = row_threads(chunk);
      PHASOR_LAUNCH(dim3(row_grid(rows, "sum"), static_cast<unsigned>(chunks)), threads, 0, stream(), sum_rows_kernel<T, A>)(
          static_cast<const T*>(x), partial.as<A>(), n, chunk);
      check_launch("sum");
      PHASOR_LAUNCH(static_cast<unsigned>((rows + 255) / 256), 256, 0, stream(), finish_rows_kernel<A, T>)(partial.as<A>(), static_cast<T*>(out),
                                                                                                 rows, chunks);
      check_launch("sum");
    }
  });
}

void launch_sum_columns(DType t, const void* x, void* out, int64_t reduced, int64_t cols) {
  if (cols == 0) return;
  dispatch_dev(t, "sum", [&]<class T>() {
    if constexpr (summable<T>) {
      using A = acc_t<T>;
      const int64_t col_blocks = (cols + 255) / 256;
      const int64_t target = 4 * multiprocessors();
      const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(reduced / 32, (target + col_blocks - 1) / col_blocks));
      const int64_t chunk = (reduced + chunks - 1) / chunks;
      Buffer partial(static_cast<size_t>(std::max<int64_t>(chunks * cols, 1)) * sizeof(A));
      PHASOR_LAUNCH(dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks)), 256, 0, stream(), sum_columns_kernel<T, A>)(
          static_cast<const T*>(x), partial.as<A>(), reduced, cols, chunk);
      check_launch("sum");
      PHASOR_LAUNCH(static_cast<unsigned>(col_blocks), 256, 0, stream(), finish_columns_kernel<A, T>)(partial.as<A>(), static_cast<T*>(out), cols,
                                                                                           chunks);
      check_launch("sum");
    }
  });
}

void launch_cumsum(DType t, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  if (outer * n * inner == 0) return;
  dispatch_dev(t, "cumsum", [&]<class T>() {
    if constexpr (summable<T>) {
      PHASOR_LAUNCH(grid_for(outer * inner), kThreads, 0, stream(), cumsum_kernel<T, acc_t<T>>)(static_cast<const T*>(x), static_cast<T*>(out),
                                                                                             outer, n, inner, reverse);
      check_launch("cumsum");
    }
  });
}

void launch_extreme(DType t, bool want_max, const void* x, void* values, int64_t* indices, int64_t rows, int64_t n) {
  if (rows == 0) return;
  dispatch_dev(t, want_max ? "max" : "min", [&]<class T>() {
    if constexpr (!is_cplx_v<T>) {
      PHASOR_LAUNCH(row_grid(rows, want_max ? "max" : "min"), row_threads(n), 0, stream(), extreme_kernel<T>)(static_cast<const T*>(x), static_cast<T*>(values),
                                                                                     indices, n, want_max);
      check_launch(want_max ? "max" : "min");
    }
  });
}

void launch_row_softmax(DType t, RowOp op, const void* x, void* out, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  dispatch_real(t, "softmax", [&]<class T>() {
    PHASOR_LAUNCH(row_grid(rows, "softmax"), row_threads(n), 0, stream(), row_softmax_kernel<T>)(static_cast<const T*>(x), static_cast<T*>(out), n, op);
    check_launch("softmax");
  });
}

bool all_finite(DType real, const void* x, int64_t n) {
  if (n == 0) return true;
  Buffer flag(sizeof(int));
  const int one = 1;
  copy_to_device(flag.get(), &one, sizeof one);
  dispatch_real(real, "all_finite", [&]<class T>() {
    PHASOR_LAUNCH(grid_for(n), kThreads, 0, stream(), finite_kernel<T>)(static_cast<const T*>(x), n, flag.as<int>());
    check_launch("all_finite");
  });
  int ok = 0;
  copy_to_host(&ok, flag.get(), sizeof ok);
  return ok != 0;
}

}  // namespace phasor::gpu
