// cuBLAS of the CUDA simulator: the GEMM forms of cuda/gemm.cpp with cuBLAS's
// column-major semantics and argument checks, queued on the handle's stream
// and run on the CPU BLAS (OpenBLAS's cblas) when the stream reaches them.
#include <cblas.h>

#include <algorithm>
#include <complex>
#include <type_traits>
#include <vector>

#include "cublas_v2.h"
#include "internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

using namespace phasor::sim;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;  // TF32 is not simulated: full precision
}
const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

namespace {

CBLAS_TRANSPOSE trans(cublasOperation_t op) { return op == CUBLAS_OP_N ? CblasNoTrans : op == CUBLAS_OP_T ? CblasTrans : CblasConjTrans; }

template <class T>
void gemm1(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c,
           int ldc) {
  if constexpr (std::is_same_v<T, float>) cblas_sgemm(CblasColMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if constexpr (std::is_same_v<T, double>) cblas_dgemm(CblasColMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if constexpr (std::is_same_v<T, cuComplex>) cblas_cgemm(CblasColMajor, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  else cblas_zgemm(CblasColMajor, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
}

// cuBLAS's checks of a GEMM's shape and leading dimensions (column-major).
bool valid(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
  if (!h || m < 0 || n < 0 || k < 0) return false;
  const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
  return lda >= std::max(1, rows_a) && ldb >= std::max(1, rows_b) && ldc >= std::max(1, m);
}

template <class T>
cublasStatus_t gemm_batched_pointers(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                                     const T* const* a, int lda, const T* const* b, int ldb, const T* beta, T* const* c, int ldc,
                                     int count) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const T al = *alpha, be = *beta;  // host scalars are read at the call
  // The pointer arrays live in device memory: read when the stream gets there.
  enqueue(h->stream, [=] {
    for (int i = 0; i < count; ++i) gemm1<T>(trans(ta), trans(tb), m, n, k, al, a[i], lda, b[i], ldb, be, c[i], ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha, const T* a,
                            int lda, long long sa, const T* b, int ldb, long long sb, const T* beta, T* c, int ldc, long long sc,
                            int count) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const T al = *alpha, be = *beta;
  enqueue(h->stream, [=] {
    for (int i = 0; i < count; ++i) gemm1<T>(trans(ta), trans(tb), m, n, k, al, a + i * sa, lda, b + i * sb, ldb, be, c + i * sc, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

#define PHASOR_SIM_GEMM(P, T)                                                                                                        \
  cublasStatus_t cublas##P##gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha, \
                                 const T* a, int lda, const T* b, int ldb, const T* beta, T* c, int ldc) {                          \
    return gemm_strided<T>(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);                                    \
  }                                                                                                                                  \
  cublasStatus_t cublas##P##gemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,   \
                                               const T* alpha, const T* a, int lda, long long sa, const T* b, int ldb, long long sb,\
                                               const T* beta, T* c, int ldc, long long sc, int count) {                             \
    return gemm_strided<T>(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count);                             \
  }                                                                                                                                  \
  cublasStatus_t cublas##P##gemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,          \
                                        const T* alpha, const T* const a[], int lda, const T* const b[], int ldb, const T* beta,    \
                                        T* const c[], int ldc, int count) {                                                         \
    return gemm_batched_pointers<T>(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, count);                                \
  }
PHASOR_SIM_GEMM(S, float)
PHASOR_SIM_GEMM(D, double)
PHASOR_SIM_GEMM(C, cuComplex)
PHASOR_SIM_GEMM(Z, cuDoubleComplex)
