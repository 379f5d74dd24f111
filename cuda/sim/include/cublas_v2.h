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
