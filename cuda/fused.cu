// Fused transformer kernels on CUDA, each forward beside its backward, each
// with the same maths as its CPU reference in tensor/cpu/fused.cpp (read the
// comments there for the derivations). The RMSNorm weight's gradient is
// reduced per block and then over blocks in a fixed order: no atomics, so
// every run gives the same bits. AdamW's step is here too, as on the CPU. The
// rotary kernels are in cuda/rotation.cu and cuda/polar_rotation.cu.
#include <vector>

#include "cuda/common.cuh"
#include "tensor/scalar_math.h"

namespace phasor::gpu {

namespace {

// ---------------------------------------------------------------- SwiGLU

template <class T>
__device__ T sigmoid_of(T a) {
  return T(1) / (T(1) + scalar::math::exp(-a));
}

template <class T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = scalar::swiglu_value(gate[i], up[i], sigmoid_of(gate[i]));
}

template <class T>
__global__ void swiglu_backward_kernel(const T* g, const T* gate, const T* up, T* dgate, T* dup, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T da, db;
    scalar::swiglu_grads(gate[i], up[i], sigmoid_of(gate[i]), g[i], da, db);
    dgate[i] = da;
    dup[i] = db;
  }
}

// ---------------------------------------------------------------- RMSNorm

template <class T>
__global__ void rms_norm_kernel(const T* x, const T* w, T* y, T* inv_rms, int64_t d, double eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += static_cast<double>(xr[i]) * xr[i];
  ss = block_sum(ss);
  const T inv = static_cast<T>(1.0 / ::cuda::std::sqrt(ss / static_cast<double>(d) + eps));
  if (threadIdx.x == 0) inv_rms[row] = inv;
  T* yr = y + row * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

// dx = r u - r^3 x mean(u x) with u = g w, r = inv_rms.
template <class T>
__global__ void rms_norm_dx_kernel(const T* g, const T* x, const T* w, const T* inv_rms, T* dx, int64_t d) {
  const int64_t row = blockIdx.x;
  const T *gr = g + row * d, *xr = x + row * d;
  double dot = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dot += static_cast<double>(gr[i]) * w[i] * xr[i];
  dot = block_sum(dot);
  const double inv = inv_rms[row];
  const T a = static_cast<T>(inv), b = static_cast<T>(inv * inv * inv * dot / static_cast<double>(d));
  T* o = dx + row * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = a * gr[i] * w[i] - b * xr[i];
}

// dw = sum over rows of g x r: partial sums over slices of rows, then in order.
template <class T>
__global__ void rms_norm_dw_kernel(const T* g, const T* x, const T* inv_rms, double* partial, int64_t rows, int64_t d, int64_t chunk) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < rows ? begin + chunk : rows;
  double acc = 0;
  for (int64_t r = begin; r < end; ++r) acc += static_cast<double>(g[r * d + c]) * x[r * d + c] * static_cast<double>(inv_rms[r]);
  partial[blockIdx.y * d + c] = acc;
}
template <class T>
__global__ void finish_columns_kernel(const double* partial, T* out, int64_t cols, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double acc = 0;
  for (int64_t k = 0; k < chunks; ++k) acc += partial[k * cols + c];
  out[c] = static_cast<T>(acc);
}

// ---------------------------------------------------------------- cross-entropy

template <class T>
__global__ void cross_entropy_kernel(const T* logits, const int64_t* targets, T* lse_out, double* row_loss, int64_t v, int64_t ignore) {
  const int64_t row = blockIdx.x;
  const T* r = logits + row * v;
  T m = -::cuda::std::numeric_limits<T>::infinity();
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = r[j] > m ? r[j] : m;
  m = block_reduce(m, MaxOp{}, -::cuda::std::numeric_limits<T>::infinity());
  double s = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += ::cuda::std::exp(static_cast<double>(r[j] - m));
  s = block_sum(s);
  if (threadIdx.x == 0) {
    const double lse = static_cast<double>(m) + ::cuda::std::log(s);
    lse_out[row] = static_cast<T>(lse);
    const int64_t t = targets[row];
    // A target out of range counts nothing here; check_indices_kernel reports it.
    row_loss[row] = t == ignore || t < 0 || t >= v ? 0.0 : lse - static_cast<double>(r[t]);
  }
}
// The loss and the count of rows it covers (targets in [0, v), not ignored),
// on the device: a mean over none is 0/0 (NaN), a sum over none 0.
template <class T>
__global__ void sum_loss_kernel(const double* row_loss, const int64_t* targets, int64_t rows, int64_t v, int64_t ignore, bool mean, T* loss,
                                double* count) {
  double acc = 0;
  int64_t counted = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    acc += row_loss[i];
    counted += targets[i] != ignore && targets[i] >= 0 && targets[i] < v;
  }
  acc = block_sum(acc);
  counted = block_sum(counted);
  if (threadIdx.x == 0) {
    const double denom = mean ? static_cast<double>(counted > 1 ? counted : 1) : 1.0;
    *loss = counted ? static_cast<T>(acc / denom) : mean ? ::cuda::std::numeric_limits<T>::quiet_NaN() : T(0);
    *count = static_cast<double>(counted);
  }
}
// grad / count (a mean; count null: a sum), in double as the CPU computes it, then in T.
template <class T>
__device__ inline T loss_grad(const double* grad, const double* count) {
  const double scale = count ? 1.0 / (*count > 1.0 ? *count : 1.0) : 1.0;
  return static_cast<T>(*grad * scale);
}
template <class T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int64_t* targets, const T* lse, T* d, int64_t rows, int64_t v,
                                              int64_t ignore, const double* grad, const double* count) {
  const T g = loss_grad<T>(grad, count);
  const int64_t total = rows * v;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t i = e / v, j = e % v, t = targets[i];
    if (t == ignore || t < 0 || t >= v) {
      d[e] = T(0);
      continue;
    }
    const T p = g * ::cuda::std::exp(logits[e] - lse[i]);
    d[e] = j == t ? p - g : p;
  }
}

// ---------------------------------------------------------------- attention softmax

template <class T>
__global__ void attention_softmax_kernel(const T* scores, const T* slopes, T* probs, int64_t h, int64_t nq, int64_t nk, T sc,
                                         int64_t offset) {
  const int64_t row = blockIdx.x;
  const int64_t m = row % nq, hi = (row / nq) % h;
  const T* s = scores + row * nk;
  T* out = probs + row * nk;
  const int64_t reach = m + offset + 1;
  const int64_t visible = reach < 0 ? 0 : reach < nk ? reach : nk;  // keys n <= m + offset
  const T slope = slopes ? slopes[hi] : T(0);
  auto value = [&](int64_t k) { return sc * s[k] - slope * static_cast<T>(m + offset - k); };
  T mx = -::cuda::std::numeric_limits<T>::infinity();
  for (int64_t k = threadIdx.x; k < visible; k += blockDim.x) {
    const T v = value(k);
    mx = v > mx ? v : mx;
  }
  mx = block_reduce(mx, MaxOp{}, -::cuda::std::numeric_limits<T>::infinity());
  double sum = 0;
  for (int64_t k = threadIdx.x; k < visible; k += blockDim.x) sum += ::cuda::std::exp(value(k) - mx);
  sum = block_sum(sum);
  const T inv = visible ? static_cast<T>(1.0 / sum) : T(0);
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x) out[k] = k < visible ? ::cuda::std::exp(value(k) - mx) * inv : T(0);
}

template <class T>
__global__ void attention_softmax_backward_kernel(const T* grad, const T* probs, T* d, int64_t nk, T sc) {
  const int64_t row = blockIdx.x;
  const T *g = grad + row * nk, *y = probs + row * nk;
  double dot = 0;
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x) dot += static_cast<double>(g[k]) * y[k];
  dot = block_sum(dot);
  const T dt = static_cast<T>(dot);
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x) d[row * nk + k] = sc * y[k] * (g[k] - dt);
}

// ---------------------------------------------------------------- AdamW

// The step's bias corrections come from the device (`schedule`: {apply, bc1,
// bc2_sqrt[, lr factor]}, nn::AdamW's) when given, else from the host.
template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, int64_t n, scalar::AdamWHyper h, double bc1, double bc2_sqrt,
                             const double* schedule, bool scheduled_lr) {
  if (!scalar::scheduled_corrections(schedule, bc1, bc2_sqrt)) return;
  if (scheduled_lr) h.lr *= schedule[3];
  const scalar::AdamWConstants<T> c = h.constants<T>(bc1, bc2_sqrt);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T pi = p[i], mi = m[i], vi = v[i];
    scalar::adamw_update(pi, g[i], mi, vi, c);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void launch_rms_norm(DType t, const void* x, const void* w, void* y, void* inv_rms, int64_t rows, int64_t d, double eps) {
  if (rows == 0) return;
  dispatch_real(t, "rms_norm", [&]<class T>() {
    PHASOR_LAUNCH(row_grid(rows, "rms_norm"), row_threads(d), 0, stream(), rms_norm_kernel<T>)(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), static_cast<T*>(inv_rms), d, eps);
    check_launch("rms_norm");
  });
}

// dx per row; dweight summed over rows in fixed order (two passes, no atomics).
void launch_rms_norm_backward(DType t, const void* g, const void* x, const void* w, const void* inv_rms, void* dx, void* dw, int64_t rows,
                              int64_t d) {
  dispatch_real(t, "rms_norm_backward", [&]<class T>() {
    if (rows > 0) {
      PHASOR_LAUNCH(row_grid(rows, "rms_norm_backward"), row_threads(d), 0, stream(), rms_norm_dx_kernel<T>)(
          static_cast<const T*>(g), static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(inv_rms), static_cast<T*>(dx), d);
      check_launch("rms_norm_backward");
    }
    if (d == 0) return;
    const int64_t col_blocks = (d + 127) / 128;
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(rows / 16, (4 * multiprocessors() + col_blocks - 1) / col_blocks));
    const int64_t chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
    Buffer partial(static_cast<size_t>(chunks * d) * sizeof(double));
    PHASOR_LAUNCH(dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks)), 128, 0, stream(), rms_norm_dw_kernel<T>)(
        static_cast<const T*>(g), static_cast<const T*>(x), static_cast<const T*>(inv_rms), partial.as<double>(), rows, d, chunk);
    check_launch("rms_norm_backward");
    PHASOR_LAUNCH(static_cast<unsigned>(col_blocks), 128, 0, stream(), finish_columns_kernel<T>)(partial.as<double>(), static_cast<T*>(dw), d, chunks);
    check_launch("rms_norm_backward");
  });
}

// Per-row logsumexp, the loss (sum over rows with target != ignore_index, a
// mean divided by their count) and the count, with the targets checked on the device.
void launch_cross_entropy(DType t, const void* logits, const int64_t* targets, void* lse, void* loss, double* count, int64_t rows, int64_t v,
                          int64_t ignore_index, bool mean) {
  launch_check_indices(targets, rows, v, IndexOp::CrossEntropy, 0, &ignore_index);
  dispatch_real(t, "cross_entropy", [&]<class T>() {
    Buffer row_loss(static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(double));
    if (rows > 0) {
      PHASOR_LAUNCH(row_grid(rows, "cross_entropy"), row_threads(v), 0, stream(), cross_entropy_kernel<T>)(
          static_cast<const T*>(logits), targets, static_cast<T*>(lse), row_loss.as<double>(), v, ignore_index);
      check_launch("cross_entropy");
    }
    PHASOR_LAUNCH(1, 1024, 0, stream(), sum_loss_kernel<T>)(row_loss.as<double>(), targets, rows, v, ignore_index, mean, static_cast<T*>(loss),
                                                            count);
    check_launch("cross_entropy");
  });
}

void launch_cross_entropy_backward(DType t, const void* logits, const int64_t* targets, const void* lse, void* d, int64_t rows, int64_t v,
                                   int64_t ignore_index, const double* grad, const double* count) {
  if (rows * v == 0) return;
  dispatch_real(t, "cross_entropy_backward", [&]<class T>() {
    PHASOR_LAUNCH(grid_for(rows * v), kThreads, 0, stream(), cross_entropy_backward_kernel<T>)(
        static_cast<const T*>(logits), targets, static_cast<const T*>(lse), static_cast<T*>(d), rows, v, ignore_index, grad, count);
    check_launch("cross_entropy_backward");
  });
}

void launch_swiglu(DType t, const void* gate, const void* up, void* out, int64_t n) {
  if (n == 0) return;
  dispatch_real(t, "swiglu", [&]<class T>() {
    PHASOR_LAUNCH(grid_for(n), kThreads, 0, stream(), swiglu_kernel<T>)(static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), n);
    check_launch("swiglu");
  });
}

void launch_swiglu_backward(DType t, const void* grad, const void* gate, const void* up, void* dgate, void* dup, int64_t n) {
  if (n == 0) return;
  dispatch_real(t, "swiglu_backward", [&]<class T>() {
    PHASOR_LAUNCH(grid_for(n), kThreads, 0, stream(), swiglu_backward_kernel<T>)(static_cast<const T*>(grad), static_cast<const T*>(gate),
                                                                      static_cast<const T*>(up), static_cast<T*>(dgate),
                                                                      static_cast<T*>(dup), n);
    check_launch("swiglu_backward");
  });
}

void launch_attention_softmax(DType t, const void* scores, const void* slopes, void* probs, int64_t bh, int64_t h, int64_t nq, int64_t nk,
                              double scale, int64_t offset) {
  const int64_t rows = bh * nq;
  if (rows == 0 || nk == 0) return;
  dispatch_real(t, "attention_softmax", [&]<class T>() {
    PHASOR_LAUNCH(row_grid(rows, "attention_softmax"), row_threads(nk), 0, stream(), attention_softmax_kernel<T>)(
        static_cast<const T*>(scores), static_cast<const T*>(slopes), static_cast<T*>(probs), h, nq, nk, static_cast<T>(scale), offset);
    check_launch("attention_softmax");
  });
}

void launch_attention_softmax_backward(DType t, const void* grad, const void* probs, void* d, int64_t rows, int64_t nk, double scale) {
  if (rows == 0 || nk == 0) return;
  dispatch_real(t, "attention_softmax_backward", [&]<class T>() {
    PHASOR_LAUNCH(row_grid(rows, "attention_softmax_backward"), row_threads(nk), 0, stream(), attention_softmax_backward_kernel<T>)(
        static_cast<const T*>(grad), static_cast<const T*>(probs), static_cast<T*>(d), nk, static_cast<T>(scale));
    check_launch("attention_softmax_backward");
  });
}

// ---------------------------------------------------------------- the ops (cuda/kernels.h)

void rms_norm(const ops::RmsNormArgs& a) {
  launch_rms_norm(a.x.dtype(), a.x.raw_data(), a.weight.raw_data(), a.out.y.raw_data(), a.out.inv_rms.raw_data(), rows_of(a.x), a.x.size(-1),
                  a.eps);
}

void rms_norm_backward(const ops::RmsNormBackwardArgs& a) {
  launch_rms_norm_backward(a.x.dtype(), a.grad.raw_data(), a.x.raw_data(), a.weight.raw_data(), a.inv_rms.raw_data(), a.out.dx.raw_data(),
                           a.out.dweight.raw_data(), rows_of(a.x), a.x.size(-1));
}

void cross_entropy(const ops::CrossEntropyArgs& a) {
  launch_cross_entropy(a.logits.dtype(), a.logits.raw_data(), a.targets.data<int64_t>(), a.out.logsumexp.raw_data(), a.out.loss.raw_data(),
                       a.out.count.data<double>(), a.logits.size(0), a.logits.size(1), a.ignore_index, a.mean);
}

void cross_entropy_backward(const ops::CrossEntropyBackwardArgs& a) {
  launch_cross_entropy_backward(a.logits.dtype(), a.logits.raw_data(), a.targets.data<int64_t>(), a.logsumexp.raw_data(), a.dlogits.raw_data(),
                                a.logits.size(0), a.logits.size(1), a.ignore_index, a.grad.data<double>(),
                                a.count.defined() ? a.count.data<double>() : nullptr);
}

void swiglu(const ops::SwigluArgs& a) { launch_swiglu(a.gate.dtype(), a.gate.raw_data(), a.up.raw_data(), a.out.raw_data(), a.gate.numel()); }

void swiglu_backward(const ops::SwigluBackwardArgs& a) {
  launch_swiglu_backward(a.gate.dtype(), a.grad.raw_data(), a.gate.raw_data(), a.up.raw_data(), a.out.dgate.raw_data(), a.out.dup.raw_data(),
                         a.gate.numel());
}

void attention_softmax(const ops::AttentionSoftmaxArgs& a) {
  const Tensor& s = a.scores;
  const int64_t b = s.size(0), h = s.size(1), nq = s.size(2), nk = s.size(3);
  launch_attention_softmax(s.dtype(), s.raw_data(), data_or_null(a.slopes), a.probs.raw_data(), b * h, h, nq, nk, a.scale, a.offset);
}

void attention_softmax_backward(const ops::AttentionSoftmaxBackwardArgs& a) {
  const Tensor& p = a.probs;
  launch_attention_softmax_backward(p.dtype(), a.grad.raw_data(), p.raw_data(), a.dscores.raw_data(), rows_of(p), p.dim() ? p.size(-1) : 1,
                                    a.scale);
}

// AdamW on contiguous real arrays (CPU: tensor/cpu/fused.cpp).
void adamw_step(const ops::AdamWArgs& a) {
  const int64_t n = a.param.numel();
  if (n == 0) return;
  const ops::AdamWStep& s = a.step;
  const scalar::AdamWHyper hyper{s.lr, s.weight_decay, s.beta1, s.beta2, s.eps};
  const double* schedule = s.schedule.defined() ? static_cast<const double*>(s.schedule.raw_data()) : nullptr;
  const bool scheduled_lr = s.schedule.defined() && s.schedule.numel() == 4;
  dispatch_real(a.param.dtype(), "AdamW", [&]<class T>() {
    PHASOR_LAUNCH(grid_for(n), kThreads, 0, stream(), adamw_kernel<T>)(
        static_cast<T*>(a.param.raw_data()), static_cast<const T*>(a.grad.raw_data()), static_cast<T*>(a.exp_avg.raw_data()),
        static_cast<T*>(a.exp_avg_sq.raw_data()), n, hyper, s.bias_correction1, s.bias_correction2_sqrt, schedule, scheduled_lr);
    check_launch("adamw_step_");
  });
}

}  // namespace phasor::gpu
