// cuBLAS of the CUDA simulator: the GEMM forms of cuda/gemm.cpp with cuBLAS's
// column-major semantics and argument checks, queued on the handle's stream
// and run on the CPU BLAS (OpenBLAS's cblas) when the stream reaches them.
// When it runs, each product's operands must lie in live device memory, as a
// GPU's cuBLAS faults on a host pointer or a matrix past its allocation's end:
// the product is then not computed and the next synchronisation fails.
#include <cblas.h>

#include <algorithm>
#include <complex>
#include <cstdio>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "cublas_v2.h"
#include "internal.h"
#include "tensor/bfloat16.h"

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

// The elements a column-major matrix of `rows` x `cols` with leading dimension ld spans.
size_t span(int rows, int cols, int ld) { return rows == 0 || cols == 0 ? 0 : static_cast<size_t>(ld) * (cols - 1) + rows; }

// The bytes of one product's A, B and C (`element` bytes each).
struct Spans {
  size_t a, b, c;
};
Spans spans(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc, size_t element) {
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  return {span(na ? m : k, na ? k : m, lda) * element, span(nb ? k : n, nb ? n : k, ldb) * element, span(m, n, ldc) * element};
}

struct Operand {
  const char* name;
  const void* p;
  size_t bytes;
};
// Whether every operand lies in live device memory; if not, records the
// fault, naming `call`, the operand and the product (`index` of the batch).
bool in_device(const char* call, int index, std::initializer_list<Operand> operands) {
  for (const Operand& o : operands)
    if (o.bytes != 0 && !in_device_memory(o.p, o.bytes)) {
      char buf[240];
      std::snprintf(buf, sizeof buf, "%s: %s of product %d (%zu bytes at %p) is not in live device memory: a host pointer, a freed allocation, or past an allocation's end",
                    call, o.name, index, o.bytes, o.p);
      record_failure(buf);
      return false;
    }
  return true;
}

// Whether the three arrays of `count` pointers lie in live device memory.
bool pointer_arrays_in_device(const char* call, const void* a, const void* b, const void* c, int count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(void*);
  return in_device(call, 0, {{"the array of A pointers", a, bytes}, {"the array of B pointers", b, bytes}, {"the array of C pointers", c, bytes}});
}

template <class T>
cublasStatus_t gemm_batched_pointers(const char* call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                     const T* alpha, const T* const* a, int lda, const T* const* b, int ldb, const T* beta, T* const* c,
                                     int ldc, int count) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const T al = *alpha, be = *beta;  // host scalars are read at the call
  const Spans s = spans(ta, tb, m, n, k, lda, ldb, ldc, sizeof(T));
  // The pointer arrays live in device memory: read when the stream gets there.
  enqueue(h->stream, [=] {
    if (!pointer_arrays_in_device(call, a, b, c, count)) return;
    for (int i = 0; i < count; ++i) {
      if (!in_device(call, i, {{"A", a[i], s.a}, {"B", b[i], s.b}, {"C", c[i], s.c}})) return;
      gemm1<T>(trans(ta), trans(tb), m, n, k, al, a[i], lda, b[i], ldb, be, c[i], ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t gemm_strided(const char* call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const T* alpha, const T* a, int lda, long long sa, const T* b, int ldb, long long sb, const T* beta, T* c,
                            int ldc, long long sc, int count) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const T al = *alpha, be = *beta;
  const Spans s = spans(ta, tb, m, n, k, lda, ldb, ldc, sizeof(T));
  enqueue(h->stream, [=] {
    for (int i = 0; i < count; ++i) {
      if (!in_device(call, i, {{"A", a + i * sa, s.a}, {"B", b + i * sb, s.b}, {"C", c + i * sc, s.c}})) return;
      gemm1<T>(trans(ta), trans(tb), m, n, k, al, a + i * sa, lda, b + i * sb, ldb, be, c + i * sc, ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

// ---- the mixed-precision forms (cublasGemmEx): bfloat16 or float32 operands
// and results, float32 arithmetic. Each operand is widened to float32 (exact),
// multiplied by the CPU's sgemm, and a bfloat16 result rounded to nearest even.

bool supported(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

std::vector<float> widened(const void* p, cudaDataType type, size_t n) {
  std::vector<float> out(n);
  if (type == CUDA_R_32F) std::copy_n(static_cast<const float*>(p), n, out.begin());
  else
    for (size_t i = 0; i < n; ++i) out[i] = phasor::float_from_bf16_bits(static_cast<const uint16_t*>(p)[i]);
  return out;
}

// One product, run when the stream reaches it.
void gemm_ex1(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void* a, cudaDataType at, int lda,
              const void* b, cudaDataType bt, int ldb, float beta, void* c, cudaDataType ct, int ldc) {
  const std::vector<float> fa = widened(a, at, span(ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda));
  const std::vector<float> fb = widened(b, bt, span(tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb));
  const size_t nc = span(m, n, ldc);
  if (ct == CUDA_R_32F) {
    cblas_sgemm(CblasColMajor, trans(ta), trans(tb), m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta, static_cast<float*>(c), ldc);
    return;
  }
  std::vector<float> fc = beta == 0.0f ? std::vector<float>(nc) : widened(c, ct, nc);
  cblas_sgemm(CblasColMajor, trans(ta), trans(tb), m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta, fc.data(), ldc);
  uint16_t* out = static_cast<uint16_t*>(c);
  for (int j = 0; j < n; ++j)  // only C's own elements: the gaps between columns are not C's to write
    for (int i = 0; i < m; ++i) out[static_cast<size_t>(j) * ldc + i] = phasor::bf16_bits_from_float(fc[static_cast<size_t>(j) * ldc + i]);
}

size_t element_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

}  // namespace

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                          const void* a, cudaDataType at, int lda, long long sa, const void* b, cudaDataType bt, int ldb,
                                          long long sb, const void* beta, void* c, cudaDataType ct, int ldc, long long sc, int count,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0 || compute != CUBLAS_COMPUTE_32F || !supported(at) || !supported(bt) ||
      !supported(ct) || at != bt)
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);  // COMPUTE_32F: float scalars, read now
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  auto* pc = static_cast<char*>(c);
  const long long ea = static_cast<long long>(element_size(at)), eb = static_cast<long long>(element_size(bt)),
                  ec = static_cast<long long>(element_size(ct));
  const Spans s = spans(ta, tb, m, n, k, lda, ldb, ldc, 1);  // elements: each operand has its own size
  enqueue(h->stream, [=] {
    for (int i = 0; i < count; ++i) {
      const char *ai = pa + i * sa * ea, *bi = pb + i * sb * eb;
      char* ci = pc + i * sc * ec;
      if (!in_device("cublasGemmStridedBatchedEx", i, {{"A", ai, s.a * ea}, {"B", bi, s.b * eb}, {"C", ci, s.c * ec}})) return;
      gemm_ex1(ta, tb, m, n, k, al, ai, at, lda, bi, bt, ldb, be, ci, ct, ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType at, int lda, const void* b, cudaDataType bt, int ldb, const void* beta, void* c,
                            cudaDataType ct, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, at, lda, 0, b, bt, ldb, 0, beta, c, ct, ldc, 0, 1, compute, algo);
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                   const void* const a[], cudaDataType at, int lda, const void* const b[], cudaDataType bt, int ldb,
                                   const void* beta, void* const c[], cudaDataType ct, int ldc, int count, cublasComputeType_t compute,
                                   cublasGemmAlgo_t) {
  if (!valid(h, ta, tb, m, n, k, lda, ldb, ldc) || count < 0 || compute != CUBLAS_COMPUTE_32F || !supported(at) || !supported(bt) ||
      !supported(ct) || at != bt)
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const Spans s = spans(ta, tb, m, n, k, lda, ldb, ldc, 1);
  // The pointer arrays live in device memory: read when the stream gets there.
  enqueue(h->stream, [=] {
    if (!pointer_arrays_in_device("cublasGemmBatchedEx", a, b, c, count)) return;
    for (int i = 0; i < count; ++i) {
      if (!in_device("cublasGemmBatchedEx", i, {{"A", a[i], s.a * element_size(at)}, {"B", b[i], s.b * element_size(bt)}, {"C", c[i], s.c * element_size(ct)}}))
        return;
      gemm_ex1(ta, tb, m, n, k, al, a[i], at, lda, b[i], bt, ldb, be, c[i], ct, ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

#define PHASOR_SIM_GEMM(P, T)                                                                                                        \
  cublasStatus_t cublas##P##gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha, \
                                 const T* a, int lda, const T* b, int ldb, const T* beta, T* c, int ldc) {                          \
    return gemm_strided<T>(__func__, h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);                          \
  }                                                                                                                                  \
  cublasStatus_t cublas##P##gemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,   \
                                               const T* alpha, const T* a, int lda, long long sa, const T* b, int ldb, long long sb,\
                                               const T* beta, T* c, int ldc, long long sc, int count) {                             \
    return gemm_strided<T>(__func__, h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count);                   \
  }                                                                                                                                  \
  cublasStatus_t cublas##P##gemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,          \
                                        const T* alpha, const T* const a[], int lda, const T* const b[], int ldb, const T* beta,    \
                                        T* const c[], int ldc, int count) {                                                         \
    return gemm_batched_pointers<T>(__func__, h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, count);                      \
  }
PHASOR_SIM_GEMM(S, float)
PHASOR_SIM_GEMM(D, double)
PHASOR_SIM_GEMM(C, cuComplex)
PHASOR_SIM_GEMM(Z, cuDoubleComplex)
