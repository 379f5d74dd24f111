// Reductions, the softmax family and indexing on CUDA. CPU references:
// tensor/cpu/reduce.cpp (sum, max/min, logsumexp, softmax, log_softmax, all_finite)
// and tensor/cpu/index.cpp (index_select, index_add, gather, scatter_add).
// Every reduction runs in a fixed order (block trees, then partials in order),
// so results are the same from run to run; index_add and scatter_add use
// ordered segment sums instead of atomics for the same reason.
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

// ---------------------------------------------------------------- indexing

template <class W>
__global__ void index_select_kernel(const W* x, const int64_t* index, W* out, int64_t outer, int64_t n, int64_t count, int64_t row) {
  const int64_t total = outer * count * row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t c = e % row, ai = e / row, i = ai % count, a = ai / count;
    const int64_t k = index[i];
    out[e] = k >= 0 && k < n ? x[(a * n + k) * row + c] : W{};  // a bad index is reported later (check_indices_kernel)
  }
}

// Segment s (every out row s): list[start[s * stride] .. start[(s + 1) * stride]).
template <class T>
__global__ void segment_add_kernel(T* out, const T* src, const int64_t* start, int64_t stride, const int64_t* list, int64_t outer,
                                   int64_t inner, int64_t out_rows, int64_t src_rows) {
  const int64_t total = outer * out_rows * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t c = e % inner, as = e / inner, s = as % out_rows, a = as / out_rows;
    const int64_t begin = start[s * stride], end = start[(s + 1) * stride];
    if (begin == end) continue;
    T* o = out + (a * out_rows + s) * inner + c;
    T acc = *o;
    for (int64_t k = begin; k < end; ++k) acc += src[(a * src_rows + list[k]) * inner + c];
    *o = acc;
  }
}

// ---------------------------------------------------------------- indices checked and grouped on the device

// Records the first index outside [0, n) (an `ignore` value aside) in `fault`,
// unless an earlier op recorded one. One block, so "first" is a block minimum.
__global__ void check_indices_kernel(const int64_t* index, int64_t count, int64_t n, bool has_ignore, int64_t ignore, IndexFault* fault,
                                     int64_t op, int64_t dim) {
  int64_t first = count;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t k = index[i];
    if ((!has_ignore || k != ignore) && (k < 0 || k >= n)) {
      first = i;
      break;
    }
  }
  first = block_reduce(first, MinOp{}, count);
  if (threadIdx.x == 0 && first < count && fault->op == 0) *fault = IndexFault{op, first, index[first], dim, n};
}

// A stable counting sort of positions by target in [0, n), without atomics:
// thread c owns positions [c * chunk, (c + 1) * chunk) and counts them per
// target into hist[t * chunks + c]; an exclusive scan of hist (target-major,
// then chunk) gives each (target, chunk) its first slot; thread c then places
// its positions in order. Targets out of range are left out (reported by
// check_indices_kernel).
__global__ void chunk_histogram_kernel(const int64_t* targets, int64_t count, int64_t n, int64_t chunk, int64_t chunks, int64_t* hist) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  const int64_t end = (c + 1) * chunk < count ? (c + 1) * chunk : count;
  for (int64_t i = c * chunk; i < end; ++i) {
    const int64_t t = targets[i];
    if (t >= 0 && t < n) ++hist[t * chunks + c];
  }
}
// One block: start[i] = sum of counts[0 .. i), start[total] the sum of all; counts is zeroed (the placement's cursors).
__global__ void exclusive_scan_kernel(int64_t* counts, int64_t total, int64_t* start) {
  PHASOR_SHARED(int64_t, partial, 1024);
  const int64_t span = (total + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * span, end = begin + span < total ? begin + span : total;
  int64_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += counts[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (unsigned k = 0; k < blockDim.x; ++k) {
      const int64_t v = partial[k];
      partial[k] = run;
      run += v;
    }
    start[total] = run;
  }
  __syncthreads();
  int64_t run = partial[threadIdx.x];
  for (int64_t i = begin; i < end; ++i) {
    start[i] = run;
    run += counts[i];
    counts[i] = 0;
  }
}
__global__ void chunk_place_kernel(const int64_t* targets, int64_t count, int64_t n, int64_t chunk, int64_t chunks, const int64_t* start,
                                   int64_t* cursor, int64_t* list) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  const int64_t end = (c + 1) * chunk < count ? (c + 1) * chunk : count;
  for (int64_t i = c * chunk; i < end; ++i) {
    const int64_t t = targets[i];
    if (t < 0 || t >= n) continue;
    const int64_t k = t * chunks + c;
    list[start[k] + cursor[k]++] = i;
  }
}

struct GatherGeometry {
  int ndim;
  int dim;
  int64_t size;  // the indexed tensor's extent along dim
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};
template <class W>
__global__ void gather_kernel(const W* x, const int64_t* index, W* out, GatherGeometry g, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < numel; e += step) {
    int64_t rem = e, off = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t pos = rem % g.shape[d];
      rem /= g.shape[d];
      off += (d == g.dim ? index[e] : pos) * g.strides[d];
    }
    out[e] = index[e] >= 0 && index[e] < g.size ? x[off] : W{};  // a bad index is reported later (check_indices_kernel)
  }
}
// The flat offset into a contiguous tensor of every element of `index` (its
// multi-index with dim `dim` replaced by the index), -1 for a bad index.
__global__ void scatter_offsets_kernel(const int64_t* index, GatherGeometry g, int64_t numel, int64_t* offsets) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < numel; e += step) {
    int64_t rem = e, off = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t pos = rem % g.shape[d];
      rem /= g.shape[d];
      off += (d == g.dim ? index[e] : pos) * g.strides[d];
    }
    offsets[e] = index[e] >= 0 && index[e] < g.size ? off : -1;
  }
}

// A word type of `bytes` bytes, for kernels that only move elements.
template <class F>
void by_width(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1: f.template operator()<uint8_t>(); return;
    case 4: f.template operator()<uint32_t>(); return;
    case 8: f.template operator()<uint64_t>(); return;
    case 16: f.template operator()<double2>(); return;
    default: fail("cuda: unsupported element width ", bytes);
  }
}

template <class T>
constexpr bool summable = !std::is_same_v<T, bool>;

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

void launch_index_select(const void* x, const int64_t* index, void* out, int64_t outer, int64_t n, int64_t count, int64_t row_bytes) {
  if (outer * count * row_bytes == 0) return;
  // The widest word that divides the row and the source's alignment (a view may start mid-row).
  const auto fits = [&](int64_t w) { return row_bytes % w == 0 && reinterpret_cast<uintptr_t>(x) % static_cast<uintptr_t>(w) == 0; };
  const int64_t width = fits(16) ? 16 : fits(8) ? 8 : fits(4) ? 4 : 1;
  by_width(width, [&]<class W>() {
    const int64_t row = row_bytes / width;
    PHASOR_LAUNCH(grid_for(outer * count * row), kThreads, 0, stream(), index_select_kernel<W>)(static_cast<const W*>(x), index, static_cast<W*>(out),
                                                                                    outer, n, count, row);
    check_launch("index_select");
  });
}

void launch_segment_add(DType t, void* out, const void* src, const TargetGroups& groups, int64_t outer, int64_t inner, int64_t out_rows,
                        int64_t src_rows) {
  if (outer * out_rows * inner == 0) return;
  dispatch_dev(t, "index_add", [&]<class T>() {
    if constexpr (summable<T>) {
      PHASOR_LAUNCH(grid_for(outer * out_rows * inner), kThreads, 0, stream(), segment_add_kernel<T>)(
          static_cast<T*>(out), static_cast<const T*>(src), groups.start(), groups.stride(), groups.list(), outer, inner, out_rows, src_rows);
      check_launch("index_add");
    }
  });
}

void launch_check_indices(const int64_t* index, int64_t count, int64_t n, IndexOp op, int dim, const int64_t* ignore) {
  if (count == 0) return;
  PHASOR_LAUNCH(1, 1024, 0, stream(), check_indices_kernel)(index, count, n, ignore != nullptr, ignore ? *ignore : 0, index_fault(),
                                                            static_cast<int64_t>(op), static_cast<int64_t>(dim));
  check_launch("index check");
}

namespace {
// Threads of the grouping: enough for parallel counting, few enough that the
// histogram (targets x chunks) stays within 2^22 entries.
int64_t group_chunks(int64_t count, int64_t n) {
  const int64_t by_work = std::min<int64_t>((count + 31) / 32, 1024);
  const int64_t by_memory = std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(n, 1));
  return std::max<int64_t>(1, std::min(by_work, by_memory));
}
}  // namespace

TargetGroups::TargetGroups(const int64_t* targets, int64_t count, int64_t n)
    : chunks_(group_chunks(count, n)),
      hist_(std::make_unique<Buffer>(static_cast<size_t>(n * chunks_) * sizeof(int64_t))),
      start_(std::make_unique<Buffer>(static_cast<size_t>(n * chunks_ + 1) * sizeof(int64_t))),
      list_(std::make_unique<Buffer>(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(int64_t))) {
  const int64_t chunk = (count + chunks_ - 1) / chunks_, total = n * chunks_;
  int64_t* hist = hist_->as<int64_t>();
  const unsigned blocks = static_cast<unsigned>((chunks_ + 127) / 128);
  if (total > 0) check(cudaMemsetAsync(hist, 0, static_cast<size_t>(total) * sizeof(int64_t), stream()), "cudaMemsetAsync (histogram)");
  if (count > 0) {
    PHASOR_LAUNCH(blocks, 128, 0, stream(), chunk_histogram_kernel)(targets, count, n, chunk, chunks_, hist);
    check_launch("index grouping");
  }
  PHASOR_LAUNCH(1, 1024, 0, stream(), exclusive_scan_kernel)(hist, total, start_->as<int64_t>());
  check_launch("index grouping");
  if (count > 0) {
    PHASOR_LAUNCH(blocks, 128, 0, stream(), chunk_place_kernel)(targets, count, n, chunk, chunks_, start(), hist, list_->as<int64_t>());
    check_launch("index grouping");
  }
}
TargetGroups::~TargetGroups() = default;
const int64_t* TargetGroups::start() const { return start_->as<int64_t>(); }
const int64_t* TargetGroups::list() const { return list_->as<int64_t>(); }

namespace {
GatherGeometry gather_geometry(int ndim, const int64_t* index_shape, const int64_t* strides, int dim, int64_t size) {
  GatherGeometry g{ndim, dim, size, {}, {}};
  for (int d = 0; d < ndim; ++d) {
    g.shape[d] = index_shape[d];
    g.strides[d] = strides[d];
  }
  return g;
}
}  // namespace

void launch_scatter_offsets(const int64_t* index, int ndim, const int64_t* index_shape, const int64_t* out_strides, int dim, int64_t out_size,
                            int64_t numel, int64_t* offsets) {
  if (numel == 0) return;
  PHASOR_LAUNCH(grid_for(numel), kThreads, 0, stream(), scatter_offsets_kernel)(
      index, gather_geometry(ndim, index_shape, out_strides, dim, out_size), numel, offsets);
  check_launch("scatter_add");
}

void launch_gather(int64_t item_bytes, const void* x, const int64_t* index, void* out, int ndim, const int64_t* index_shape,
                   const int64_t* x_strides, int dim, int64_t x_size, int64_t numel) {
  if (numel == 0) return;
  const GatherGeometry g = gather_geometry(ndim, index_shape, x_strides, dim, x_size);
  by_width(item_bytes, [&]<class W>() {
    PHASOR_LAUNCH(grid_for(numel), kThreads, 0, stream(), gather_kernel<W>)(static_cast<const W*>(x), index, static_cast<W*>(out), g, numel);
    check_launch("gather");
  });
}

}  // namespace phasor::gpu
