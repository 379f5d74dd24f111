// Indexing on CUDA: index_select, index_add, gather and scatter_add, and the
// device-side check and grouping of their indices. CPU reference:
// tensor/cpu/index.cpp. index_add and scatter_add use ordered segment sums
// instead of atomics, so results are the same from run to run.
#include "cuda/common.cuh"

namespace phasor::gpu {

namespace {

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

}  // namespace

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
