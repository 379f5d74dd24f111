// Reduction and softmax front-ends. Every reduction is brought to one of two
// contiguous layouts the kernels know (tensor/backend.h): "rows" (reduce the
// trailing block of each row) or "columns" (reduce the leading block, summing
// whole rows into one accumulator row), with one copy only when the reduced
// dims are interleaved with kept ones.
#include <cmath>
#include <limits>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor::ops {

namespace {

struct ReducePlan {
  Dims out_shape;       // with keepdim applied
  int64_t rows = 1;     // product of kept dims
  int64_t reduced = 1;  // product of reduced dims
  std::vector<bool> is_reduced;
};

ReducePlan plan_reduction(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  ReducePlan p;
  p.is_reduced.assign(x.dim(), dims.empty());
  // Dims 0 and -1 of a 0-d tensor name the tensor itself (wrap_dim): reducing
  // it leaves its one element, so only the duplicate check applies.
  std::vector<bool> seen(static_cast<size_t>(std::max(x.dim(), 1)), false);
  for (int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), op);
    PHASOR_CHECK(!seen[w], op, ": dim ", d, " listed twice");
    seen[w] = true;
    if (x.dim()) p.is_reduced[w] = true;
  }
  for (int i = 0; i < x.dim(); ++i) {
    if (p.is_reduced[i]) {
      p.reduced *= x.size(i);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.rows *= x.size(i);
      p.out_shape.push_back(x.size(i));
    }
  }
  return p;
}

// x laid out as [rows, reduced] contiguous (kept dims first), copying if needed.
Tensor kept_major(const Tensor& x, const ReducePlan& p) {
  Dims order;
  for (int i = 0; i < x.dim(); ++i)
    if (!p.is_reduced[i]) order.push_back(i);
  for (int i = 0; i < x.dim(); ++i)
    if (p.is_reduced[i]) order.push_back(i);
  return contiguous(permute(x, order));
}

bool reduced_dims_lead(const Tensor& x, const ReducePlan& p) {
  if (!x.is_contiguous()) return false;
  bool seen_kept = false;
  for (int i = 0; i < x.dim(); ++i) {
    if (!p.is_reduced[i]) seen_kept = true;
    else if (seen_kept && x.size(i) != 1) return false;
  }
  return true;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Device device = op_device("sum", x);
  check_computes_in(x.dtype(), "sum");
  const ReducePlan p = plan_reduction(x, dims, keepdim, "sum");
  const DType dt = x.dtype() == DType::Bool ? DType::Int64 : x.dtype();
  Tensor out = empty(p.out_shape, dt, device);
  const Tensor src = to(x, dt);
  // Everything into one number is one long row, not one column (sum_rows's loop vectorises).
  if (reduced_dims_lead(src, p) && p.rows > 1) backend(device).sum_columns(out, src, p.reduced, p.rows);
  else backend(device).sum_rows(out, kept_major(src, p), p.rows, p.reduced);
  return out;
}

Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  const Device device = op_device("cumsum", x);
  check_computes_in(x.dtype(), "cumsum");
  PHASOR_CHECK(is_inexact(x.dtype()) || x.dtype() == DType::Int64, "cumsum: not defined for dtype ", x.dtype());
  PHASOR_CHECK(x.dim() > 0, "cumsum: needs a dim, got a 0-d tensor");
  const int d = wrap_dim(dim, x.dim(), "cumsum");
  const Tensor src = contiguous(x);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= x.size(i);
  for (int i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  Tensor out = empty(x.shape(), x.dtype(), device);
  backend(device).cumsum(out, src, outer, x.size(d), inner, reverse);
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_computes_in(x.dtype(), "mean");
  const ReducePlan p = plan_reduction(x, dims, keepdim, "mean");
  PHASOR_CHECK(is_inexact(x.dtype()), "mean: not defined for dtype ", x.dtype());
  Tensor s = sum(x, dims, keepdim);
  // The mean of no elements is 0/0 = NaN, as in PyTorch and NumPy.
  binary_(Binary::Div, s, scalar_tensor(static_cast<double>(p.reduced), real_dtype(x.dtype())));
  return s;
}

namespace {
ValuesIndices extreme(const Tensor& x, int64_t dim, bool keepdim, bool want_max, const char* op) {
  const Device device = op_device(op, x);
  check_computes_in(x.dtype(), op);
  PHASOR_CHECK(!x.is_complex(), op, ": not defined for complex dtype ", x.dtype());
  const int d = wrap_dim(dim, x.dim(), op);
  const ReducePlan p = plan_reduction(x, {d}, keepdim, op);
  PHASOR_CHECK(p.reduced > 0, op, ": cannot reduce over an empty dim ", d, " of shape ", x.shape());
  ValuesIndices r{empty(p.out_shape, x.dtype(), device), empty(p.out_shape, DType::Int64, device)};
  backend(device).extreme(want_max, r.values, r.indices, kept_major(x, p), p.rows, p.reduced);
  return r;
}
}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, true, "max"); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, false, "min"); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, true, "argmax").indices; }

Tensor amax(const Tensor& x) {
  PHASOR_CHECK(x.numel() > 0, "amax: empty tensor");
  return extreme(reshape(x, Dims{-1}), 0, false, true, "amax").values;
}

namespace {
// The row op along `dim`: x moved so that dim is last and contiguous, the
// kernel run on its rows, the result moved back (with dim reduced to 1, or
// dropped, for logsumexp).
Tensor along_dim(const Tensor& x, int64_t dim, RowOp op, bool keepdim, const char* name) {
  const Device device = op_device(name, x);
  check_computes_in(x.dtype(), name);
  const int d = wrap_dim(dim, x.dim(), name);
  PHASOR_CHECK(is_floating(x.dtype()), name, ": expected a real floating tensor, got ", x.dtype());
  const bool reduce = op == RowOp::LogSumExp;
  const Tensor moved = contiguous(transpose(x, d, -1));
  const int64_t n = x.dim() ? x.size(d) : 1;
  const int64_t rows = n ? moved.numel() / n : 0;
  Dims moved_shape = moved.shape();
  if (reduce && moved_shape.size()) moved_shape[moved_shape.size() - 1] = 1;
  Tensor out = empty(moved_shape, x.dtype(), device);
  if (n == 0) {
    if (reduce) fill_(out, -std::numeric_limits<double>::infinity());  // the log of an empty sum
  } else {
    backend(device).row_softmax(op, out, moved, rows, n);
  }
  Tensor result = transpose(out, d, -1);
  if (reduce && !keepdim) result = squeeze(result, d);
  return contiguous(result);
}
}  // namespace

Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) { return along_dim(x, dim, RowOp::LogSumExp, keepdim, "logsumexp"); }
Tensor softmax(const Tensor& x, int64_t dim) { return along_dim(x, dim, RowOp::Softmax, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return along_dim(x, dim, RowOp::LogSoftmax, false, "log_softmax"); }

Tensor norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_computes_in(x.dtype(), "norm");
  PHASOR_CHECK(is_inexact(x.dtype()), "norm: not defined for dtype ", x.dtype());
  const Tensor a = x.is_complex() ? unary(Unary::Abs, x) : x;
  return unary(Unary::Sqrt, sum(binary(Binary::Mul, a, a), dims, keepdim));
}

Tensor sum_to(const Tensor& grad, const Dims& shape) {
  if (grad.shape() == shape) return grad;
  const int lead = grad.dim() - shape.size();
  PHASOR_CHECK(lead >= 0, "sum_to: cannot reduce shape ", grad.shape(), " to ", shape);
  std::vector<int64_t> dims;
  for (int i = 0; i < grad.dim(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && grad.size(i) != 1)) dims.push_back(i);
    else PHASOR_CHECK(shape[i - lead] == grad.size(i), "sum_to: cannot reduce shape ", grad.shape(), " to ", shape);
  }
  if (dims.empty()) return reshape(grad, shape);
  return reshape(sum(grad, dims, true), shape);
}

bool all_finite(const Tensor& x) {
  const Device device = op_device("all_finite", x);
  check_computes_in(x.dtype(), "all_finite");  // not "true": its values can be infinite or NaN
  if (!is_inexact(x.dtype())) return true;
  return backend(device).all_finite(contiguous(x.is_complex() ? view_as_real(x) : x));
}

}  // namespace phasor::ops
