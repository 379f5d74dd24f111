// Views: new geometry over the same storage, no data moved.
#include "tensor/ops.h"

namespace phasor::ops {

namespace {
Tensor restride(const Tensor& t, const Dims& shape, const Dims& strides, int64_t offset) {
  return as_strided(t, shape, strides, offset);
}

// Strides for viewing `t` as `shape` without a copy, if its layout allows it
// (the algorithm of numpy's _attempt_nocopy_reshape).
std::optional<Dims> view_strides(const Tensor& t, const Dims& shape) {
  if (t.numel() == 0 || t.is_contiguous()) return contiguous_strides(shape);
  Dims out = Dims::filled(shape.size(), 0);
  const Dims& old_shape = t.shape();
  const Dims& old_strides = t.strides();
  int oi = 0, ni = 0;
  while (oi < old_shape.size() && ni < shape.size()) {
    int oj = oi + 1, nj = ni + 1;
    int64_t np = shape[ni], op = old_shape[oi];
    while (np != op) {
      if (np < op) np *= shape[nj++];
      else op *= old_shape[oj++];
    }
    for (int k = oi; k < oj - 1; ++k)
      if (old_strides[k] != old_shape[k + 1] * old_strides[k + 1]) return std::nullopt;
    out[nj - 1] = old_strides[oj - 1];
    for (int k = nj - 1; k > ni; --k) out[k - 1] = out[k] * shape[k];
    oi = oj;
    ni = nj;
  }
  for (int k = ni; k < shape.size(); ++k) out[k] = 1;  // trailing size-1 dims
  return out;
}

Dims infer_shape(const Tensor& t, const Dims& shape, const char* op) {
  Dims out = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      PHASOR_CHECK(infer < 0, op, ": more than one -1 in shape ", shape);
      infer = i;
    } else {
      PHASOR_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in shape ", shape);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    PHASOR_CHECK(known != 0 && t.numel() % known == 0, op, ": cannot infer -1 in shape ", shape, " for ", t.numel(),
                 " elements");
    out[infer] = t.numel() / known;
  }
  PHASOR_CHECK(out.numel() == t.numel(), op, ": shape ", shape, " is invalid for a tensor of shape ", t.shape(), " (",
               t.numel(), " elements)");
  return out;
}
}  // namespace

Tensor view(const Tensor& t, const Dims& shape) {
  const Dims target = infer_shape(t, shape, "view");
  auto strides = view_strides(t, target);
  PHASOR_CHECK(strides.has_value(), "view: cannot view a tensor of shape ", t.shape(), " and strides ", t.strides(),
               " as ", target, " without a copy (use reshape)");
  return restride(t, target, *strides, t.offset());
}

Tensor reshape(const Tensor& t, const Dims& shape) {
  const Dims target = infer_shape(t, shape, "reshape");
  if (auto strides = view_strides(t, target)) return restride(t, target, *strides, t.offset());
  return view(contiguous(t), target);
}

Tensor permute(const Tensor& t, const Dims& order) {
  PHASOR_CHECK(order.size() == t.dim(), "permute: order ", order, " does not match a tensor with ", t.dim(), " dims");
  Dims shape, strides;
  unsigned seen = 0;
  for (int i = 0; i < order.size(); ++i) {
    const int d = wrap_dim(order[i], t.dim(), "permute");
    PHASOR_CHECK(!(seen & (1u << d)), "permute: dim ", d, " repeated in ", order);
    seen |= 1u << d;
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d));
  }
  return restride(t, shape, strides, t.offset());
}

Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  const int a = wrap_dim(d0, t.dim(), "transpose"), b = wrap_dim(d1, t.dim(), "transpose");
  if (t.dim() == 0) return t;  // dims 0 and -1 of a 0-d tensor are the tensor itself
  Dims order = Dims::filled(t.dim(), 0);
  for (int i = 0; i < t.dim(); ++i) order[i] = i;
  std::swap(order[a], order[b]);
  return permute(t, order);
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  const int d = wrap_dim_not_0d(dim, t.dim(), "narrow");
  PHASOR_CHECK(start >= 0 && length >= 0 && start + length <= t.size(d), "narrow: range [", start, ", ", start + length,
               ") out of bounds for dim ", d, " of size ", t.size(d), " (shape ", t.shape(), ")");
  Dims shape = t.shape();
  shape[d] = length;
  return restride(t, shape, t.strides(), t.offset() + start * t.stride(d));
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  const int d = wrap_dim_not_0d(dim, t.dim(), "select");
  const int64_t n = t.size(d);
  PHASOR_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  Dims shape = t.shape(), strides = t.strides();
  shape.erase(d);
  strides.erase(d);
  return restride(t, shape, strides, t.offset() + index * t.stride(d));
}

Tensor expand(const Tensor& t, const Dims& shape) {
  PHASOR_CHECK(shape.size() >= t.dim(), "expand: cannot expand shape ", t.shape(), " to fewer dims ", shape);
  const int lead = shape.size() - t.dim();
  Dims strides = Dims::filled(shape.size(), 0);
  Dims out = shape;
  for (int i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      PHASOR_CHECK(shape[i] >= 0, "expand: invalid size ", shape[i], " in ", shape);
      continue;
    }
    const int64_t have = t.size(i - lead);
    if (shape[i] == -1) out[i] = have;
    PHASOR_CHECK(out[i] == have || have == 1, "expand: cannot expand shape ", t.shape(), " to ", shape, " (dim ", i,
                 ": ", have, " vs ", shape[i], ")");
    strides[i] = have == 1 && out[i] != 1 ? 0 : t.stride(i - lead);
  }
  return restride(t, out, strides, t.offset());
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  const int d = wrap_dim(dim, t.dim(), "squeeze");
  if (t.dim() == 0 || t.size(d) != 1) return t;  // a 0-d tensor stays as it is
  Dims shape = t.shape(), strides = t.strides();
  shape.erase(d);
  strides.erase(d);
  return restride(t, shape, strides, t.offset());
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  const int d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Dims shape = t.shape(), strides = t.strides();
  shape.insert(d, 1);
  strides.insert(d, d < t.dim() ? t.stride(d) * t.size(d) : 1);
  return restride(t, shape, strides, t.offset());
}

Tensor flatten(const Tensor& t, int64_t start, int64_t end) {
  const int s = wrap_dim(start, t.dim(), "flatten"), e = wrap_dim(end, t.dim(), "flatten");
  if (t.dim() == 0) return reshape(t, Dims{1});
  PHASOR_CHECK(s <= e, "flatten: start dim ", start, " after end dim ", end);
  Dims shape;
  for (int i = 0; i < s; ++i) shape.push_back(t.size(i));
  int64_t merged = 1;
  for (int i = s; i <= e; ++i) merged *= t.size(i);
  shape.push_back(merged);
  for (int i = e + 1; i < t.dim(); ++i) shape.push_back(t.size(i));
  return reshape(t, shape);
}

Tensor view_as_real(const Tensor& t) {
  PHASOR_CHECK(t.is_complex(), "view_as_real: expected a complex tensor, got ", t.dtype());
  Dims shape = t.shape(), strides = t.strides();
  for (auto& s : strides) s *= 2;
  shape.push_back(2);
  strides.push_back(1);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = t.offset() * 2;
  impl->dtype = real_dtype(t.dtype());
  return Tensor(std::move(impl));
}

Tensor view_as_complex(const Tensor& t) {
  PHASOR_CHECK(is_floating(t.dtype()), "view_as_complex: expected float32 or float64, got ", t.dtype());
  PHASOR_CHECK(t.dim() >= 1 && t.size(-1) == 2, "view_as_complex: last dim must have size 2, got shape ", t.shape());
  PHASOR_CHECK(t.stride(-1) == 1, "view_as_complex: last dim must be contiguous (stride 1), got strides ", t.strides());
  PHASOR_CHECK(t.offset() % 2 == 0, "view_as_complex: storage offset ", t.offset(), " is not a multiple of 2");
  Dims shape = t.shape(), strides = t.strides();
  shape.erase(shape.size() - 1);
  strides.erase(strides.size() - 1);
  for (int i = 0; i < strides.size(); ++i) {
    PHASOR_CHECK(strides[i] % 2 == 0 || shape[i] == 1, "view_as_complex: stride ", strides[i],
                 " is not a multiple of 2 (strides ", t.strides(), ")");
    strides[i] /= 2;
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = t.offset() / 2;
  impl->dtype = complex_dtype(t.dtype());
  return Tensor(std::move(impl));
}

Tensor real(const Tensor& t) { return t.is_complex() ? select(view_as_real(t), -1, 0) : t; }

Tensor imag(const Tensor& t) {
  PHASOR_CHECK(t.is_complex(), "imag: not defined for real dtype ", t.dtype());
  return select(view_as_real(t), -1, 1);
}

}  // namespace phasor::ops
