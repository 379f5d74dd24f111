// The CUDA implementation of phasor::Backend. Each method checks its
// arguments as the CPU front-end does (same rules, same messages), decides
// dtypes and shapes, allocates the outputs on the GPU and calls a launcher of
// cuda/kernels.h. A 0-d CPU tensor given beside GPU tensors (a scalar such as
// the 1e-9 of `x + 1e-9`) is copied over first; any other mix of devices was
// already refused by device_backend().
#include <algorithm>
#include <limits>
#include <map>

#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "tensor/backend.h"
#include "tensor/loop.h"

namespace phasor::gpu {

Tensor matmul(const Tensor& a, const Tensor& b, MatOp op_a, MatOp op_b);  // cuda/gemm.cpp

namespace {

using ops::Binary;
using ops::Unary;

const Device kGpu = phasor::cuda(0);

Tensor dev(const Tensor& t) { return t.defined() && t.device().is_cpu() ? ops::to_device(t, kGpu) : t; }

// The geometry of `out` and its inputs (already broadcast to out's shape), coalesced.
template <int N>
Strided<N> geometry(const Tensor& out, std::initializer_list<Tensor> ins) {
  cpu::Loop<N> loop;
  loop.shape = out.shape();
  cpu::set_operand(loop, 0, out);
  size_t k = 1;
  for (const Tensor& t : ins) cpu::set_operand(loop, k++, t);
  cpu::coalesce(loop);
  Strided<N> g;
  g.ndim = loop.shape.size();
  g.numel = out.numel();
  for (int d = 0; d < g.ndim; ++d) {
    g.shape[d] = loop.shape[d];
    for (int i = 0; i < N; ++i) g.strides[i][d] = loop.strides[i][d];
  }
  for (int i = 0; i < N; ++i) g.base[i] = loop.base[i];
  return g;
}

// `t` converted to `dtype` and broadcast to `shape`.
Tensor operand(const Tensor& t, DType dtype, const Dims& shape) { return ops::expand(ops::to(dev(t), dtype), shape); }

int64_t rows_of(const Tensor& x) { return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1; }

std::vector<int64_t> host_indices(const Tensor& index) { return index.to_vector<int64_t>(); }

// ---- reductions: the plan of tensor/reduce.cpp ----
struct ReducePlan {
  Dims out_shape;
  int64_t rows = 1, reduced = 1;
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
      p.out_shape.push_back(x.size(i));
    }
  }
  return p;
}
Tensor kept_major(const Tensor& x, const ReducePlan& p) {
  Dims order;
  for (int i = 0; i < x.dim(); ++i)
    if (!p.is_reduced[i]) order.push_back(i);
  for (int i = 0; i < x.dim(); ++i)
    if (p.is_reduced[i]) order.push_back(i);
  return ops::contiguous(ops::permute(x, order));
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

// Ordered segments: positions grouped by target, each group in increasing position
// order (the CPU kernels' summation order).
struct Segments {
  std::vector<int64_t> target, start, list;
};
Segments group_by_target(const std::vector<int64_t>& targets) {
  std::map<int64_t, std::vector<int64_t>> groups;
  for (size_t i = 0; i < targets.size(); ++i) groups[targets[i]].push_back(static_cast<int64_t>(i));
  Segments s;
  s.start.push_back(0);
  for (auto& [t, positions] : groups) {
    s.target.push_back(t);
    s.list.insert(s.list.end(), positions.begin(), positions.end());
    s.start.push_back(static_cast<int64_t>(s.list.size()));
  }
  return s;
}
struct DeviceSegments {
  Tensor target, start, list;
  explicit DeviceSegments(const Segments& s)
      : target(ops::to_device(from_vector(s.target), kGpu)),
        start(ops::to_device(from_vector(s.start), kGpu)),
        list(ops::to_device(from_vector(s.list), kGpu)) {}
};

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }

  // ---------------------------------------------------------------- copies

  void copy_(const Tensor& dst, const Tensor& src) override {
    const Tensor s = ops::expand(dev(src), dst.shape());
    launch_copy(dst.dtype(), s.dtype(), geometry<2>(dst, {s}));
    dst.storage()->bump_version();
  }

  void fill_(const Tensor& dst, c128 value) override {
    launch_fill(dst.dtype(), value, geometry<1>(dst, {}));
    dst.storage()->bump_version();
  }

  // ---------------------------------------------------------------- elementwise

  Tensor unary(Unary op, const Tensor& x_in) override {
    const Tensor x = dev(x_in);
    const DType in = x.dtype();
    PHASOR_CHECK(in != DType::Bool, ops::name(op), ": not defined for bool tensors");
    PHASOR_CHECK(!(is_complex(in) && (op == Unary::Gelu || op == Unary::GeluDerivative)), ops::name(op), ": not defined for complex dtype ", in);
    const bool keeps_int = op == Unary::Neg || op == Unary::Square || op == Unary::Conj || op == Unary::Sign || op == Unary::Abs;
    const DType work = (in == DType::Int64 && !keeps_int) ? DType::Float32 : in;
    const Tensor src = ops::to(x, work);
    const DType out_dtype = (op == Unary::Abs || op == Unary::Angle) ? real_dtype(work) : work;
    Tensor out = empty(x.shape(), out_dtype, kGpu);
    launch_unary(op, work, out_dtype, geometry<2>(out, {src}));
    return out;
  }

  Tensor binary(Binary op, const Tensor& a, const Tensor& b) override {
    const Dims shape = broadcast_shapes(a.shape(), b.shape(), ops::name(op));
    DType dt = promote(a.dtype(), b.dtype());
    if (dt == DType::Bool) dt = DType::Int64;
    if ((op == Binary::Div || op == Binary::Atan2) && !is_inexact(dt)) dt = DType::Float32;
    const bool real_only = op == Binary::Maximum || op == Binary::Minimum || op == Binary::Atan2;
    PHASOR_CHECK(!(real_only && is_complex(dt)), ops::name(op), ": not defined for complex dtype ", dt, " (inputs ", a.dtype(), " and ",
                 b.dtype(), ")");
    Tensor out = empty(shape, dt, kGpu);
    const Tensor x = operand(a, dt, shape), y = operand(b, dt, shape);
    launch_binary(op, dt, geometry<3>(out, {x, y}));
    return out;
  }

  void binary_(Binary op, const Tensor& dst, const Tensor& src) override {
    PHASOR_CHECK(promote(dst.dtype(), src.dtype()) == dst.dtype(), ops::name(op), "_: result dtype ", promote(dst.dtype(), src.dtype()),
                 " cannot be stored in place in a ", dst.dtype(), " tensor");
    PHASOR_CHECK(dst.dtype() != DType::Bool, ops::name(op), "_: not defined for bool tensors");
    const Tensor y = operand(src, dst.dtype(), dst.shape());
    launch_binary(op, dst.dtype(), geometry<3>(dst, {dst, y}));
    dst.storage()->bump_version();
  }

  void axpy_(const Tensor& dst, const Tensor& src, double alpha) override {
    PHASOR_CHECK(is_inexact(dst.dtype()), "axpy_: not defined for dtype ", dst.dtype());
    const Tensor y = operand(src, dst.dtype(), dst.shape());
    launch_axpy(dst.dtype(), alpha, geometry<2>(dst, {y}));
    dst.storage()->bump_version();
  }

  Tensor compare(ops::Compare op, const Tensor& a, const Tensor& b) override {
    const Dims shape = broadcast_shapes(a.shape(), b.shape(), "compare");
    const DType dt = promote(a.dtype(), b.dtype());
    PHASOR_CHECK(!is_complex(dt) || op == ops::Compare::Eq || op == ops::Compare::Ne,
                 "compare: ordering comparisons are not defined for complex dtype ", dt);
    Tensor out = empty(shape, DType::Bool, kGpu);
    const Tensor x = operand(a, dt, shape), y = operand(b, dt, shape);
    launch_compare(op, dt, geometry<3>(out, {x, y}));
    return out;
  }

  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) override {
    PHASOR_CHECK(cond.dtype() == DType::Bool, "where: condition must be bool, got ", cond.dtype());
    const Dims shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
    const DType dt = promote(a.dtype(), b.dtype());
    Tensor out = empty(shape, dt, kGpu);
    const Tensor c = ops::expand(dev(cond), shape), x = operand(a, dt, shape), y = operand(b, dt, shape);
    launch_where(dt, geometry<4>(out, {c, x, y}));
    return out;
  }

  Tensor polar(const Tensor& abs, const Tensor& angle) override { return from_parts(abs, angle, true, "polar"); }
  Tensor complex(const Tensor& re, const Tensor& im) override { return from_parts(re, im, false, "complex"); }

  Tensor pow_scalar(const Tensor& x_in, double p) override {
    const Tensor x = dev(x_in);
    const DType dt = is_inexact(x.dtype()) ? x.dtype() : DType::Float32;
    Tensor out = empty(x.shape(), dt, kGpu);
    launch_pow_scalar(dt, p, geometry<2>(out, {ops::to(x, dt)}));
    return out;
  }

  // ---------------------------------------------------------------- reductions

  Tensor sum(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) override {
    const Tensor x = dev(x_in);
    const ReducePlan p = plan_reduction(x, dims, keepdim, "sum");
    const DType dt = x.dtype() == DType::Bool ? DType::Int64 : x.dtype();
    Tensor out = empty(p.out_shape, dt, kGpu);
    const Tensor src = ops::to(x, dt);
    if (reduced_dims_lead(src, p)) {
      launch_sum_columns(dt, src.raw_data(), out.raw_data(), p.reduced, p.rows);
    } else {
      const Tensor c = kept_major(src, p);
      launch_sum_rows(dt, c.raw_data(), out.raw_data(), p.rows, p.reduced);
    }
    return out;
  }

  ops::ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) override { return extreme(x, dim, keepdim, true, "max"); }
  ops::ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) override { return extreme(x, dim, keepdim, false, "min"); }

  Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) override {
    return along_dim(x, dim, true, keepdim, RowOp::LogSumExp, "logsumexp");
  }
  Tensor softmax(const Tensor& x, int64_t dim) override { return along_dim(x, dim, false, false, RowOp::Softmax, "softmax"); }
  Tensor log_softmax(const Tensor& x, int64_t dim) override { return along_dim(x, dim, false, false, RowOp::LogSoftmax, "log_softmax"); }

  bool all_finite(const Tensor& x_in) override {
    const Tensor x = dev(x_in);
    if (!is_inexact(x.dtype())) return true;
    const Tensor r = ops::contiguous(x.is_complex() ? ops::view_as_real(x) : x);
    return gpu::all_finite(r.dtype(), r.raw_data(), r.numel());
  }

  // ---------------------------------------------------------------- linear algebra and indexing

  Tensor matmul(const Tensor& a, const Tensor& b, MatOp op_a, MatOp op_b) override { return gpu::matmul(dev(a), dev(b), op_a, op_b); }

  Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index_in) override {
    const Tensor x = dev(x_in), index = dev(index_in);
    PHASOR_CHECK(index.dtype() == DType::Int64, "index_select: index must be int64, got ", index.dtype());
    PHASOR_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-d, got shape ", index.shape());
    const int d = wrap_dim(dim, x.dim(), "index_select");
    const Tensor src = ops::contiguous(x);
    const Tensor idx = ops::contiguous(ops::reshape(index, Dims{-1}));
    int64_t outer = 1, inner = 1;
    const int64_t n = x.dim() ? x.size(d) : 1;
    for (int i = 0; i < d; ++i) outer *= x.size(i);
    for (int i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
    for (int64_t k : host_indices(idx))
      PHASOR_CHECK(k >= 0 && k < n, "index_select: index ", k, " out of range for dim ", d, " of size ", n);
    Dims shape = x.shape();
    if (x.dim()) shape[d] = idx.numel();
    Tensor out = empty(shape, x.dtype(), kGpu);
    launch_index_select(src.raw_data(), idx.data<int64_t>(), out.raw_data(), outer, n, idx.numel(),
                        inner * static_cast<int64_t>(itemsize(x.dtype())));
    if (index.dim() == 0) return ops::squeeze(out, d);
    return out;
  }

  Tensor index_add(const Tensor& x_in, int64_t dim, const Tensor& index_in, const Tensor& src_in) override {
    const Tensor x = dev(x_in), index = dev(index_in), src = dev(src_in);
    PHASOR_CHECK(index.dtype() == DType::Int64, "index_add: index must be int64, got ", index.dtype());
    const int d = wrap_dim(dim, x.dim(), "index_add");
    const Tensor idx = ops::contiguous(ops::reshape(index, Dims{-1}));
    Dims expected = x.shape();
    expected[d] = idx.numel();
    PHASOR_CHECK(src.shape() == expected, "index_add: source shape ", src.shape(), " does not match ", expected, " (x ", x.shape(), ", ",
                 idx.numel(), " indices along dim ", d, ")");
    Tensor out = ops::clone(x);
    const Tensor s = ops::contiguous(ops::to(src, x.dtype()));
    const int64_t n = x.size(d), count = idx.numel();
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; ++i) outer *= x.size(i);
    for (int i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
    const std::vector<int64_t> rows = host_indices(idx);
    for (int64_t k : rows) PHASOR_CHECK(k >= 0 && k < n, "index_add: index ", k, " out of range for dim ", d, " of size ", n);
    const Segments seg = group_by_target(rows);
    const DeviceSegments ds(seg);
    launch_segment_add(x.dtype(), out.raw_data(), s.raw_data(), ds.target.data<int64_t>(), ds.start.data<int64_t>(), ds.list.data<int64_t>(),
                       static_cast<int64_t>(seg.target.size()), outer, inner, n, count);
    return out;
  }

  Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index_in) override {
    const Tensor x = dev(x_in), index = dev(index_in);
    PHASOR_CHECK(index.dtype() == DType::Int64, "gather: index must be int64, got ", index.dtype());
    const int d = wrap_dim(dim, x.dim(), "gather");
    PHASOR_CHECK(index.dim() == x.dim(), "gather: index rank ", index.dim(), " differs from input rank ", x.dim());
    for (int i = 0; i < x.dim(); ++i)
      PHASOR_CHECK(i == d || index.size(i) <= x.size(i), "gather: index shape ", index.shape(), " exceeds input shape ", x.shape(), " at dim ",
                   i);
    const Tensor xv = ops::contiguous(x), ic = ops::contiguous(index);
    const int64_t n = x.dim() ? x.size(d) : 1;
    for (int64_t k : host_indices(ic)) PHASOR_CHECK(k >= 0 && k < n, "gather: index ", k, " out of range for dim ", d, " of size ", n);
    Tensor out = empty(index.shape(), x.dtype(), kGpu);
    const Dims xs = contiguous_strides(x.shape());
    launch_gather(static_cast<int64_t>(itemsize(x.dtype())), xv.raw_data(), ic.data<int64_t>(), out.raw_data(), index.dim(),
                  index.shape().begin(), xs.begin(), d, index.numel());
    return out;
  }

  Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index_in, const Tensor& src_in) override {
    const Tensor index = dev(index_in), src = dev(src_in);
    PHASOR_CHECK(index.dtype() == DType::Int64, "scatter_add: index must be int64, got ", index.dtype());
    const int d = wrap_dim(dim, shape.size(), "scatter_add");
    PHASOR_CHECK(index.shape() == src.shape(), "scatter_add: index shape ", index.shape(), " differs from source shape ", src.shape());
    Tensor out = zeros(shape, src.dtype(), kGpu);
    const Dims os = contiguous_strides(shape);
    const Dims is = index.shape();
    const Tensor sc = ops::contiguous(src);
    const std::vector<int64_t> idx = host_indices(index);
    // The flat output offset of every source element, in the CPU kernel's order.
    std::vector<int64_t> targets(idx.size());
    Dims pos = Dims::filled(is.size(), 0);
    for (size_t e = 0; e < idx.size(); ++e) {
      const int64_t k = idx[e];
      PHASOR_CHECK(k >= 0 && k < shape[d], "scatter_add: index ", k, " out of range for dim ", d, " of size ", shape[d]);
      int64_t off = 0;
      for (int i = 0; i < is.size(); ++i) off += (i == d ? k : pos[i]) * os[i];
      targets[e] = off;
      for (int i = is.size() - 1; i >= 0; --i) {
        if (++pos[i] < is[i]) break;
        pos[i] = 0;
      }
    }
    const Segments seg = group_by_target(targets);
    const DeviceSegments ds(seg);
    launch_segment_add(src.dtype(), out.raw_data(), sc.raw_data(), ds.target.data<int64_t>(), ds.start.data<int64_t>(), ds.list.data<int64_t>(),
                       static_cast<int64_t>(seg.target.size()), 1, 1, out.numel(), sc.numel());
    return out;
  }

  // ---------------------------------------------------------------- random

  void fill_uniform_(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first) override {
    fill_random(dst, false, low, high, seed, first);
  }
  void fill_normal_(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first) override {
    fill_random(dst, true, mean, std, seed, first);
  }

  // ---------------------------------------------------------------- fused

  ops::RmsNormResult rms_norm(const Tensor& x_in, const Tensor& weight_in, double eps) override {
    const Tensor x_dev = dev(x_in), w_dev = dev(weight_in);
    PHASOR_CHECK(x_dev.dim() >= 1 && w_dev.dim() == 1 && w_dev.size(0) == x_dev.size(-1), "rms_norm: weight shape ", w_dev.shape(),
                 " does not match the last dim of input ", x_dev.shape());
    PHASOR_CHECK(x_dev.dtype() == w_dev.dtype(), "rms_norm: input dtype ", x_dev.dtype(), " differs from weight dtype ", w_dev.dtype());
    PHASOR_CHECK(is_floating(x_dev.dtype()), "rms_norm: not defined for dtype ", x_dev.dtype(), " (real floating dtypes only)");
    const Tensor x = ops::contiguous(x_dev), w = ops::contiguous(w_dev);
    const int64_t d = x.size(-1), rows = rows_of(x);
    Dims row_shape = x.shape();
    row_shape.erase(row_shape.size() - 1);
    ops::RmsNormResult r{empty(x.shape(), x.dtype(), kGpu), empty(row_shape, x.dtype(), kGpu)};
    launch_rms_norm(x.dtype(), x.raw_data(), w.raw_data(), r.y.raw_data(), r.inv_rms.raw_data(), rows, d, eps);
    return r;
  }

  ops::RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x_in, const Tensor& weight, const Tensor& inv_rms) override {
    const Tensor g = ops::contiguous(dev(grad)), x = ops::contiguous(dev(x_in)), w = ops::contiguous(dev(weight)),
                 r = ops::contiguous(dev(inv_rms));
    PHASOR_CHECK(is_floating(x.dtype()), "rms_norm_backward: not defined for dtype ", x.dtype(), " (real floating dtypes only)");
    const int64_t d = x.size(-1), rows = rows_of(x);
    ops::RmsNormGrads out{empty(x.shape(), x.dtype(), kGpu), empty(w.shape(), w.dtype(), kGpu)};
    launch_rms_norm_backward(x.dtype(), g.raw_data(), x.raw_data(), w.raw_data(), r.raw_data(), out.dx.raw_data(), out.dweight.raw_data(), rows,
                             d);
    return out;
  }

  ops::CrossEntropyResult cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index, bool mean) override {
    PHASOR_CHECK(logits_in.dim() == 2, "cross_entropy: logits must be [rows, classes], got ", logits_in.shape());
    PHASOR_CHECK(targets_in.dtype() == DType::Int64 && targets_in.dim() == 1 && targets_in.size(0) == logits_in.size(0),
                 "cross_entropy: targets must be int64 [", logits_in.size(0), "], got ", targets_in.dtype(), " ", targets_in.shape());
    PHASOR_CHECK(is_floating(logits_in.dtype()), "cross_entropy: not defined for dtype ", logits_in.dtype(), " (real floating dtypes only)");
    const Tensor logits = ops::contiguous(dev(logits_in)), targets = ops::contiguous(dev(targets_in));
    const int64_t rows = logits.size(0), v = logits.size(1);
    int64_t count = 0;
    const std::vector<int64_t> t = host_indices(targets);
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == ignore_index) continue;
      PHASOR_CHECK(t[i] >= 0 && t[i] < v, "cross_entropy: target ", t[i], " at row ", i, " is outside [0, ", v, ")");
      ++count;
    }
    ops::CrossEntropyResult r{empty({}, logits.dtype(), kGpu), empty({rows}, logits.dtype(), kGpu), count};
    const double denom = mean ? static_cast<double>(std::max<int64_t>(count, 1)) : 1.0;
    launch_cross_entropy(logits.dtype(), logits.raw_data(), targets.data<int64_t>(), r.logsumexp.raw_data(), r.loss.raw_data(), rows, v,
                         ignore_index, denom);
    return r;
  }

  Tensor cross_entropy_backward(double grad, const Tensor& logits_in, const Tensor& targets_in, const Tensor& logsumexp, int64_t ignore_index,
                                double scale) override {
    const Tensor logits = ops::contiguous(dev(logits_in)), targets = ops::contiguous(dev(targets_in)), lse = ops::contiguous(dev(logsumexp));
    PHASOR_CHECK(is_floating(logits.dtype()), "cross_entropy_backward: not defined for dtype ", logits.dtype());
    Tensor d = empty(logits.shape(), logits.dtype(), kGpu);
    launch_cross_entropy_backward(logits.dtype(), logits.raw_data(), targets.data<int64_t>(), lse.raw_data(), d.raw_data(), logits.size(0),
                                  logits.size(1), ignore_index, grad * scale);
    return d;
  }

  Tensor rotate(const Tensor& z_in, const Tensor& table_in, bool conjugate_table) override {
    PHASOR_CHECK(z_in.is_complex() && z_in.dim() == 4, "rotate: expected complex [B, N, H, P], got ", z_in.dtype(), " ", z_in.shape());
    PHASOR_CHECK(table_in.dim() == 2 && table_in.size(0) == z_in.size(1) && table_in.size(1) == z_in.size(3), "rotate: table shape ",
                 table_in.shape(), " does not match [N, P] of ", z_in.shape());
    const Tensor z = ops::contiguous(dev(z_in)), table = ops::contiguous(ops::to(dev(table_in), z_in.dtype()));
    Tensor out = empty(z.shape(), z.dtype(), kGpu);
    launch_rotate(z.dtype(), z.raw_data(), table.raw_data(), out.raw_data(), z.size(0), z.size(1), z.size(2), z.size(3), conjugate_table);
    return out;
  }

  Tensor cmha_rotate(const Tensor& z_in, const ops::CmhaParams& p) override {
    check_cmha(z_in, p);
    const Tensor z = ops::contiguous(dev(z_in));
    const Arrays a = arrays(z, p);
    Tensor out = empty(z.shape(), z.dtype(), kGpu);
    launch_cmha_rotate(z.dtype(), z.raw_data(), out.raw_data(), cmha_args(z, a, p));
    return out;
  }

  ops::CmhaGrads cmha_rotate_backward(const Tensor& grad, const Tensor& z_in, const ops::CmhaParams& p) override {
    check_cmha(z_in, p);
    const Tensor z = ops::contiguous(dev(z_in)), g = ops::contiguous(ops::to(dev(grad), z_in.dtype()));
    const Arrays a = arrays(z, p);
    const int64_t h = z.size(2), pairs = z.size(3);
    const DType rt = real_dtype(z.dtype());
    ops::CmhaGrads out{empty(z.shape(), z.dtype(), kGpu), empty({h, pairs}, rt, kGpu),
                       p.phase_bias.defined() ? empty({h, pairs}, rt, kGpu) : Tensor(), empty({h}, rt, kGpu)};
    launch_cmha_rotate_backward(z.dtype(), g.raw_data(), z.raw_data(), out.dz.raw_data(), out.ddelta.raw_data(),
                                out.dphase_bias.defined() ? out.dphase_bias.raw_data() : nullptr, out.dbeta.raw_data(), cmha_args(z, a, p));
    return out;
  }

  Tensor attention_softmax(const Tensor& scores_in, double scale, int64_t offset, const Tensor& slopes_in) override {
    PHASOR_CHECK(scores_in.dim() == 4, "attention_softmax: expected scores [B, H, Nq, Nk], got ", scores_in.shape());
    PHASOR_CHECK(is_floating(scores_in.dtype()), "attention_softmax: not defined for dtype ", scores_in.dtype(), " (real floating dtypes only)");
    const Tensor scores = ops::contiguous(dev(scores_in));
    const int64_t b = scores.size(0), h = scores.size(1), nq = scores.size(2), nk = scores.size(3);
    PHASOR_CHECK(!slopes_in.defined() || slopes_in.shape() == Dims({h}), "attention_softmax: slopes shape ", slopes_in.shape(), " is not [",
                 h, "]");
    const Tensor slopes = slopes_in.defined() ? ops::contiguous(ops::to(dev(slopes_in), scores.dtype())) : Tensor();
    Tensor probs = empty(scores.shape(), scores.dtype(), kGpu);
    launch_attention_softmax(scores.dtype(), scores.raw_data(), slopes.defined() ? slopes.raw_data() : nullptr, probs.raw_data(), b * h, h,
                             nq, nk, scale, offset);
    return probs;
  }

  Tensor attention_softmax_backward(const Tensor& grad_in, const Tensor& probs_in, double scale) override {
    const Tensor grad = ops::contiguous(dev(grad_in)), probs = ops::contiguous(dev(probs_in));
    PHASOR_CHECK(grad.shape() == probs.shape(), "attention_softmax_backward: gradient shape ", grad.shape(), " differs from ", probs.shape());
    PHASOR_CHECK(is_floating(probs.dtype()), "attention_softmax_backward: not defined for dtype ", probs.dtype());
    const int64_t nk = probs.dim() ? probs.size(-1) : 1, rows = probs.numel() / std::max<int64_t>(nk, 1);
    Tensor d = empty(probs.shape(), probs.dtype(), kGpu);
    launch_attention_softmax_backward(probs.dtype(), grad.raw_data(), probs.raw_data(), d.raw_data(), rows, nk, scale);
    return d;
  }

  void adamw_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, double lr, double weight_decay,
                   double beta1, double beta2, double eps, double bias_correction1, double bias_correction2_sqrt) override {
    const Tensor g = ops::contiguous(ops::to(dev(grad), param.dtype()));
    PHASOR_CHECK(param.is_contiguous() && exp_avg.is_contiguous() && exp_avg_sq.is_contiguous(),
                 "AdamW: parameter and optimizer state must be contiguous");
    PHASOR_CHECK(g.numel() == param.numel() && exp_avg.numel() == param.numel() && exp_avg_sq.numel() == param.numel(),
                 "AdamW: gradient or state of shape ", g.shape(), " does not match parameter shape ", param.shape());
    launch_adamw(param.dtype(), param.raw_data(), g.raw_data(), exp_avg.raw_data(), exp_avg_sq.raw_data(), param.numel(), lr, weight_decay,
                 beta1, beta2, eps, bias_correction1, bias_correction2_sqrt);
    param.storage()->bump_version();
  }

 private:
  Tensor from_parts(const Tensor& a, const Tensor& b, bool is_polar, const char* op) {
    const Dims shape = broadcast_shapes(a.shape(), b.shape(), op);
    const DType rt = promote(a.dtype(), b.dtype());
    PHASOR_CHECK(is_floating(rt), op, ": expected real floating inputs, got ", a.dtype(), " and ", b.dtype());
    Tensor out = empty(shape, complex_dtype(rt), kGpu);
    const Strided<3> g = geometry<3>(out, {operand(a, rt, shape), operand(b, rt, shape)});
    if (is_polar) launch_polar(rt, g);
    else launch_complex(rt, g);
    return out;
  }

  ops::ValuesIndices extreme(const Tensor& x_in, int64_t dim, bool keepdim, bool want_max, const char* op) {
    const Tensor x = dev(x_in);
    PHASOR_CHECK(!x.is_complex(), op, ": not defined for complex dtype ", x.dtype());
    const int d = wrap_dim(dim, x.dim(), op);
    const ReducePlan p = plan_reduction(x, {d}, keepdim, op);
    PHASOR_CHECK(p.reduced > 0, op, ": cannot reduce over an empty dim ", d, " of shape ", x.shape());
    ops::ValuesIndices r{empty(p.out_shape, x.dtype(), kGpu), empty(p.out_shape, DType::Int64, kGpu)};
    const Tensor c = kept_major(x, p);
    launch_extreme(x.dtype(), want_max, c.raw_data(), r.values.raw_data(), r.indices.data<int64_t>(), p.rows, p.reduced);
    return r;
  }

  Tensor along_dim(const Tensor& x_in, int64_t dim, bool reduce, bool keepdim, RowOp op, const char* name) {
    const Tensor x = dev(x_in);
    const int d = wrap_dim(dim, x.dim(), name);
    PHASOR_CHECK(is_floating(x.dtype()), name, ": expected a real floating tensor, got ", x.dtype());
    const Tensor moved = ops::contiguous(ops::transpose(x, d, -1));
    const int64_t n = x.dim() ? x.size(d) : 1;
    const int64_t rows = n ? moved.numel() / n : 0;
    Dims moved_shape = moved.shape();
    if (reduce && moved_shape.size()) moved_shape[moved_shape.size() - 1] = 1;
    Tensor out = empty(moved_shape, x.dtype(), kGpu);
    if (n == 0 && reduce) {
      ops::fill_(out, -std::numeric_limits<double>::infinity());
    } else {
      launch_row_softmax(x.dtype(), op, moved.raw_data(), out.raw_data(), rows, n);
    }
    Tensor result = ops::transpose(out, d, -1);
    if (reduce && !keepdim) result = ops::squeeze(result, d);
    return ops::contiguous(result);
  }

  void fill_random(const Tensor& dst, bool normal, double a, double b, uint64_t seed, uint64_t first) {
    const Tensor flat = dst.is_complex() ? ops::view_as_real(dst) : dst;
    PHASOR_CHECK(is_floating(flat.dtype()), normal ? "normal" : "uniform", ": expected a floating or complex dtype, got ", dst.dtype());
    launch_random(flat.dtype(), normal, a, b, seed, first, geometry<1>(flat, {}));
    dst.storage()->bump_version();
  }

  static void check_cmha(const Tensor& z, const ops::CmhaParams& p) {
    PHASOR_CHECK(z.is_complex() && z.dim() == 4, "cmha_rotate: expected complex [B, N, H, P], got ", z.dtype(), " ", z.shape());
    const int64_t h = z.size(2), pairs = z.size(3);
    PHASOR_CHECK(p.delta.shape() == Dims({h, pairs}), "cmha_rotate: delta shape ", p.delta.shape(), " is not [H, P] = [", h, ", ", pairs, "]");
    PHASOR_CHECK(!p.phase_bias.defined() || p.phase_bias.shape() == Dims({h, pairs}), "cmha_rotate: phase_bias shape ", p.phase_bias.shape(),
                 " is not [", h, ", ", pairs, "]");
    PHASOR_CHECK(p.beta.shape() == Dims({h}), "cmha_rotate: beta shape ", p.beta.shape(), " is not [", h, "]");
  }

  struct Arrays {
    Tensor delta, bias, beta;
  };
  static Arrays arrays(const Tensor& z, const ops::CmhaParams& p) {
    const DType rt = real_dtype(z.dtype());
    return {ops::contiguous(ops::to(dev(p.delta), rt)), p.phase_bias.defined() ? ops::contiguous(ops::to(dev(p.phase_bias), rt)) : Tensor(),
            ops::contiguous(ops::to(dev(p.beta), rt))};
  }
  static CmhaArgs cmha_args(const Tensor& z, const Arrays& a, const ops::CmhaParams& p) {
    CmhaArgs args;
    args.delta = a.delta.raw_data();
    args.bias = a.bias.defined() ? a.bias.raw_data() : nullptr;
    args.beta = a.beta.raw_data();
    args.b = z.size(0);
    args.n = z.size(1);
    args.h = z.size(2);
    args.p = z.size(3);
    args.offset = p.offset;
    args.rope_base = p.rope_base;
    return args;
  }
};

}  // namespace

Backend* backend_instance() {
  static CudaBackend* backend = new CudaBackend();
  return backend;
}

}  // namespace phasor::gpu
