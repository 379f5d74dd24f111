// Indexing CPU kernels: row gathers and scatter-adds along one dim, and the
// element-wise gather/scatter_add of tensor/index_plan.h. Indices are checked
// here, where they are read. CUDA twin: cuda/index.cu.
#include <cstring>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"
#include "tensor/index_plan.h"

namespace phasor::cpu {

namespace {
void check_rows(const char* op, const int64_t* index, int64_t count, int dim, int64_t n) {
  for (int64_t i = 0; i < count; ++i)
    if (index[i] < 0 || index[i] >= n) index_out_of_range(op, index[i], dim, n);
}
}  // namespace

void CpuBackend::index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) {
  const AroundDim s = around_dim(x.shape(), dim);
  const int64_t count = index.numel();
  const int64_t* ip = index.data<int64_t>();
  check_rows("index_select", ip, count, dim, s.n);
  const size_t row_bytes = static_cast<size_t>(s.inner) * itemsize(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* o = static_cast<char*>(out.raw_data());
#pragma omp parallel for collapse(2) if (s.outer * count * s.inner > kParallelGrain)
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t i = 0; i < count; ++i) std::memcpy(o + (a * count + i) * row_bytes, src + (a * s.n + ip[i]) * row_bytes, row_bytes);
}

void CpuBackend::index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) {
  const AroundDim s = around_dim(src.shape(), dim);
  const int64_t n = out.dim() ? out.size(dim) : 1, count = index.numel();
  const int64_t* ip = index.data<int64_t>();
  check_rows("index_add", ip, count, dim, n);
  dispatch(out.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = out.data<T>();
      const T* sp = src.data<T>();
      // Parallel over the inner dim: rows with the same index never race.
#pragma omp parallel for if (s.outer * count * s.inner > kParallelGrain && s.inner >= 64)
      for (int64_t c = 0; c < s.inner; ++c)
        for (int64_t a = 0; a < s.outer; ++a)
          for (int64_t i = 0; i < count; ++i) o[(a * n + ip[i]) * s.inner + c] += sp[(a * count + i) * s.inner + c];
    }
  });
}

void CpuBackend::gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    T* o = out.data<T>();
    for_each_indexed_offset("gather", index.data<int64_t>(), index.shape(), contiguous_strides(x.shape()), dim, x.size(dim),
                            [&](int64_t e, int64_t off) { o[e] = src[off]; });
  });
}

void CpuBackend::scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) {
  dispatch(src.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* s = src.data<T>();
      T* o = out.data<T>();
      for_each_indexed_offset("scatter_add", index.data<int64_t>(), index.shape(), contiguous_strides(out.shape()), dim, out.size(dim),
                              [&](int64_t e, int64_t off) { o[off] += s[e]; });
    }
  });
}

}  // namespace phasor::cpu
