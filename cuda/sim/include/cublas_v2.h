#pragma once
// The cuBLAS API Phasor calls (cuda/gemm.cpp), for the CUDA simulator: the
// GEMM forms with cuBLAS's column-major semantics and its argument checks, run
// in stream order on the CPU BLAS (cuda/sim/cublas.cpp).
#include "cuComplex.h"
#include "cuda_runtime_api.h"

struct cublasContext;
typedef cublasContext* cublasHandle_t;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
// The element types and the compute type of the mixed-precision GEMMs (cublasGemmEx and
// its batched forms): the simulator takes bfloat16 or float32 operands and results,
// and computes in float32 (CUBLAS_COMPUTE_32F).
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusString(cublasStatus_t status);

#define PHASOR_SIM_GEMM(P, T)                                                                                                       \
  cublasStatus_t cublas##P##gemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const T*, const T*, int,     \
                                 const T*, int, const T*, T*, int);                                                                 \
  cublasStatus_t cublas##P##gemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const T*,      \
                                               const T*, int, long long, const T*, int, long long, const T*, T*, int, long long,   \
                                               int);                                                                                \
  cublasStatus_t cublas##P##gemmBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const T*,             \
                                        const T* const[], int, const T* const[], int, const T*, T* const[], int, int);
PHASOR_SIM_GEMM(S, float)
PHASOR_SIM_GEMM(D, double)
PHASOR_SIM_GEMM(C, cuComplex)
PHASOR_SIM_GEMM(Z, cuDoubleComplex)
#undef PHASOR_SIM_GEMM

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void* alpha, const void* a,
                            cudaDataType a_type, int lda, const void* b, cudaDataType b_type, int ldb, const void* beta, void* c,
                            cudaDataType c_type, int ldc, cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void* alpha,
                                          const void* a, cudaDataType a_type, int lda, long long sa, const void* b, cudaDataType b_type,
                                          int ldb, long long sb, const void* beta, void* c, cudaDataType c_type, int ldc, long long sc,
                                          int count, cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void* alpha,
                                   const void* const a[], cudaDataType a_type, int lda, const void* const b[], cudaDataType b_type,
                                   int ldb, const void* beta, void* const c[], cudaDataType c_type, int ldc, int count,
                                   cublasComputeType_t, cublasGemmAlgo_t);
