// GEMM on OpenBLAS: one cblas_?gemm per batch item of the plan that the
// matmul front-end (tensor/linalg.cpp) made; transposes and conjugate
// transposes are BLAS flags, never copies. CUDA twin: cuda/gemm.cpp.
#include <cblas.h>

#include "tensor/cpu/backend.h"

namespace phasor::cpu {

namespace {

CBLAS_TRANSPOSE flag(BlasOp op) { return op == BlasOp::N ? CblasNoTrans : op == BlasOp::T ? CblasTrans : CblasConjTrans; }

template <class T>
void gemm_one(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
              T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  } else if constexpr (std::is_same_v<T, c64>) {
    const c64 one(1), zero(0);
    cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  } else {
    const c128 one(1), zero(0);
    cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  }
}

}  // namespace

void CpuBackend::gemm(const Tensor& out, const GemmPlan& p) {
  dispatch_inexact(out.dtype(), "matmul", [&]<class T>() {
    const T* pa = p.a.t.template data<T>();
    const T* pb = p.b.t.template data<T>();
    T* pc = out.data<T>();
    for (size_t i = 0; i < p.a.offsets.size(); ++i)
      gemm_one<T>(flag(p.a.op), flag(p.b.op), p.m, p.n, p.k, pa + p.a.offsets[i], p.a.ld, pb + p.b.offsets[i], p.b.ld,
                  pc + static_cast<int64_t>(i) * p.m * p.n, p.n);
  });
}

}  // namespace phasor::cpu
