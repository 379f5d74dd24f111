#pragma once
// Device-side helpers shared by the .cu files: the C++ type of each dtype on
// the device, dtype dispatch, launch sizing and block reductions (and, through
// cuda/global_memory.cuh, the counted global-memory accesses).
#include <algorithm>
#include <cuda/std/cmath>
#include <cuda/std/complex>
#include <cuda_runtime.h>

#include "cuda/global_memory.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.h"
#include "cuda/runtime.h"

namespace phasor::gpu {

// A tensor's device pointer, or null for an undefined (optional) operand.
inline const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

template <class R>
using cplx = ::cuda::std::complex<R>;

// std::complex on the host, ::cuda::std::complex on the device (same layout).
template <class T> struct dev_of { using type = T; };
template <> struct dev_of<c64> { using type = cplx<float>; };
template <> struct dev_of<c128> { using type = cplx<double>; };
template <class T> using dev_t = typename dev_of<T>::type;

template <class T> struct is_cplx : std::false_type {};
template <class R> struct is_cplx<cplx<R>> : std::true_type {};
template <class T> constexpr bool is_cplx_v = is_cplx<T>::value;
template <class T> struct real_t_of { using type = T; };
template <class R> struct real_t_of<cplx<R>> { using type = R; };
template <class T> using real_t = typename real_t_of<T>::type;

// Accumulators as on the CPU: float32 (and complex64) sums in double.
template <class T> struct acc_of { using type = T; };
template <> struct acc_of<float> { using type = double; };
template <> struct acc_of<cplx<float>> { using type = cplx<double>; };
template <class T> using acc_t = typename acc_of<T>::type;

// f.template operator()<T>() with the device type of `t`.
template <class F>
void dispatch_dev(DType t, const char* op, F&& f) {
  dispatch(t, [&]<class H>() { f.template operator()<dev_t<H>>(); });
  (void)op;
}
template <class F>
void dispatch_real(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: f.template operator()<float>(); return;
    case DType::Float64: f.template operator()<double>(); return;
    default: fail(op, ": not defined on cuda for dtype ", dtype_name(t), " (real floating dtypes only)");
  }
}
template <class F>
void dispatch_cplx(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Complex64: f.template operator()<cplx<float>>(); return;
    case DType::Complex128: f.template operator()<cplx<double>>(); return;
    default: fail(op, ": not defined on cuda for dtype ", dtype_name(t), " (complex dtypes only)");
  }
}

// The dtypes a sum or an index_add adds (every one but bool).
template <class T>
constexpr bool summable = !std::is_same_v<T, bool>;

constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(multiprocessors()) * 32;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

// ---- warp and block reductions (blockDim.x a multiple of 32, every thread calling) ----

template <class T>
__device__ inline T shfl_down(T v, int offset) {
  if constexpr (is_cplx_v<T>) {
    return T(__shfl_down_sync(0xffffffffu, v.real(), offset), __shfl_down_sync(0xffffffffu, v.imag(), offset));
  } else {
    return __shfl_down_sync(0xffffffffu, v, offset);
  }
}

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};
struct MinOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};

// The reduction of v over the block, returned to every thread. Two calls with
// the same T and Op share s: a barrier must separate them.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  PHASOR_SHARED(unsigned char, raw, 32 * sizeof(cplx<double>));
  T* s = reinterpret_cast<T*>(raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, shfl_down(v, o));
  if (lane == 0) s[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? s[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, shfl_down(v, o));
    if (lane == 0) s[0] = v;
  }
  __syncthreads();
  return s[0];
}

template <class T>
__device__ T block_sum(T v) {
  return block_reduce(v, SumOp{}, T(0));
}

// The grid of a kernel launched with one block per row: CUDA's grid holds at
// most 2^31 - 1 blocks in x, and a wider count cast to unsigned would launch a
// fraction of the rows without an error.
inline unsigned row_grid(int64_t rows, const char* op) {
  if (rows > 0x7fffffff) fail(op, ": ", rows, " rows exceed CUDA's grid limit of 2147483647 blocks (one block a row)");
  return static_cast<unsigned>(rows);
}

// Threads per block for a row of n elements: a multiple of 32, at most 1024.
inline int row_threads(int64_t n, int max_threads = 256) {
  int t = 32;
  while (t < max_threads && t < n) t *= 2;
  return t;
}

}  // namespace phasor::gpu
