// Elementwise CUDA kernels: ONE strided kernel (map_kernel) runs every
// elementwise op; each op is a functor over the scalar maths of
// tensor/scalar_math.h, which the CPU kernels (tensor/cpu/elementwise.cpp)
// call too. Dtypes and shapes were decided by the front-ends (tensor/elementwise.cpp).
#include "cuda/common.cuh"
#include <utility>

#include "tensor/random.h"
#include "tensor/scalar_math.h"

namespace phasor::gpu {

namespace {

// Byte pointers of element i in each operand.
template <int N>
__device__ inline void locate(const Strided<N>& g, int64_t i, char* (&p)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) p[k] = g.base[k];
  if (g.ndim == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] += i * g.strides[k][0];
    return;
  }
  int64_t rem = i;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t n = g.shape[d];
    const int64_t idx = rem % n;
    rem /= n;
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] += idx * g.strides[k][d];
  }
}

// The one elementwise kernel: f(pointers, linear index) for every element.
template <int N, class F>
__global__ void map_kernel(Strided<N> g, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += step) {
    char* p[N];
    locate(g, i, p);
    f(p, i);
  }
}

template <int N, class F>
void run(const Strided<N>& g, F f, const char* name) {
  if (g.numel == 0) return;
  PHASOR_LAUNCH(grid_for(g.numel), kThreads, 0, stream(), map_kernel<N, F>)(g, f);
  check_launch(name);
}

// Out = op(In...) over typed loads and stores.
template <class Out, class Op, class... Ins>
struct Apply {
  Op op;
  __device__ void operator()(char** p, int64_t) const { call(p, std::index_sequence_for<Ins...>{}); }
  template <size_t... I>
  __device__ void call(char** p, std::index_sequence<I...>) const {
    *reinterpret_cast<Out*>(p[0]) = op(*reinterpret_cast<const Ins*>(p[I + 1])...);
  }
};
template <class Out, class... Ins, int N, class Op>
void apply(const Strided<N>& g, Op op, const char* name) {
  static_assert(N == sizeof...(Ins) + 1);
  run(g, Apply<Out, Op, Ins...>{op}, name);
}

// ---- the scalar maths of tensor/scalar_math.h, as functors ----
template <class D, class S>
struct Convert {
  __device__ D operator()(S v) const { return scalar::convert<D>(v); }
};
// bfloat16, a storage dtype: converted through float32 as on the CPU
// (element_cast, tensor/dtype.h), so both give the same bits; a bfloat16 ->
// bfloat16 copy moves the bits (a signalling NaN stays one).
template <class D, class S>
struct ConvertBf16 {
  __device__ D operator()(S v) const {
    if constexpr (std::is_same_v<D, S>) return v;
    else if constexpr (std::is_same_v<S, bf16>) return scalar::convert<D>(static_cast<float>(v));
    else return bf16(scalar::convert<float>(v));
  }
};
template <class T>
struct UnaryFn {
  ops::Unary op;  // chosen at run time: a uniform branch
  __device__ T operator()(T v) const { return scalar::unary_value(op, v); }
};
template <class T>
struct AbsFn {
  __device__ real_t<T> operator()(T v) const { return scalar::abs_value(v); }
};
template <class T>
struct AngleFn {
  __device__ real_t<T> operator()(T v) const { return scalar::angle_value(v); }
};
template <class T>
struct BinaryFn {
  ops::Binary op;
  __device__ T operator()(T a, T b) const { return scalar::binary_value(op, a, b); }
};
template <class T>
struct CompareFn {
  ops::Compare op;
  __device__ bool operator()(T p, T q) const { return scalar::compare_value(op, p, q); }
};

template <class T>
struct WhereFn {
  __device__ T operator()(bool k, T p, T q) const { return k ? p : q; }
};
template <class R>
struct PolarFn {
  __device__ cplx<R> operator()(R m, R p) const { return scalar::polar_value<cplx<R>>(m, p); }
};
template <class R>
struct ComplexFn {
  __device__ cplx<R> operator()(R p, R q) const { return cplx<R>(p, q); }
};
template <class T>
struct AxpyFn {
  real_t<T> alpha;
  __device__ T operator()(T p, T q) const { return p + alpha * q; }
};
template <scalar::PowMode M, class T>
struct PowScalarFn {
  real_t<T> e;
  __device__ T operator()(T v) const { return scalar::pow_scalar_value<M>(v, e); }
};

template <class T>
struct FillFn {
  T value;
  __device__ void operator()(char** p, int64_t) const { *reinterpret_cast<T*>(p[0]) = value; }
};

template <class R>
struct RandomFn {
  bool normal;
  double a, b;
  uint64_t seed, first;
  __device__ void operator()(char** p, int64_t i) const {
    const uint64_t k = static_cast<uint64_t>(i);
    // Explicitly rounded products and sums: no fused multiply-add, so the bits match the CPU's.
    const double v = normal ? __dadd_rn(a, __dmul_rn(b, philox_normal(seed, first, k)))
                            : __dadd_rn(a, __dmul_rn(__dsub_rn(b, a), philox_uniform(seed, first, k)));
    *reinterpret_cast<R*>(p[0]) = static_cast<R>(v);
  }
};

}  // namespace

namespace {
// dispatch_dev, bfloat16 included: for the kernels that only move or convert elements.
template <class F>
void dispatch_dev_storage(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) f.template operator()<bf16>();
  else dispatch_dev(t, op, f);
}
}  // namespace

void launch_copy(DType dst, DType src, const Strided<2>& g) {
  dispatch_dev_storage(dst, "copy_", [&]<class D>() {
    dispatch_dev_storage(src, "copy_", [&]<class S>() {
      if constexpr (std::is_same_v<D, bf16> || std::is_same_v<S, bf16>) apply<D, S>(g, ConvertBf16<D, S>{}, "copy_");
      else apply<D, S>(g, Convert<D, S>{}, "copy_");
    });
  });
}

void launch_fill(DType dst, c128 value, const Strided<1>& g) {
  if (dst == DType::BFloat16) {  // the CPU's value: the real part, to float32, then rounded
    run(g, FillFn<bf16>{bf16(static_cast<float>(value.real()))}, "fill_");
    return;
  }
  dispatch_dev(dst, "fill_", [&]<class T>() {
    run(g, FillFn<T>{scalar::convert<T>(dev_t<c128>(value.real(), value.imag()))}, "fill_");
  });
}

void launch_unary(ops::Unary op, DType in, DType out, const Strided<2>& g) {
  dispatch_dev(in, ops::name(op), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      fail(ops::name(op), ": not defined for bool tensors");
    } else if (op == ops::Unary::Abs) {
      apply<real_t<T>, T>(g, AbsFn<T>{}, "abs");
    } else if (op == ops::Unary::Angle) {
      if constexpr (!std::is_same_v<T, int64_t>) apply<real_t<T>, T>(g, AngleFn<T>{}, "angle");
    } else {
      apply<T, T>(g, UnaryFn<T>{op}, ops::name(op));
    }
  });
  (void)out;
}

void launch_binary(ops::Binary op, DType t, const Strided<3>& g) {
  dispatch_dev(t, ops::name(op), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) apply<T, T, T>(g, BinaryFn<T>{op}, ops::name(op));
  });
}

void launch_compare(ops::Compare op, DType t, const Strided<3>& g) {
  dispatch_dev(t, "compare", [&]<class T>() { apply<bool, T, T>(g, CompareFn<T>{op}, "compare"); });
}

void launch_where(DType t, const Strided<4>& g) {
  dispatch_dev(t, "where", [&]<class T>() { apply<T, bool, T, T>(g, WhereFn<T>{}, "where"); });
}

void launch_polar(DType real, const Strided<3>& g) {
  dispatch_real(real, "polar", [&]<class R>() { apply<cplx<R>, R, R>(g, PolarFn<R>{}, "polar"); });
}

void launch_complex(DType real, const Strided<3>& g) {
  dispatch_real(real, "complex", [&]<class R>() { apply<cplx<R>, R, R>(g, ComplexFn<R>{}, "complex"); });
}

void launch_axpy(DType t, double alpha, const Strided<3>& g) {
  dispatch_dev(t, "axpy_", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_cplx_v<T>) apply<T, T, T>(g, AxpyFn<T>{static_cast<real_t<T>>(alpha)}, "axpy_");
  });
}

void launch_pow_scalar(DType t, double p, const Strided<2>& g) {
  using scalar::PowMode;
  dispatch_dev(t, "pow", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_cplx_v<T>) {
      const auto e = static_cast<real_t<T>>(p);
      switch (scalar::pow_mode(p)) {
        case PowMode::Square: apply<T, T>(g, PowScalarFn<PowMode::Square, T>{e}, "pow"); break;
        case PowMode::Sqrt: apply<T, T>(g, PowScalarFn<PowMode::Sqrt, T>{e}, "pow"); break;
        case PowMode::General: apply<T, T>(g, PowScalarFn<PowMode::General, T>{e}, "pow"); break;
      }
    }
  });
}

void launch_random(DType real, bool normal, double a, double b, uint64_t seed, uint64_t first, const Strided<1>& g) {
  dispatch_real(real, normal ? "normal" : "uniform", [&]<class R>() {
    run(g, RandomFn<R>{normal, a, b, seed, first}, normal ? "normal" : "uniform");
  });
}

}  // namespace phasor::gpu
