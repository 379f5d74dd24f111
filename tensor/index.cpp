// Indexing: gathers, scatter-adds, concatenation and splitting.
#include "tensor/backend.h"
#include "tensor/loop.h"
#include "tensor/ops.h"

namespace phasor::ops {

namespace {
void check_index(const Tensor& index, const char* op) {
  PHASOR_CHECK(index.dtype() == DType::Int64, op, ": index must be int64, got ", index.dtype());
}

// Views x as [outer, n, inner] around `dim` (copying to contiguous first).
struct ThreeD {
  Tensor t;
  int64_t outer, n, inner;
};
ThreeD around(const Tensor& x, int d) {
  ThreeD r{contiguous(x), 1, x.dim() ? x.size(d) : 1, 1};
  for (int i = 0; i < d; ++i) r.outer *= x.size(i);
  for (int i = d + 1; i < x.dim(); ++i) r.inner *= x.size(i);
  return r;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  if (Backend* b = device_backend("index_select", x, {index})) return b->index_select(x, dim, index);
  check_index(index, "index_select");
  PHASOR_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got shape ", index.shape());
  const int d = wrap_dim(dim, x.dim(), "index_select");
  const ThreeD src = around(x, d);
  const Tensor idx = contiguous(reshape(index, Dims{-1}));
  const int64_t count = idx.numel();
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0; i < count; ++i)
    PHASOR_CHECK(ip[i] >= 0 && ip[i] < src.n, "index_select: index ", ip[i], " out of range for dim ", d, " of size ", src.n);
  Dims shape = x.shape();
  shape[d] = count;
  Tensor out = empty(shape, x.dtype());
  const size_t row_bytes = static_cast<size_t>(src.inner) * itemsize(x.dtype());
  const char* s = static_cast<const char*>(src.t.raw_data());
  char* o = static_cast<char*>(out.raw_data());
#pragma omp parallel for collapse(2) if (src.outer * count * src.inner > cpu::kParallelGrain)
  for (int64_t a = 0; a < src.outer; ++a)
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(o + (a * count + i) * row_bytes, s + (a * src.n + ip[i]) * row_bytes, row_bytes);
  if (index.dim() == 0) return squeeze(out, d);
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (Backend* b = device_backend("index_add", x, {index, src})) return b->index_add(x, dim, index, src);
  check_index(index, "index_add");
  const int d = wrap_dim(dim, x.dim(), "index_add");
  const Tensor idx = contiguous(reshape(index, Dims{-1}));
  Dims expected = x.shape();
  expected[d] = idx.numel();
  PHASOR_CHECK(src.shape() == expected, "index_add: source shape ", src.shape(), " does not match ", expected, " (x ",
               x.shape(), ", ", idx.numel(), " indices along dim ", d, ")");
  Tensor out = clone(x);
  const ThreeD s = around(to(src, x.dtype()), d);
  const int64_t n = x.size(d), count = idx.numel();
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t i = 0; i < count; ++i)
    PHASOR_CHECK(ip[i] >= 0 && ip[i] < n, "index_add: index ", ip[i], " out of range for dim ", d, " of size ", n);
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = out.data<T>();
      const T* sp = s.t.template data<T>();
      // Parallel over the inner dim: rows with the same index never race.
#pragma omp parallel for if (s.outer * count * s.inner > cpu::kParallelGrain && s.inner >= 64)
      for (int64_t c = 0; c < s.inner; ++c)
        for (int64_t a = 0; a < s.outer; ++a)
          for (int64_t i = 0; i < count; ++i) o[(a * n + ip[i]) * s.inner + c] += sp[(a * count + i) * s.inner + c];
    }
  });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  if (Backend* b = device_backend("gather", x, {index})) return b->gather(x, dim, index);
  check_index(index, "gather");
  const int d = wrap_dim(dim, x.dim(), "gather");
  PHASOR_CHECK(index.dim() == x.dim(), "gather: index rank ", index.dim(), " differs from input rank ", x.dim());
  for (int i = 0; i < x.dim(); ++i)
    PHASOR_CHECK(i == d || index.size(i) <= x.size(i), "gather: index shape ", index.shape(), " exceeds input shape ", x.shape(),
                 " at dim ", i);
  Tensor out = empty(index.shape(), x.dtype());
  const Tensor xv = contiguous(x);
  // Index the input with the index tensor's own geometry (index dims may be smaller).
  const Dims xs = contiguous_strides(x.shape());
  const Dims is = index.shape();
  const Tensor ic = contiguous(index);
  const int64_t* ip = ic.data<int64_t>();
  dispatch(x.dtype(), [&]<class T>() {
    const T* src = xv.data<T>();
    T* o = out.data<T>();
    Dims pos = Dims::filled(is.size(), 0);
    for (int64_t e = 0; e < index.numel(); ++e) {
      const int64_t k = ip[e];
      PHASOR_CHECK(k >= 0 && k < x.size(d), "gather: index ", k, " out of range for dim ", d, " of size ", x.size(d));
      int64_t off = 0;
      for (int i = 0; i < is.size(); ++i) off += (i == d ? k : pos[i]) * xs[i];
      o[e] = src[off];
      for (int i = is.size() - 1; i >= 0; --i) {
        if (++pos[i] < is[i]) break;
        pos[i] = 0;
      }
    }
  });
  return out;
}

Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  if (Backend* b = device_backend("scatter_add", src, {index})) return b->scatter_add(shape, dim, index, src);
  check_index(index, "scatter_add");
  const int d = wrap_dim(dim, shape.size(), "scatter_add");
  PHASOR_CHECK(index.shape() == src.shape(), "scatter_add: index shape ", index.shape(), " differs from source shape ", src.shape());
  Tensor out = zeros(shape, src.dtype());
  const Dims os = contiguous_strides(shape);
  const Dims is = index.shape();
  const Tensor ic = contiguous(index), sc = contiguous(src);
  const int64_t* ip = ic.data<int64_t>();
  dispatch(src.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* s = sc.data<T>();
      T* o = out.data<T>();
      Dims pos = Dims::filled(is.size(), 0);
      for (int64_t e = 0; e < index.numel(); ++e) {
        const int64_t k = ip[e];
        PHASOR_CHECK(k >= 0 && k < shape[d], "scatter_add: index ", k, " out of range for dim ", d, " of size ", shape[d]);
        int64_t off = 0;
        for (int i = 0; i < is.size(); ++i) off += (i == d ? k : pos[i]) * os[i];
        o[off] += s[e];
        for (int i = is.size() - 1; i >= 0; --i) {
          if (++pos[i] < is[i]) break;
          pos[i] = 0;
        }
      }
    }
  });
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  PHASOR_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  const int d = wrap_dim(dim, first.dim(), "cat");
  DType dt = first.dtype();
  int64_t total = 0;
  for (const Tensor& t : tensors) {
    PHASOR_CHECK(t.dim() == first.dim(), "cat: tensors have different ranks (", first.shape(), " and ", t.shape(), ")");
    for (int i = 0; i < t.dim(); ++i)
      PHASOR_CHECK(i == d || t.size(i) == first.size(i), "cat: shapes ", first.shape(), " and ", t.shape(),
                   " differ outside dim ", d);
    total += t.size(d);
    dt = promote(dt, t.dtype());
  }
  Dims shape = first.shape();
  shape[d] = total;
  Tensor out = empty(shape, dt);
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    copy_(narrow(out, d, at, t.size(d)), t);
    at += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  PHASOR_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  const int d = wrap_dim(dim, tensors.front().dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    PHASOR_CHECK(t.shape() == tensors.front().shape(), "stack: shapes differ (", tensors.front().shape(), " and ", t.shape(), ")");
    parts.push_back(unsqueeze(t, d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), "split");
  PHASOR_CHECK(size > 0, "split: size must be positive, got ", size);
  std::vector<Tensor> parts;
  for (int64_t at = 0; at < x.size(d); at += size) parts.push_back(narrow(x, d, at, std::min(size, x.size(d) - at)));
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  PHASOR_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  const int d = wrap_dim(dim, x.dim(), "chunk");
  return split(x, std::max<int64_t>(1, (x.size(d) + chunks - 1) / chunks), d);
}

Tensor causal_mask(int64_t n_query, int64_t n_key, int64_t offset) {
  Tensor m = empty(Dims{n_query, n_key}, DType::Bool);
  bool* p = m.data<bool>();
  for (int64_t i = 0; i < n_query; ++i)
    for (int64_t j = 0; j < n_key; ++j) p[i * n_key + j] = j > i + offset;
  return m;
}

}  // namespace phasor::ops
