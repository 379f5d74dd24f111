// GEMM on cuBLAS, running the plan of the matmul front-end (tensor/linalg.cpp).
// Phasor's matrices are row-major; cuBLAS's are column-major, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T, which is the same three stored arrays
// with the same flags: BlasOp N / T / C maps to CUBLAS_OP_N / _T / _C.
// Transposes are never materialised. CPU twin: tensor/cpu/gemm.cpp.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "tensor/backend.h"
#include "tensor/ops.h"

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

// The cuBLAS calls of one element type: the plain, strided-batched and
// pointer-batched GEMMs, with A and B of type In and C of type Out.
template <class T>
struct Blas;
template <class D, auto Plain, auto Strided, auto Batched>
struct TypedBlas {
  using In = D;
  using Out = D;
  D one, zero;
  cublasStatus_t plain(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* a, int lda,
                       const In* b, int ldb, Out* c, int ldc) const {
    return Plain(h, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  }
  cublasStatus_t strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* a, int lda,
                         long long sa, const In* b, int ldb, long long sb, Out* c, int ldc, long long sc, int count) const {
    return Strided(h, ta, tb, m, n, k, &one, a, lda, sa, b, ldb, sb, &zero, c, ldc, sc, count);
  }
  cublasStatus_t batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* const* a,
                         int lda, const In* const* b, int ldb, Out* const* c, int ldc, int count) const {
    return Batched(h, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc, count);
  }
};
template <>
struct Blas<float> : TypedBlas<float, cublasSgemm, cublasSgemmStridedBatched, cublasSgemmBatched> {
  Blas() : TypedBlas{1.0f, 0.0f} {}
};
template <>
struct Blas<double> : TypedBlas<double, cublasDgemm, cublasDgemmStridedBatched, cublasDgemmBatched> {
  Blas() : TypedBlas{1.0, 0.0} {}
};
template <>
struct Blas<c64> : TypedBlas<cuComplex, cublasCgemm, cublasCgemmStridedBatched, cublasCgemmBatched> {
  Blas() : TypedBlas{{1.0f, 0.0f}, {0.0f, 0.0f}} {}
};
template <>
struct Blas<c128> : TypedBlas<cuDoubleComplex, cublasZgemm, cublasZgemmStridedBatched, cublasZgemmBatched> {
  Blas() : TypedBlas{{1.0, 0.0}, {0.0, 0.0}} {}
};

// bfloat16 operands, a float32 or bfloat16 result (Out), float32 arithmetic:
// cuBLAS's mixed-precision GEMMs with CUBLAS_COMPUTE_32F.
template <class Out_>
struct MixedBlas {
  using In = bf16;
  using Out = Out_;
  static constexpr cudaDataType kIn = CUDA_R_16BF, kOut = std::is_same_v<Out, float> ? CUDA_R_32F : CUDA_R_16BF;
  float one = 1.0f, zero = 0.0f;
  cublasStatus_t plain(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* a, int lda,
                       const In* b, int ldb, Out* c, int ldc) const {
    return cublasGemmEx(h, ta, tb, m, n, k, &one, a, kIn, lda, b, kIn, ldb, &zero, c, kOut, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  cublasStatus_t strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* a, int lda,
                         long long sa, const In* b, int ldb, long long sb, Out* c, int ldc, long long sc, int count) const {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &one, a, kIn, lda, sa, b, kIn, ldb, sb, &zero, c, kOut, ldc, sc, count,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  cublasStatus_t batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const In* const* a,
                         int lda, const In* const* b, int ldb, Out* const* c, int ldc, int count) const {
    return cublasGemmBatchedEx(h, ta, tb, m, n, k, &one, reinterpret_cast<const void* const*>(a), kIn, lda,
                               reinterpret_cast<const void* const*>(b), kIn, ldb, &zero, reinterpret_cast<void* const*>(c), kOut, ldc,
                               count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
};

int as_int(int64_t v, const char* what) { return blas_int(v, what); }  // cuBLAS's ints: refused past the limit, never wrapped

// C [batch, m, n] row-major = op(A) op(B), as C^T = op(B)^T op(A)^T in cuBLAS's column-major terms.
template <class Calls>
void gemm_with(const Tensor& out, const GemmPlan& p, const Calls& blas);

// A batch of more items than cuBLAS's int count: runs of at most the limit,
// each a plan of its own writing its rows of `out`.
template <class Calls>
bool gemm_in_runs(const Tensor& out, const GemmPlan& p, const Calls& blas) {
  const int64_t count = static_cast<int64_t>(p.a.offsets.size()), limit = blas_int_limit();
  if (count <= limit) return false;
  for (int64_t first = 0; first < count; first += limit) {
    const int64_t len = std::min(limit, count - first);
    GemmPlan run = p;
    run.a.offsets.assign(p.a.offsets.begin() + first, p.a.offsets.begin() + first + len);
    run.b.offsets.assign(p.b.offsets.begin() + first, p.b.offsets.begin() + first + len);
    gemm_with(ops::narrow(out, 0, first, len), run, blas);
  }
  return true;
}

template <class Calls>
void gemm_with(const Tensor& out_in, const GemmPlan& p, const Calls& blas) {
  // out [batch, m, n] as one leading batch dim, so runs of the batch are narrows of it.
  const Tensor out = ops::reshape(out_in, {static_cast<int64_t>(p.a.offsets.size()), p.m, p.n});
  if (gemm_in_runs(out, p, blas)) return;
  using In = typename Calls::In;
  using Out = typename Calls::Out;
  const GemmOperand &a = p.a, &b = p.b;
  const std::vector<int64_t>&ao = a.offsets, &bo = b.offsets;
  const int64_t m = p.m, n = p.n, k = p.k;
  const cublasOperation_t op_a = flag(a.op), op_b = flag(b.op);
  cublasHandle_t h = cublas();
  // TF32 (opt-in) covers float32 and complex64; set every time, the handle is shared.
  check_blas(cublasSetMathMode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const In* pa = reinterpret_cast<const In*>(a.t.raw_data());
  const In* pb = reinterpret_cast<const In*>(b.t.raw_data());
  Out* pc = reinterpret_cast<Out*>(out.raw_data());
  const int count = as_int(static_cast<int64_t>(ao.size()), "batch count");
  const int im = as_int(m, "m"), in = as_int(n, "n"), ik = as_int(k, "k");
  const int lda = as_int(a.ld, "lda"), ldb = as_int(b.ld, "ldb");
  const int64_t sa = uniform_stride(ao), sb = uniform_stride(bo);
  if (count == 1) {  // cuBLAS picks its kernels differently for a batch of one
    check_blas(blas.plain(h, op_b, op_a, in, im, ik, pb + bo[0], ldb, pa + ao[0], lda, pc, in), "gemm");
    return;
  }
  if (sa >= 0 && sb >= 0) {
    check_blas(blas.strided(h, op_b, op_a, in, im, ik, pb + bo[0], ldb, sb, pa + ao[0], lda, sa, pc, in, m * n, count),
               "gemmStridedBatched");
    return;
  }
  // Batch dims that no single stride describes (e.g. [B, H] of a permuted [B, N, H, d]): pointer arrays.
  std::vector<const In*> ha(ao.size()), hb(bo.size());
  std::vector<Out*> hc(ao.size());
  for (size_t i = 0; i < ao.size(); ++i) {
    ha[i] = pa + ao[i];
    hb[i] = pb + bo[i];
    hc[i] = pc + static_cast<int64_t>(i) * m * n;
  }
  Buffer da(ha.size() * sizeof(void*)), db(hb.size() * sizeof(void*)), dc(hc.size() * sizeof(void*));
  copy_to_device(da.get(), ha.data(), ha.size() * sizeof(void*));
  copy_to_device(db.get(), hb.data(), hb.size() * sizeof(void*));
  copy_to_device(dc.get(), hc.data(), hc.size() * sizeof(void*));
  check_blas(blas.batched(h, op_b, op_a, in, im, ik, db.as<const In*>(), ldb, da.as<const In*>(), lda, dc.as<Out*>(), in, count),
             "gemmBatched");
}

}  // namespace

void gemm(const Tensor& out, const GemmPlan& plan) {
  if (plan.a.t.dtype() == DType::BFloat16) {  // the result float32 (mixed precision) or bfloat16
    if (out.dtype() == DType::Float32) gemm_with(out, plan, MixedBlas<float>{});
    else gemm_with(out, plan, MixedBlas<bf16>{});
    return;
  }
  dispatch_inexact(out.dtype(), "matmul", [&]<class T>() { gemm_with(out, plan, Blas<T>{}); });
}

}  // namespace phasor::gpu
