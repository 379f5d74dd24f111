// Indexing front-ends: gathers and scatter-adds (kernels in tensor/backend.h),
// concatenation and splitting (views and copies).
#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor::ops {

namespace {
void check_index(const Tensor& index, const char* op) {
  PHASOR_CHECK(index.dtype() == DType::Int64, op, ": index must be int64, got ", index.dtype());
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const Device device = op_device("index_select", x, {index});
  check_index(index, "index_select");
  check_computes_in(x.dtype(), "index_select");
  PHASOR_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got shape ", index.shape());
  const int d = wrap_dim(dim, x.dim(), "index_select");
  const Tensor idx = contiguous(reshape(on_device(index, device), Dims{-1}));
  // A 0-d x has one row to pick (PyTorch 2 refuses other counts; 1.13 reads uninitialised memory).
  PHASOR_CHECK(x.dim() > 0 || idx.numel() == 1, "index_select: the index into a 0-d tensor must have one value, got ", idx.numel());
  Dims shape = x.shape();
  if (x.dim()) shape[d] = idx.numel();
  Tensor out = empty(shape, x.dtype(), device);
  backend(device).index_select(out, contiguous(x), idx, d);
  return out;  // a 0-d index keeps the dim, with size 1 (as PyTorch)
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const Device device = op_device("index_add", x, {index, src});
  check_index(index, "index_add");
  check_computes_in(x.dtype(), "index_add");
  const int d = wrap_dim(dim, x.dim(), "index_add");
  const Tensor idx = contiguous(reshape(on_device(index, device), Dims{-1}));
  PHASOR_CHECK(x.dim() > 0 || idx.numel() == 1, "index_add: the index into a 0-d tensor must have one value, got ", idx.numel());
  Dims expected = x.shape();
  if (x.dim()) expected[d] = idx.numel();
  PHASOR_CHECK(src.shape() == expected, "index_add: source shape ", src.shape(), " does not match ", expected, " (x ",
               x.shape(), ", ", idx.numel(), " indices along dim ", d, ")");
  Tensor out = clone(x);
  backend(device).index_add(out, contiguous(to(on_device(src, device), x.dtype())), idx, d);
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const Device device = op_device("gather", x, {index});
  check_index(index, "gather");
  check_computes_in(x.dtype(), "gather");
  const int d = wrap_dim(dim, x.dim(), "gather");
  PHASOR_CHECK(index.dim() == x.dim(), "gather: index rank ", index.dim(), " differs from input rank ", x.dim());
  // A 0-d x (dim 0 or -1 is x itself): the kernels address dims, so gather from its 1-d view.
  if (x.dim() == 0) return reshape(gather(reshape(x, Dims{1}), 0, reshape(index, Dims{1})), Dims{});
  for (int i = 0; i < x.dim(); ++i)
    PHASOR_CHECK(i == d || index.size(i) <= x.size(i), "gather: index shape ", index.shape(), " exceeds input shape ", x.shape(),
                 " at dim ", i);
  Tensor out = empty(index.shape(), x.dtype(), device);
  backend(device).gather(out, contiguous(x), contiguous(on_device(index, device)), d);
  return out;
}

Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  const Device device = op_device("scatter_add", src, {index});
  check_index(index, "scatter_add");
  check_computes_in(src.dtype(), "scatter_add");
  const int d = wrap_dim(dim, shape.size(), "scatter_add");
  PHASOR_CHECK(index.shape() == src.shape(), "scatter_add: index shape ", index.shape(), " differs from source shape ", src.shape());
  PHASOR_CHECK(index.dim() == shape.size(), "scatter_add: index rank ", index.dim(), " differs from output rank ", shape.size());
  for (int i = 0; i < index.dim(); ++i)
    PHASOR_CHECK(i == d || index.size(i) <= shape[i], "scatter_add: index shape ", index.shape(), " exceeds output shape ", shape, " at dim ", i);
  if (shape.empty()) return reshape(scatter_add(Dims{1}, 0, reshape(index, Dims{1}), reshape(src, Dims{1})), Dims{});  // as gather
  Tensor out = zeros(shape, src.dtype(), device);
  backend(device).scatter_add(out, contiguous(src), contiguous(on_device(index, device)), d);
  return out;
}

bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

Tensor cat(const std::vector<Tensor>& all, int64_t dim) {
  PHASOR_CHECK(!all.empty(), "cat: expected at least one tensor");
  for (size_t i = 0; i < all.size(); ++i)
    PHASOR_CHECK(all[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  // PyTorch's rule for 1-d empty tensors: they join any shape, along any dim, as nothing.
  std::vector<Tensor> tensors;
  DType dt = all.front().dtype();
  for (const Tensor& t : all) {
    dt = promote(dt, t.dtype());
    if (!skipped_by_cat(t)) tensors.push_back(t);
  }
  if (tensors.empty()) return empty(Dims{0}, dt, all.front().device());
  const Tensor& first = tensors.front();
  const int d = wrap_dim(dim, first.dim(), "cat");
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
  Tensor out = empty(shape, dt, first.device());
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
  const int d = wrap_dim_not_0d(dim, x.dim(), "split");
  PHASOR_CHECK(size > 0, "split: size must be positive, got ", size);
  std::vector<Tensor> parts;
  for (int64_t at = 0; at < x.size(d); at += size) parts.push_back(narrow(x, d, at, std::min(size, x.size(d) - at)));
  if (parts.empty()) parts.push_back(x);  // an empty dim splits into one empty piece (as PyTorch)
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  PHASOR_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  const int d = wrap_dim_not_0d(dim, x.dim(), "chunk");
  if (x.size(d) == 0) return std::vector<Tensor>(static_cast<size_t>(chunks), x);  // `chunks` empty pieces (as PyTorch)
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
