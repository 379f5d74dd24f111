#pragma once
// The addressing of gather and scatter_add, shared by every backend: element e
// of an index tensor (row-major over its own shape) addresses the element of
// the indexed tensor whose coordinates are e's with dim `dim` replaced by
// index[e]. Each index is validated on the way, with the one message of
// index_out_of_range().
#include "tensor/backend.h"

namespace phasor {

// f(e, offset) for every element e of `index`, in order; `strides` are those of
// the indexed tensor (contiguous), `size` its extent along `dim`.
template <class F>
void for_each_indexed_offset(const char* op, const int64_t* index, const Dims& index_shape, const Dims& strides, int dim, int64_t size,
                             F&& f) {
  const int64_t count = index_shape.numel();
  Dims pos = Dims::filled(index_shape.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    const int64_t k = index[e];
    if (k < 0 || k >= size) index_out_of_range(op, k, dim, size);
    int64_t off = 0;
    for (int i = 0; i < index_shape.size(); ++i) off += (i == dim ? k : pos[i]) * strides[i];
    f(e, off);
    for (int i = index_shape.size() - 1; i >= 0; --i) {
      if (++pos[i] < index_shape[i]) break;
      pos[i] = 0;
    }
  }
}

// Views a contiguous tensor of `shape` as [outer, shape[dim], inner].
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AroundDim around_dim(const Dims& shape, int dim) {
  AroundDim r;
  r.n = shape.size() ? shape[dim] : 1;
  for (int i = 0; i < dim; ++i) r.outer *= shape[i];
  for (int i = dim + 1; i < shape.size(); ++i) r.inner *= shape[i];
  return r;
}

}  // namespace phasor
