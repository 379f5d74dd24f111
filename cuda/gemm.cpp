// GEMM on cuBLAS, running the plan of the matmul front-end (tensor/linalg.cpp).
// Phasor's matrices are row-major; cuBLAS's are column-major, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T, which is the same three stored arrays
// with the same flags: BlasOp N / T / C maps to CUBLAS_OP_N / _T / _C.
// Transposes are never materialised. CPU twin: tensor/cpu/gemm.cpp.
#include <cublas_v2.h>

#include <climits>
#include <vector>

#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "tensor/backend.h"

namespace phasor::gpu {

namespace {

cublasOperation_t flag(BlasOp op) { return op == BlasOp::N ? CUBLAS_OP_N : op == BlasOp::T ? CUBLAS_OP_T : CUBLAS_OP_C; }

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
void gemm_typed(const Tensor& out, const GemmPlan& p) {
  const GemmOperand &a = p.a, &b = p.b;
  const std::vector<int64_t>&ao = a.offsets, &bo = b.offsets;
  const int64_t m = p.m, n = p.n, k = p.k;
  const cublasOperation_t op_a = flag(a.op), op_b = flag(b.op);
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
    check_blas(B::plain(h, op_b, op_a, in, im, ik, &one, pb + bo[0], ldb, pa + ao[0], lda, &zero, pc, in), "gemm");
    return;
  }
  if (sa >= 0 && sb >= 0) {
    check_blas(B::strided(h, op_b, op_a, in, im, ik, &one, pb + bo[0], ldb, sb, pa + ao[0], lda, sa, &zero, pc, in, m * n, count),
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
  check_blas(B::batched(h, op_b, op_a, in, im, ik, &one, db.as<const D*>(), ldb, da.as<const D*>(), lda, &zero, dc.as<D*>(), in, count),
             "gemmBatched");
}

}  // namespace

void gemm(const Tensor& out, const GemmPlan& plan) {
  PHASOR_CHECK(plan.a.t.dtype() != DType::BFloat16, "matmul: bfloat16 products are not implemented on the CUDA backend yet (use float32)");
  dispatch_inexact(out.dtype(), "matmul", [&]<class T>() { gemm_typed<T>(out, plan); });
}

}  // namespace phasor::gpu
