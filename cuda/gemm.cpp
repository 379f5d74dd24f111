// Batched matmul on cuBLAS. Phasor's matrices are row-major; cuBLAS's are
// column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, which
// is the same three stored arrays with the same flags: a row-major operand
// maps to CUBLAS_OP_N / CUBLAS_OP_T / CUBLAS_OP_C for MatOp None / Transpose /
// ConjTranspose. Transposes are never materialised (CPU: tensor/linalg.cpp,
// which makes the same choices with CBLAS flags).
#include <cublas_v2.h>

#include <climits>
#include <vector>

#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "tensor/ops.h"

namespace phasor::gpu {

namespace {

struct Operand {
  Tensor t;
  cublasOperation_t op;
  int64_t ld;
};

cublasOperation_t flag(MatOp op) { return op == MatOp::None ? CUBLAS_OP_N : op == MatOp::Transpose ? CUBLAS_OP_T : CUBLAS_OP_C; }

// As tensor/linalg.cpp's as_gemm_operand: use the strides as they are when one of
// the last two dims has unit stride; copy only when neither has (or a conjugate
// without transpose would be needed).
Operand as_operand(Tensor x, MatOp op) {
  auto row_major = [&] { return x.stride(-1) == 1 && (x.stride(-2) >= std::max<int64_t>(1, x.size(-1)) || x.size(-2) == 1); };
  auto col_major = [&] { return x.stride(-2) == 1 && (x.stride(-1) >= std::max<int64_t>(1, x.size(-2)) || x.size(-1) == 1); };
  if (row_major()) return {x, flag(op), x.size(-2) == 1 ? std::max<int64_t>(1, x.size(-1)) : x.stride(-2)};
  if (col_major() && op != MatOp::ConjTranspose)
    return {x, op == MatOp::None ? CUBLAS_OP_T : CUBLAS_OP_N, x.size(-1) == 1 ? std::max<int64_t>(1, x.size(-2)) : x.stride(-1)};
  x = ops::contiguous(x);
  return {x, flag(op), std::max<int64_t>(1, x.size(-1))};
}

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

// The common stride of an arithmetic progression of offsets, or -1.
int64_t uniform_stride(const std::vector<int64_t>& off) {
  if (off.size() < 2) return 0;
  const int64_t s = off[1] - off[0];
  if (s < 0) return -1;
  for (size_t i = 1; i < off.size(); ++i)
    if (off[i] - off[i - 1] != s) return -1;
  return s;
}

void check_blas(cublasStatus_t s, const char* what) {
  PHASOR_CHECK(s == CUBLAS_STATUS_SUCCESS, "matmul: cuBLAS ", what, " failed: ", cublasGetStatusString(s));
}

template <class T>
struct Blas;
template <>
struct Blas<float> {
  using D = float;
  static constexpr auto plain = cublasSgemm;
  static constexpr auto strided = cublasSgemmStridedBatched;
  static constexpr auto batched = cublasSgemmBatched;
  static D one() { return 1.0f; }
  static D zero() { return 0.0f; }
};
template <>
struct Blas<double> {
  using D = double;
  static constexpr auto plain = cublasDgemm;
  static constexpr auto strided = cublasDgemmStridedBatched;
  static constexpr auto batched = cublasDgemmBatched;
  static D one() { return 1.0; }
  static D zero() { return 0.0; }
};
template <>
struct Blas<c64> {
  using D = cuComplex;
  static constexpr auto plain = cublasCgemm;
  static constexpr auto strided = cublasCgemmStridedBatched;
  static constexpr auto batched = cublasCgemmBatched;
  static D one() { return {1.0f, 0.0f}; }
  static D zero() { return {0.0f, 0.0f}; }
};
template <>
struct Blas<c128> {
  using D = cuDoubleComplex;
  static constexpr auto plain = cublasZgemm;
  static constexpr auto strided = cublasZgemmStridedBatched;
  static constexpr auto batched = cublasZgemmBatched;
  static D one() { return {1.0, 0.0}; }
  static D zero() { return {0.0, 0.0}; }
};

int as_int(int64_t v, const char* what) {
  PHASOR_CHECK(v >= 0 && v <= INT_MAX, "matmul: ", what, " ", v, " exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(v);
}

// C [batch, m, n] row-major = op(A) op(B), as C^T = op(B)^T op(A)^T in cuBLAS's column-major terms.
template <class T>
void gemm(const Operand& a, const Operand& b, Tensor& out, int64_t m, int64_t n, int64_t k, const std::vector<int64_t>& ao,
          const std::vector<int64_t>& bo) {
  using B = Blas<T>;
  using D = typename B::D;
  cublasHandle_t h = cublas();
  // TF32 (opt-in) covers float32 and complex64; set every time, the handle is shared.
  check_blas(cublasSetMathMode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const D one = B::one(), zero = B::zero();
  const D* pa = reinterpret_cast<const D*>(a.t.raw_data());
  const D* pb = reinterpret_cast<const D*>(b.t.raw_data());
  D* pc = reinterpret_cast<D*>(out.raw_data());
  const int count = as_int(static_cast<int64_t>(ao.size()), "batch count");
  const int im = as_int(m, "m"), in = as_int(n, "n"), ik = as_int(k, "k");
  const int lda = as_int(a.ld, "lda"), ldb = as_int(b.ld, "ldb");
  const int64_t sa = uniform_stride(ao), sb = uniform_stride(bo);
  if (count == 1) {  // cuBLAS picks its kernels differently for a batch of one
    check_blas(B::plain(h, b.op, a.op, in, im, ik, &one, pb + bo[0], ldb, pa + ao[0], lda, &zero, pc, in), "gemm");
    return;
  }
  if (sa >= 0 && sb >= 0) {
    check_blas(B::strided(h, b.op, a.op, in, im, ik, &one, pb + bo[0], ldb, sb, pa + ao[0], lda, sa, &zero, pc, in, m * n, count),
               "gemmStridedBatched");
    return;
  }
  // Batch dims that no single stride describes (e.g. [B, H] of a permuted [B, N, H, d]): pointer arrays.
  std::vector<const D*> ha(ao.size()), hb(bo.size());
  std::vector<D*> hc(ao.size());
  for (size_t i = 0; i < ao.size(); ++i) {
    ha[i] = pa + ao[i];
    hb[i] = pb + bo[i];
    hc[i] = pc + static_cast<int64_t>(i) * m * n;
  }
  Buffer da(ha.size() * sizeof(void*)), db(hb.size() * sizeof(void*)), dc(hc.size() * sizeof(void*));
  copy_to_device(da.get(), ha.data(), ha.size() * sizeof(void*));
  copy_to_device(db.get(), hb.data(), hb.size() * sizeof(void*));
  copy_to_device(dc.get(), hc.data(), hc.size() * sizeof(void*));
  check_blas(B::batched(h, b.op, a.op, in, im, ik, &one, db.as<const D*>(), ldb, da.as<const D*>(), lda, &zero, dc.as<D*>(), in, count),
             "gemmBatched");
}

const char* op_name(MatOp op) { return op == MatOp::None ? "" : op == MatOp::Transpose ? "^T" : "^H"; }

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, MatOp op_a, MatOp op_b) {
  PHASOR_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "matmul: 0-d operands (shapes ", a_in.shape(), " and ", b_in.shape(), ")");
  PHASOR_CHECK(a_in.device() == b_in.device(), "matmul: devices differ (", a_in.device(), " and ", b_in.device(), ")");
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  Tensor a = a_vec ? ops::unsqueeze(a_in, 0) : a_in;
  Tensor b = b_vec ? ops::unsqueeze(b_in, 1) : b_in;
  const DType dt = promote(a.dtype(), b.dtype());
  PHASOR_CHECK(is_inexact(dt), "matmul: not defined for dtype ", dt);
  a = ops::to(a, dt);
  b = ops::to(b, dt);
  const bool ta = op_a != MatOp::None, tb = op_b != MatOp::None;
  const int64_t m = ta ? a.size(-1) : a.size(-2), k = ta ? a.size(-2) : a.size(-1);
  const int64_t kb = tb ? b.size(-1) : b.size(-2), n = tb ? b.size(-2) : b.size(-1);
  PHASOR_CHECK(k == kb, "matmul: inner dimensions differ: ", a_in.shape(), op_name(op_a), " x ", b_in.shape(), op_name(op_b), " (", k,
               " vs ", kb, ")");
  Dims a_batch, b_batch;
  for (int i = 0; i + 2 < a.dim(); ++i) a_batch.push_back(a.size(i));
  for (int i = 0; i + 2 < b.dim(); ++i) b_batch.push_back(b.size(i));
  const Dims batch = broadcast_shapes(a_batch, b_batch, "matmul");

  // A batch of a's times one b: fold a's batch into M (one GEMM).
  if (b_batch.empty() && !ta && a.dim() > 2 && a.is_contiguous()) {
    Dims out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    Tensor out = ops::reshape(matmul(ops::reshape(a, Dims{-1, k}), b, MatOp::None, op_b), out_shape);
    return b_vec ? ops::squeeze(out, -1) : out;
  }

  Dims out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = empty(out_shape, dt, a.device());
  if (out.numel() > 0) {
    if (k == 0) {
      ops::fill_(out, 0.0);
    } else {
      const Operand ga = as_operand(a, op_a), gb = as_operand(b, op_b);
      const auto ao = batch_offsets(ga.t, batch), bo = batch_offsets(gb.t, batch);
      dispatch_inexact(dt, "matmul", [&]<class T>() { gemm<T>(ga, gb, out, m, n, k, ao, bo); });
    }
  }
  if (a_vec) out = ops::squeeze(out, -2);
  if (b_vec) out = ops::squeeze(out, -1);
  return out;
}

}  // namespace phasor::gpu
