// Elementwise CUDA kernels: ONE strided kernel (map_kernel) runs every
// elementwise op; each op is a functor. CPU reference: tensor/elementwise.cpp
// (same formulas, same NaN rules, same promotions, decided in cuda/backend.cpp).
#include "cuda/common.cuh"
#include <utility>

#include "tensor/random.h"

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
  map_kernel<N, F><<<grid_for(g.numel), kThreads, 0, stream()>>>(g, f);
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

// ---- conversions (copy_) ----
template <class D, class S>
__device__ inline D convert(S v) {
  if constexpr (is_cplx_v<S> && !is_cplx_v<D>) return static_cast<D>(v.real());
  else if constexpr (is_cplx_v<D> && !is_cplx_v<S>) return D(static_cast<real_t<D>>(v), 0);
  else if constexpr (is_cplx_v<D> && is_cplx_v<S>) return D(static_cast<real_t<D>>(v.real()), static_cast<real_t<D>>(v.imag()));
  else return static_cast<D>(v);
}
template <class D, class S>
struct Convert {
  __device__ D operator()(S v) const { return convert<D>(v); }
};

// ---- unary maths: one functor, the op chosen at run time (uniform branch) ----
template <class T>
__device__ inline T unary_value(ops::Unary op, T x) {
  using R = real_t<T>;
  namespace cs = ::cuda::std;
  using ops::Unary;
  if constexpr (std::is_same_v<T, int64_t>) {
    switch (op) {
      case Unary::Neg: return -x;
      case Unary::Square: return x * x;
      case Unary::Sign: return (x > 0) - (x < 0);
      case Unary::Abs: return x < 0 ? -x : x;
      default: return x;  // Conj
    }
  } else {
    switch (op) {
      case Unary::Neg: return -x;
      case Unary::Exp: return cs::exp(x);
      case Unary::Log: return cs::log(x);
      case Unary::Sqrt: return cs::sqrt(x);
      case Unary::Rsqrt: return R(1) / cs::sqrt(x);
      case Unary::Sin: return cs::sin(x);
      case Unary::Cos: return cs::cos(x);
      case Unary::Tanh: return cs::tanh(x);
      case Unary::Sigmoid: return R(1) / (R(1) + cs::exp(-x));
      case Unary::Silu: return x / (R(1) + cs::exp(-x));
      case Unary::Reciprocal: return R(1) / x;
      case Unary::Square: return x * x;
      case Unary::Conj:
        if constexpr (is_cplx_v<T>) return cs::conj(x);
        else return x;
      case Unary::Sign:
        if constexpr (is_cplx_v<T>) {
          const R a = cs::abs(x);
          return a == R(0) ? T(0) : x / a;
        } else {
          return T((x > R(0)) - (x < R(0)));
        }
      case Unary::Gelu:
        if constexpr (!is_cplx_v<T>) return R(0.5) * x * (R(1) + cs::erf(x * R(0.7071067811865476)));
        break;
      case Unary::GeluDerivative:
        if constexpr (!is_cplx_v<T>)
          return R(0.5) * (R(1) + cs::erf(x * R(0.7071067811865476))) + x * cs::exp(R(-0.5) * x * x) * R(0.3989422804014327);
        break;
      default: break;
    }
    return x;
  }
}
template <class T>
struct UnaryFn {
  ops::Unary op;
  __device__ T operator()(T v) const { return unary_value(op, v); }
};
// abs and angle: complex -> real (real input: |x| and 0 / pi).
template <class T>
struct AbsFn {
  __device__ real_t<T> operator()(T v) const {
    if constexpr (is_cplx_v<T>) return ::cuda::std::abs(v);
    else return v < T(0) ? -v : v;
  }
};
template <class T>
struct AngleFn {
  __device__ real_t<T> operator()(T v) const {
    if constexpr (is_cplx_v<T>) return ::cuda::std::arg(v);
    else return v < T(0) ? static_cast<T>(3.14159265358979323846) : T(0);
  }
};

// ---- binary arithmetic ----
template <class T>
__device__ inline T binary_value(ops::Binary op, T a, T b) {
  using ops::Binary;
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Pow:
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<T>(::cuda::std::pow(static_cast<double>(a), static_cast<double>(b)));
      else return ::cuda::std::pow(a, b);
    case Binary::Maximum:
      if constexpr (!is_cplx_v<T>) return (a != a || a > b) ? a : b;  // NaN propagates
      break;
    case Binary::Minimum:
      if constexpr (!is_cplx_v<T>) return (a != a || a < b) ? a : b;
      break;
    case Binary::Atan2:
      if constexpr (!is_cplx_v<T> && !std::is_same_v<T, int64_t>) return ::cuda::std::atan2(a, b);
      break;
  }
  return a;
}
template <class T>
struct BinaryFn {
  ops::Binary op;
  __device__ T operator()(T a, T b) const { return binary_value(op, a, b); }
};

template <class T>
struct CompareFn {
  ops::Compare op;
  __device__ bool operator()(T p, T q) const {
    using ops::Compare;
    if constexpr (is_cplx_v<T>) {
      return op == Compare::Eq ? p == q : p != q;
    } else {
      switch (op) {
        case Compare::Eq: return p == q;
        case Compare::Ne: return p != q;
        case Compare::Lt: return p < q;
        case Compare::Le: return p <= q;
        case Compare::Gt: return p > q;
        case Compare::Ge: return p >= q;
      }
      return false;
    }
  }
};

template <class T>
struct WhereFn {
  __device__ T operator()(bool k, T p, T q) const { return k ? p : q; }
};
template <class R>
struct PolarFn {
  __device__ cplx<R> operator()(R m, R p) const { return cplx<R>(m * ::cuda::std::cos(p), m * ::cuda::std::sin(p)); }
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
template <class T>
struct PowScalarFn {
  real_t<T> e;
  int mode;  // 0: general, 1: square, 2: sqrt
  __device__ T operator()(T v) const {
    if (mode == 1) return v * v;
    if (mode == 2) return ::cuda::std::sqrt(v);
    return ::cuda::std::pow(v, e);
  }
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

template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, int64_t n, T decay, T b1, T b2, T one_b1, T one_b2, T eps, T inv_bc2,
                             T step_size) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T pi = p[i] * decay;
    const T gi = g[i];
    const T mi = m[i] * b1 + gi * one_b1;
    const T vi = v[i] * b2 + gi * gi * one_b2;
    const T denom = ::cuda::std::sqrt(vi) / inv_bc2 + eps;
    pi -= step_size * (mi / denom);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void launch_copy(DType dst, DType src, const Strided<2>& g) {
  dispatch_dev(dst, "copy_", [&]<class D>() {
    dispatch_dev(src, "copy_", [&]<class S>() { apply<D, S>(g, Convert<D, S>{}, "copy_"); });
  });
}

void launch_fill(DType dst, c128 value, const Strided<1>& g) {
  dispatch_dev(dst, "fill_", [&]<class T>() {
    T v;
    if constexpr (is_cplx_v<T>) v = T(static_cast<real_t<T>>(value.real()), static_cast<real_t<T>>(value.imag()));
    else v = static_cast<T>(value.real());
    run(g, FillFn<T>{v}, "fill_");
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

void launch_axpy(DType t, double alpha, const Strided<2>& g) {
  // dst is both operand 0 and the left input: view it twice.
  Strided<3> g3;
  g3.ndim = g.ndim;
  g3.numel = g.numel;
  for (int d = 0; d < kMaxDims; ++d) {
    g3.shape[d] = g.shape[d];
    g3.strides[0][d] = g3.strides[1][d] = g.strides[0][d];
    g3.strides[2][d] = g.strides[1][d];
  }
  g3.base[0] = g3.base[1] = g.base[0];
  g3.base[2] = g.base[1];
  dispatch_dev(t, "axpy_", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_cplx_v<T>)
      apply<T, T, T>(g3, AxpyFn<T>{static_cast<real_t<T>>(alpha)}, "axpy_");
    else
      fail("axpy_: not defined for dtype ", dtype_name(t));
  });
}

void launch_pow_scalar(DType t, double p, const Strided<2>& g) {
  dispatch_dev(t, "pow", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || is_cplx_v<T>)
      apply<T, T>(g, PowScalarFn<T>{static_cast<real_t<T>>(p), p == 2.0 ? 1 : p == 0.5 ? 2 : 0}, "pow");
    else
      fail("pow: not defined for dtype ", dtype_name(t));
  });
}

void launch_random(DType real, bool normal, double a, double b, uint64_t seed, uint64_t first, const Strided<1>& g) {
  dispatch_real(real, normal ? "normal" : "uniform", [&]<class R>() {
    run(g, RandomFn<R>{normal, a, b, seed, first}, normal ? "normal" : "uniform");
  });
}

void launch_adamw(DType t, void* param, const void* grad, void* exp_avg, void* exp_avg_sq, int64_t n, double lr, double weight_decay,
                  double beta1, double beta2, double eps, double bias_correction1, double bias_correction2_sqrt) {
  if (n == 0) return;
  dispatch_real(t, "AdamW", [&]<class T>() {
    adamw_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(
        static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg), static_cast<T*>(exp_avg_sq), n,
        static_cast<T>(1.0 - lr * weight_decay), static_cast<T>(beta1), static_cast<T>(beta2), static_cast<T>(1.0 - beta1),
        static_cast<T>(1.0 - beta2), static_cast<T>(eps), static_cast<T>(bias_correction2_sqrt), static_cast<T>(lr / bias_correction1));
    check_launch("adamw_step_");
  });
}

}  // namespace phasor::gpu
