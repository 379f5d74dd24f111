// Fused transformer kernels on CUDA, each forward beside its backward, each
// with the same maths as its CPU reference in tensor/cpu/fused.cpp (read the
// comments there for the derivations). Per-parameter gradients (RMSNorm
// weight, CMHA delta / phase_bias / beta) are reduced per block and then over
// blocks in a fixed order: no atomics, so every run gives the same bits.
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

// ---------------------------------------------------------------- rotary

template <class R>
__device__ inline cplx<R> mul(cplx<R> a, cplx<R> b) {
  return cplx<R>(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

// Kernels over z [B, N, H, P] walk positions (b, m) along blockIdx.x / threadIdx.y and
// the H*P (head, pair) slots of a position along threadIdx.x: coalesced, and the
// index arithmetic is per position, not per element.
struct SlotGrid {
  dim3 grid, block;
};
SlotGrid slot_grid(int64_t positions, int64_t slots) {
  const int bx = static_cast<int>(std::min<int64_t>(256, (slots + 31) / 32 * 32));
  const int by = std::max(1, 256 / bx);
  const int64_t blocks = std::min<int64_t>((positions + by - 1) / by, static_cast<int64_t>(multiprocessors()) * 16);
  return {dim3(static_cast<unsigned>(std::max<int64_t>(blocks, 1))), dim3(bx, by)};
}

template <class R>
__global__ void rotate_kernel(const cplx<R>* z, const cplx<R>* table, cplx<R>* out, int64_t positions, int64_t n, int hp, int p,
                              bool conj) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t pos = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; pos < positions; pos += step) {
    const cplx<R>* t = table + (pos % n) * p;
    const int64_t base = pos * hp;
    for (int slot = threadIdx.x; slot < hp; slot += blockDim.x) {
      cplx<R> w = t[slot % p];
      if (conj) w = cplx<R>(w.real(), -w.imag());
      out[base + slot] = mul(z[base + slot], w);
    }
  }
}

__device__ inline void sin_cos(float x, float* s, float* c) { sincosf(x, s, c); }
__device__ inline void sin_cos(double x, double* s, double* c) { sincos(x, s, c); }

// ---------------------------------------------------------------- ComplexFormer rotation

template <class R>
struct CmhaParamsDev {
  const R* delta;
  const R* bias;  // may be null
  const R* beta;
  const double* w;  // frequencies w_j, double
  int64_t n, h, p, offset;
};

// theta = delta phi + bias + beta m w_j, formed as on the CPU (tensor/scalar_math.h).
template <class R>
__device__ inline R cmha_theta(const CmhaParamsDev<R>& a, int64_t hi, int64_t j, R phi, double pos) {
  const int64_t hj = hi * a.p + j;
  return scalar::cmha_theta(a.delta[hj], phi, a.bias ? a.bias[hj] : R(0), a.beta[hi], scalar::cmha_position_angle<R>(pos, a.w[j]));
}

template <class R>
__global__ void cmha_kernel(const cplx<R>* z, cplx<R>* out, CmhaParamsDev<R> a, int64_t positions) {
  const int p = static_cast<int>(a.p), hp = static_cast<int>(a.h * a.p);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t pos = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; pos < positions; pos += step) {
    const double position = static_cast<double>(a.offset + pos % a.n);
    const int64_t base = pos * hp;
    for (int slot = threadIdx.x; slot < hp; slot += blockDim.x) {
      const int hi = slot / p, j = slot - hi * p;
      const cplx<R> v = z[base + slot];
      const R re = v.real(), im = v.imag();
      const R r = ::cuda::std::sqrt(re * re + im * im + static_cast<R>(ops::kEulerEps));
      const R phi = ::cuda::std::atan2(im, re);
      const R theta = cmha_theta(a, hi, j, phi, position);
      R sn, cs;
      sin_cos(theta, &sn, &cs);
      out[base + slot] = cplx<R>(r * cs, r * sn);
    }
  }
}

// One pass: threadIdx.x walks the H*P (head, pair) slots of a position, threadIdx.y
// positions (batch-major), blockIdx.y a slice of positions. Each thread keeps its
// slot's sums in registers; the block reduces over y in order and writes one
// partial per slot: partial[chunk][0 delta | 1 bias | 2 beta-part][slot].
template <class R>
__global__ void cmha_backward_kernel(const cplx<R>* grad, const cplx<R>* z, cplx<R>* dz, CmhaParamsDev<R> a, int64_t positions,
                                     int64_t per_chunk, double* partial) {
  PHASOR_EXTERN_SHARED(double, shared);
  const int64_t hp = a.h * a.p;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  double acc_delta = 0, acc_bias = 0, acc_beta = 0;
  if (slot < hp) {
    const int64_t hi = slot / a.p, j = slot % a.p;
    const R delta = a.delta[slot];
    const int64_t begin = blockIdx.y * per_chunk;
    const int64_t end = begin + per_chunk < positions ? begin + per_chunk : positions;
    for (int64_t pos_index = begin + threadIdx.y; pos_index < end; pos_index += blockDim.y) {
      const int64_t m = pos_index % a.n;
      const double pos = static_cast<double>(a.offset + m);
      const int64_t e = pos_index * hp + slot;
      const cplx<R> v = z[e], gv = grad[e];
      const R re = v.real(), im = v.imag();
      const R r2 = re * re + im * im + static_cast<R>(ops::kEulerEps);
      const R r = ::cuda::std::sqrt(r2);
      const R phi = ::cuda::std::atan2(im, re);
      const R theta = cmha_theta(a, hi, j, phi, pos);
      R s, c;
      sin_cos(theta, &s, &c);
      const R u_re = gv.real() * c + gv.imag() * s;  // u = conj(G) e^{i theta}
      const R u_im = gv.real() * s - gv.imag() * c;
      const R d_r = u_re, d_theta = -r * u_im;
      const R d_phi = d_theta * delta;
      const R k_re = d_r / r, k_im = d_phi / r2;
      dz[e] = cplx<R>(k_re * re - k_im * im, k_re * im + k_im * re);
      acc_delta += static_cast<double>(d_theta) * phi;
      acc_bias += d_theta;
      acc_beta += static_cast<double>(d_theta * scalar::cmha_position_angle<R>(pos, a.w[j]));
    }
  }
  // Reduce over threadIdx.y in order.
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  double* s_delta = shared;
  double* s_bias = shared + bx * by;
  double* s_beta = shared + 2 * bx * by;
  s_delta[ty * bx + tx] = acc_delta;
  s_bias[ty * bx + tx] = acc_bias;
  s_beta[ty * bx + tx] = acc_beta;
  __syncthreads();
  if (ty == 0 && slot < hp) {
    double d = 0, b = 0, t = 0;
    for (int y = 0; y < by; ++y) {
      d += s_delta[y * bx + tx];
      b += s_bias[y * bx + tx];
      t += s_beta[y * bx + tx];
    }
    double* out = partial + blockIdx.y * 3 * hp;
    out[slot] = d;
    out[hp + slot] = b;
    out[2 * hp + slot] = t;
  }
}

// ddelta and dphase_bias: each slot's partials over chunks, in order.
template <class R>
__global__ void cmha_finish_kernel(const double* partial, int64_t chunks, int64_t hp, R* ddelta, R* dbias) {
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= hp) return;
  double d = 0, b = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    d += partial[c * 3 * hp + slot];
    b += partial[c * 3 * hp + hp + slot];
  }
  ddelta[slot] = static_cast<R>(d);
  if (dbias) dbias[slot] = static_cast<R>(b);
}
// dbeta: one block per head reduces its pairs' beta parts over chunks.
template <class R>
__global__ void cmha_finish_beta_kernel(const double* partial, int64_t chunks, int64_t hp, int64_t p, R* dbeta) {
  const int64_t hi = blockIdx.x;
  double t = 0;
  for (int64_t k = threadIdx.x; k < chunks * p; k += blockDim.x) t += partial[(k / p) * 3 * hp + 2 * hp + hi * p + k % p];
  t = block_sum(t);
  if (threadIdx.x == 0) dbeta[hi] = static_cast<R>(t);
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

// Per-pair frequencies w_j = base^(-2j/d) in double, uploaded once per call.
struct Frequencies {
  Buffer buffer;
  Frequencies(int64_t pairs, double base) : buffer(static_cast<size_t>(std::max<int64_t>(pairs, 1)) * sizeof(double)) {
    std::vector<double> w(static_cast<size_t>(pairs));
    for (int64_t j = 0; j < pairs; ++j) w[j] = scalar::rope_frequency(base, j, pairs);
    copy_to_device(buffer.get(), w.data(), w.size() * sizeof(double));
  }
};

template <class R>
CmhaParamsDev<R> device_params(const CmhaArgs& a, const Frequencies& w) {
  return {static_cast<const R*>(a.delta), static_cast<const R*>(a.bias), static_cast<const R*>(a.beta), w.buffer.as<double>(),
          a.n, a.h, a.p, a.offset};
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

// z [B, N, H, P] complex times table [N, P] (conjugated if asked).
void launch_rotate(DType t, const void* z, const void* table, void* out, int64_t b, int64_t n, int64_t h, int64_t p, bool conj) {
  const int64_t positions = b * n, hp = h * p;
  if (positions * hp == 0) return;
  const SlotGrid g = slot_grid(positions, hp);
  dispatch_cplx(t, "rotate", [&]<class C>() {
    using R = real_t<C>;
    PHASOR_LAUNCH(g.grid, g.block, 0, stream(), rotate_kernel<R>)(static_cast<const C*>(z), static_cast<const C*>(table), static_cast<C*>(out), positions,
                                                       n, static_cast<int>(hp), static_cast<int>(p), conj);
    check_launch("rotate");
  });
}

void launch_cmha_rotate(DType t, const void* z, void* out, const CmhaArgs& a) {
  const int64_t positions = a.b * a.n, hp = a.h * a.p;
  if (positions * hp == 0) return;
  const Frequencies w(a.p, a.rope_base);
  const SlotGrid g = slot_grid(positions, hp);
  dispatch_cplx(t, "cmha_rotate", [&]<class C>() {
    using R = real_t<C>;
    PHASOR_LAUNCH(g.grid, g.block, 0, stream(), cmha_kernel<R>)(static_cast<const C*>(z), static_cast<C*>(out), device_params<R>(a, w), positions);
    check_launch("cmha_rotate");
  });
}

// One pass over (grad, z): dz, and the sums of ddelta, dphase_bias (if bias) and dbeta over
// batch and positions, reduced per block and then over blocks in fixed order.
void launch_cmha_rotate_backward(DType t, const void* grad, const void* z, void* dz, void* ddelta, void* dbias, void* dbeta,
                                 const CmhaArgs& a) {
  const int64_t hp = a.h * a.p, positions = a.b * a.n;
  if (hp == 0) return;
  const Frequencies w(a.p, a.rope_base);
  // Block: up to 128 slots along x, positions along y (256 threads). Enough blocks to
  // fill the GPU, each thread walking at least ~8 positions of its block's slice, so
  // the per-block partials (and the final in-order sums over them) stay few.
  const int bx = static_cast<int>(std::min<int64_t>(128, (hp + 31) / 32 * 32));
  const int by = std::max(1, 256 / bx);
  const int64_t slot_blocks = (hp + bx - 1) / bx;
  const int64_t want = (8 * static_cast<int64_t>(multiprocessors()) + slot_blocks - 1) / slot_blocks;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>({want, (positions + 8 * by - 1) / (8 * by), 65535}));
  const int64_t per_chunk = std::max<int64_t>(1, (positions + chunks - 1) / chunks);
  Buffer partial(static_cast<size_t>(chunks * 3 * hp) * sizeof(double));
  dispatch_cplx(t, "cmha_rotate_backward", [&]<class C>() {
    using R = real_t<C>;
    const size_t shared = static_cast<size_t>(3 * bx * by) * sizeof(double);
    PHASOR_LAUNCH(dim3(static_cast<unsigned>(slot_blocks), static_cast<unsigned>(chunks)), dim3(bx, by), shared, stream(), cmha_backward_kernel<R>)(
        static_cast<const C*>(grad), static_cast<const C*>(z), static_cast<C*>(dz), device_params<R>(a, w), positions, per_chunk,
        partial.as<double>());
    check_launch("cmha_rotate_backward");
    PHASOR_LAUNCH(static_cast<unsigned>((hp + 127) / 128), 128, 0, stream(), cmha_finish_kernel<R>)(partial.as<double>(), chunks, hp, static_cast<R*>(ddelta),
                                                                                        static_cast<R*>(dbias));
    check_launch("cmha_rotate_backward");
    PHASOR_LAUNCH(static_cast<unsigned>(a.h), 256, 0, stream(), cmha_finish_beta_kernel<R>)(partial.as<double>(), chunks, hp, a.p, static_cast<R*>(dbeta));
    check_launch("cmha_rotate_backward");
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

namespace {
CmhaArgs cmha_args(const Tensor& z, const ops::CmhaParams& p) {
  CmhaArgs args;
  args.delta = p.delta.raw_data();
  args.bias = data_or_null(p.phase_bias);
  args.beta = p.beta.raw_data();
  args.b = z.size(0);
  args.n = z.size(1);
  args.h = z.size(2);
  args.p = z.size(3);
  args.offset = p.offset;
  args.rope_base = p.rope_base;
  return args;
}
}  // namespace

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

void rotate(const ops::RotateArgs& a) {
  const Tensor& z = a.z;
  launch_rotate(z.dtype(), z.raw_data(), a.table.raw_data(), a.out.raw_data(), z.size(0), z.size(1), z.size(2), z.size(3), a.conjugate_table);
}

void cmha_rotate(const ops::CmhaRotateArgs& a) { launch_cmha_rotate(a.z.dtype(), a.z.raw_data(), a.out.raw_data(), cmha_args(a.z, a.p)); }

void cmha_rotate_backward(const ops::CmhaRotateBackwardArgs& a) {
  launch_cmha_rotate_backward(a.z.dtype(), a.grad.raw_data(), a.z.raw_data(), a.out.dz.raw_data(), a.out.ddelta.raw_data(),
                              a.out.dphase_bias.defined() ? a.out.dphase_bias.raw_data() : nullptr, a.out.dbeta.raw_data(), cmha_args(a.z, a.p));
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

}  // namespace phasor::gpu
