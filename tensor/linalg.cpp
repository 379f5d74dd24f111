// The matmul front-end: shapes, promotion and broadcasting of batch dims, and
// the GEMM plan both backends run (tensor/backend.h). Transposes and
// conjugate-transposes become BLAS flags, never copies; an operand is copied
// only when its last two dims have no unit stride at all.
#include <atomic>
#include <climits>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor {

namespace {
std::atomic<int64_t> blas_limit{INT_MAX};
}  // namespace

int64_t blas_int_limit() { return blas_limit.load(std::memory_order_relaxed); }

void set_blas_int_limit_for_testing(int64_t limit) { blas_limit.store(limit > 0 ? std::min<int64_t>(limit, INT_MAX) : INT_MAX); }

int blas_int(int64_t v, const char* what) {
  PHASOR_CHECK(v >= 0 && v <= blas_int_limit(), "matmul: ", what, " ", v, " exceeds the 32-bit integers of the BLAS library (at most ",
               blas_int_limit(), ")");
  return static_cast<int>(v);
}

}  // namespace phasor

namespace phasor::ops {

namespace {

const char* op_name(MatOp op) { return op == MatOp::None ? "" : op == MatOp::Transpose ? "^T" : "^H"; }
BlasOp blas_op(MatOp op) { return op == MatOp::None ? BlasOp::N : op == MatOp::Transpose ? BlasOp::T : BlasOp::C; }

// Element offsets of each batch item of `t` for the broadcast batch shape.
std::vector<int64_t> batch_offsets(const Tensor& t, const Dims& batch) {
  const int lead = batch.size() - (t.dim() - 2);
  std::vector<int64_t> offsets(static_cast<size_t>(batch.numel()), 0);
  Dims index = Dims::filled(batch.size(), 0);
  for (auto& off : offsets) {
    int64_t o = 0;
    for (int i = lead; i < batch.size(); ++i) o += (t.size(i - lead) == 1 ? 0 : index[i]) * t.stride(i - lead);
    off = o;
    for (int i = batch.size() - 1; i >= 0; --i) {
      if (++index[i] < batch[i]) break;
      index[i] = 0;
    }
  }
  return offsets;
}

// op(X) as a GEMM operand. A row-major X goes in with op's own flag; X stored
// column-major is X^T row-major, so the flag flips; otherwise (or when a
// conjugate without transpose would be needed) X is copied to row-major.
GemmOperand gemm_operand(Tensor x, MatOp op, const Dims& batch) {
  auto row_major = [&] { return x.stride(-1) == 1 && (x.stride(-2) >= std::max<int64_t>(1, x.size(-1)) || x.size(-2) == 1); };
  auto col_major = [&] { return x.stride(-2) == 1 && (x.stride(-1) >= std::max<int64_t>(1, x.size(-2)) || x.size(-1) == 1); };
  GemmOperand g;
  if (row_major()) {
    g = {x, blas_op(op), x.size(-2) == 1 ? std::max<int64_t>(1, x.size(-1)) : x.stride(-2), {}};
  } else if (col_major() && op != MatOp::ConjTranspose) {
    g = {x, op == MatOp::None ? BlasOp::T : BlasOp::N, x.size(-1) == 1 ? std::max<int64_t>(1, x.size(-2)) : x.stride(-1), {}};
  } else {
    x = contiguous(x);
    g = {x, blas_op(op), std::max<int64_t>(1, x.size(-1)), {}};
  }
  // A leading dimension past the library's 32-bit ints (a view with a huge row
  // stride) would be narrowed: copy to row-major, whose rows the front-end has
  // already made short enough (matmul splits m, n and k).
  if (g.ld > blas_int_limit()) {
    x = contiguous(x);
    g = {x, blas_op(op), std::max<int64_t>(1, x.size(-1)), {}};
  }
  g.offsets = batch_offsets(g.t, batch);
  return g;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, MatOp op_a, MatOp op_b, std::optional<DType> out_dtype) {
  const Device device = op_device("matmul", a_in, {b_in});
  PHASOR_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "matmul: 0-d operands (shapes ", a_in.shape(), " and ", b_in.shape(), ")");
  PHASOR_CHECK(a_in.device() == b_in.device(), "matmul: devices differ (", a_in.device(), " and ", b_in.device(), ")");
  // 1-d operands act as a row (a) or a column (b) vector, as in NumPy.
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  Tensor a = a_vec ? unsqueeze(a_in, 0) : a_in;
  Tensor b = b_vec ? unsqueeze(b_in, 1) : b_in;
  const DType dt = promote(a.dtype(), b.dtype());
  PHASOR_CHECK(is_inexact(dt) || dt == DType::BFloat16, "matmul: not defined for dtype ", dt);
  // bfloat16 products accumulate in float32 and may keep that result (autocast's GEMMs).
  const DType out_dt = out_dtype.value_or(dt);
  PHASOR_CHECK(out_dt == dt || (dt == DType::BFloat16 && out_dt == DType::Float32), "matmul: the result of ", dt, " operands can be ",
               dt, dt == DType::BFloat16 ? " or float32" : "", ", not ", out_dt);
  a = to(a, dt);
  b = to(b, dt);
  // A real operand's conjugate transpose is its transpose. Said so here, every
  // backend's fast paths see a plain transpose (oneDNN has no conjugate flag).
  if (!is_complex(dt)) {
    if (op_a == MatOp::ConjTranspose) op_a = MatOp::Transpose;
    if (op_b == MatOp::ConjTranspose) op_b = MatOp::Transpose;
  }
  const bool ta = op_a != MatOp::None, tb = op_b != MatOp::None;
  const int64_t m = ta ? a.size(-1) : a.size(-2), k = ta ? a.size(-2) : a.size(-1);
  const int64_t kb = tb ? b.size(-1) : b.size(-2), n = tb ? b.size(-2) : b.size(-1);
  PHASOR_CHECK(k == kb, "matmul: inner dimensions differ: ", a_in.shape(), op_name(op_a), " x ", b_in.shape(), op_name(op_b),
               " (", k, " vs ", kb, ")");
  Dims a_batch, b_batch;
  for (int i = 0; i + 2 < a.dim(); ++i) a_batch.push_back(a.size(i));
  for (int i = 0; i + 2 < b.dim(); ++i) b_batch.push_back(b.size(i));
  const Dims batch = broadcast_shapes(a_batch, b_batch, "matmul");

  // A batch of a's times a single b: fold a's batch into M (one big GEMM); a
  // strided a (the real part of a complex gradient) is copied to fold.
  if (b_batch.empty() && !ta && a.dim() > 2) {
    Dims out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    Tensor flat = matmul(reshape(contiguous(a), fold_to_matrix(a.shape())), b, MatOp::None, op_b, out_dt);
    Tensor out = reshape(flat, out_shape);
    return b_vec ? squeeze(out, -1) : out;
  }

  // m, n or k past the library's 32-bit ints: products of pieces that fit
  // (rows of op(a), columns of op(b), or partial sums over k).
  const int64_t limit = blas_int_limit();
  if (m > limit || n > limit || k > limit) {
    const int64_t whole = m > limit ? m : n > limit ? n : k;
    std::vector<Tensor> parts;
    for (int64_t first = 0; first < whole; first += limit) {
      const int64_t len = std::min(limit, whole - first);
      // Which stored dim of a (b) holds op(a)'s rows or k (op(b)'s k or columns).
      const int64_t a_dim = m > limit ? (ta ? -1 : -2) : k > limit && n <= limit ? (ta ? -2 : -1) : 0;
      const int64_t b_dim = m > limit ? 0 : n > limit ? (tb ? -2 : -1) : (tb ? -1 : -2);
      const Tensor pa = a_dim == 0 ? a : narrow(a, a.dim() + a_dim, first, len);
      const Tensor pb = b_dim == 0 ? b : narrow(b, b.dim() + b_dim, first, len);
      // Partial sums over k in float32 where the result is bfloat16 (which has no add).
      const DType part_dt = m <= limit && n <= limit && out_dt == DType::BFloat16 ? DType::Float32 : out_dt;
      parts.push_back(matmul(pa, pb, op_a, op_b, part_dt));
    }
    Tensor out;
    if (m > limit || n > limit) {
      out = cat(parts, m > limit ? parts[0].dim() - 2 : parts[0].dim() - 1);
    } else {
      out = parts[0];
      for (size_t i = 1; i < parts.size(); ++i) binary_(Binary::Add, out, parts[i]);
      out = to(out, out_dt);
    }
    if (a_vec) out = squeeze(out, -2);
    if (b_vec) out = squeeze(out, -1);
    return out;
  }

  Dims out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = empty(out_shape, out_dt, device);
  if (out.numel() > 0) {
    if (k == 0) fill_(out, 0.0);
    else backend(device).gemm(out, GemmPlan{gemm_operand(a, op_a, batch), gemm_operand(b, op_b, batch), m, n, k});
  }
  if (a_vec) out = squeeze(out, -2);
  if (b_vec) out = squeeze(out, -1);
  return out;
}

Tensor matmul_real_part_conj(const Tensor& a, const Tensor& b) {
  PHASOR_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()), "matmul_real_part_conj: expects real tensors holding (re, im) pairs, got ",
               a.dtype(), " and ", b.dtype());
  PHASOR_CHECK(a.size(-1) % 2 == 0, "matmul_real_part_conj: last dim must hold (re, im) pairs, got shape ", a.shape());
  // Re(sum_j a_j conj(b_j)) = sum_j (a_re b_re + a_im b_im): an ordinary real a b^T.
  return matmul(a, b, MatOp::None, MatOp::Transpose);
}

}  // namespace phasor::ops
