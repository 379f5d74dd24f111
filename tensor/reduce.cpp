// Reductions and softmax. Every reduction is brought to one of two shapes:
// "rows" (reduce the contiguous trailing block of each row) or "columns"
// (reduce the leading block, summing whole rows into one accumulator row),
// with one copy only when the reduced dims are interleaved with kept ones.
#include "tensor/backend.h"
#include <omp.h>

#include <cmath>
#include <limits>

#include "tensor/loop.h"
#include "tensor/ops.h"

namespace phasor::ops {

namespace {

// Accumulator type: float32 sums accumulate in double for accuracy.
template <class T> struct acc_of { using type = T; };
template <> struct acc_of<float> { using type = double; };
template <> struct acc_of<c64> { using type = c128; };
template <class T> using acc_t = typename acc_of<T>::type;

struct ReducePlan {
  Dims kept_shape;      // output shape without the reduced dims
  Dims out_shape;       // with keepdim applied
  int64_t rows = 1;     // product of kept dims
  int64_t reduced = 1;  // product of reduced dims
  std::vector<bool> is_reduced;
};

ReducePlan plan_reduction(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  ReducePlan p;
  p.is_reduced.assign(x.dim(), dims.empty());
  for (int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), op);
    PHASOR_CHECK(!p.is_reduced[w], op, ": dim ", d, " listed twice");
    p.is_reduced[w] = true;
  }
  for (int i = 0; i < x.dim(); ++i) {
    if (p.is_reduced[i]) {
      p.reduced *= x.size(i);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.rows *= x.size(i);
      p.kept_shape.push_back(x.size(i));
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

template <class T>
void sum_rows(const T* x, T* out, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > cpu::kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    acc_t<T> acc{};
    const T* row = x + r * n;
    for (int64_t i = 0; i < n; ++i) acc += static_cast<acc_t<T>>(row[i]);
    out[r] = static_cast<T>(acc);
  }
}

template <class T>
void sum_columns(const T* x, T* out, int64_t reduced, int64_t cols) {
  std::vector<acc_t<T>> acc(static_cast<size_t>(cols));
#pragma omp parallel if (reduced * cols > cpu::kParallelGrain && cols >= 64)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = cols * t / nt, end = cols * (t + 1) / nt;
    for (int64_t r = 0; r < reduced; ++r) {
      const T* row = x + r * cols;
      for (int64_t c = begin; c < end; ++c) acc[c] += static_cast<acc_t<T>>(row[c]);
    }
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<T>(acc[c]);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (Backend* b = device_backend("sum", x)) return b->sum(x, dims, keepdim);
  const ReducePlan p = plan_reduction(x, dims, keepdim, "sum");
  const DType dt = x.dtype() == DType::Bool ? DType::Int64 : x.dtype();
  Tensor out = empty(p.out_shape, dt);
  const Tensor src = to(x, dt);
  dispatch(dt, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      if (reduced_dims_lead(src, p)) {
        sum_columns(src.data<T>(), out.data<T>(), p.reduced, p.rows);
      } else {
        const Tensor c = kept_major(src, p);
        sum_rows(c.data<T>(), out.data<T>(), p.rows, p.reduced);
      }
    }
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduction(x, dims, keepdim, "mean");
  PHASOR_CHECK(is_inexact(x.dtype()), "mean: not defined for dtype ", x.dtype());
  Tensor s = sum(x, dims, keepdim);
  binary_(Binary::Div, s, scalar_tensor(static_cast<double>(std::max<int64_t>(p.reduced, 1)), real_dtype(x.dtype())));
  return s;
}

namespace {
ValuesIndices extreme(const Tensor& x, int64_t dim, bool keepdim, bool want_max, const char* op) {
  PHASOR_CHECK(!x.is_complex(), op, ": not defined for complex dtype ", x.dtype());
  const int d = wrap_dim(dim, x.dim(), op);
  const ReducePlan p = plan_reduction(x, {d}, keepdim, op);
  PHASOR_CHECK(p.reduced > 0, op, ": cannot reduce over an empty dim ", d, " of shape ", x.shape());
  ValuesIndices r{empty(p.out_shape, x.dtype()), empty(p.out_shape, DType::Int64)};
  const Tensor c = kept_major(x, p);
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (!is_complex_v<T>) {
    const T* src = c.data<T>();
    T* values = r.values.data<T>();
    int64_t* indices = r.indices.data<int64_t>();
    for (int64_t row = 0; row < p.rows; ++row) {
      const T* v = src + row * p.reduced;
      int64_t best = 0;
      for (int64_t i = 1; i < p.reduced; ++i) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(v[best])) break;
          if (std::isnan(v[i])) { best = i; break; }
        }
        if (want_max ? v[i] > v[best] : v[i] < v[best]) best = i;
      }
      values[row] = v[best];
      indices[row] = best;
    }
    }
  });
  return r;
}
}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  if (Backend* b = device_backend("max", x)) return b->max(x, dim, keepdim);
  return extreme(x, dim, keepdim, true, "max");
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  if (Backend* b = device_backend("min", x)) return b->min(x, dim, keepdim);
  return extreme(x, dim, keepdim, false, "min");
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return extreme(x, dim, keepdim, true, "argmax").indices; }

Tensor amax(const Tensor& x) {
  PHASOR_CHECK(x.numel() > 0, "amax: empty tensor");
  return extreme(reshape(x, Dims{-1}), 0, false, true, "amax").values;
}

namespace {
// Applies row_fn(in_row, out_row, n) to every row of x along `dim`, writing a
// tensor shaped like x (or with `dim` reduced to 1 when `reduce` is set).
template <class RowFn>
Tensor along_dim(const Tensor& x, int64_t dim, bool reduce, bool keepdim, const char* op, RowFn row_fn) {
  const int d = wrap_dim(dim, x.dim(), op);
  PHASOR_CHECK(is_floating(x.dtype()), op, ": expected a real floating tensor, got ", x.dtype());
  const Tensor moved = contiguous(transpose(x, d, -1));
  const int64_t n = x.dim() ? x.size(d) : 1;
  const int64_t rows = n ? moved.numel() / n : 0;
  Dims moved_shape = moved.shape();
  if (reduce) moved_shape[moved_shape.size() - 1] = 1;
  Tensor out = empty(moved_shape, x.dtype());
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    const T* in = moved.data<T>();
    T* o = out.data<T>();
    const int64_t out_n = reduce ? 1 : n;
#pragma omp parallel for if (rows * n > cpu::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) row_fn(in + r * n, o + r * out_n, n);
  });
  Tensor result = transpose(out, d, -1);
  if (reduce && !keepdim) result = squeeze(result, d);
  return contiguous(result);
}

template <class T>
T row_max(const T* v, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
}  // namespace

Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  if (Backend* b = device_backend("logsumexp", x)) return b->logsumexp(x, dim, keepdim);
  return along_dim(x, dim, true, keepdim, "logsumexp", []<class T>(const T* v, T* o, int64_t n) {
    const T m = row_max(v, n);
    if (std::isinf(m)) {
      *o = m;
      return;
    }
    acc_t<T> s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
    *o = m + static_cast<T>(std::log(s));
  });
}

Tensor softmax(const Tensor& x, int64_t dim) {
  if (Backend* b = device_backend("softmax", x)) return b->softmax(x, dim);
  return along_dim(x, dim, false, false, "softmax", []<class T>(const T* v, T* o, int64_t n) {
    const T m = row_max(v, n);
    if (m == -std::numeric_limits<T>::infinity()) {  // fully masked row: all zeros, not NaN
      for (int64_t i = 0; i < n; ++i) o[i] = T(0);
      return;
    }
    acc_t<T> s = 0;
    for (int64_t i = 0; i < n; ++i) s += (o[i] = std::exp(v[i] - m));
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t i = 0; i < n; ++i) o[i] *= inv;
  });
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (Backend* b = device_backend("log_softmax", x)) return b->log_softmax(x, dim);
  return along_dim(x, dim, false, false, "log_softmax", []<class T>(const T* v, T* o, int64_t n) {
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
  });
}

Tensor norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
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
  if (Backend* b = device_backend("all_finite", x)) return b->all_finite(x);
  if (!is_inexact(x.dtype())) return true;
  const Tensor r = x.is_complex() ? contiguous(view_as_real(x)) : contiguous(x);
  bool ok = true;
  dispatch_floating(r.dtype(), "all_finite", [&]<class T>() {
    const T* p = r.data<T>();
    for (int64_t i = 0; i < r.numel() && ok; ++i) ok = std::isfinite(p[i]);
  });
  return ok;
}

}  // namespace phasor::ops
