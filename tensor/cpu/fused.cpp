// Fused transformer CPU kernels: one pass over memory where the composed ops
// would take several (the rotations are in rotation.cpp). Rows are
// independent and split across OpenMP threads; per-parameter reductions
// accumulate per thread (thread_sums.h), so results are deterministic for a
// given thread count. CUDA twin: cuda/fused.cu.
#include <omp.h>

#include <cmath>
#include <limits>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/simd.h"
#include "tensor/cpu/thread_sums.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

namespace {
bool threaded(int64_t work) { return work > kParallelGrain; }

}  // namespace

// ---------------------------------------------------------------- RMSNorm

namespace {
template <class T>
struct RmsNormJob {
  const T *x, *w, *g, *inv_rms;  // g and a filled inv_rms: backward only
  T *y, *out_inv_rms, *dx;       // y, out_inv_rms: forward; dx: backward
  int64_t d;
  double eps;
};

template <class T>
[[gnu::always_inline]] inline void rms_norm_rows(const RmsNormJob<T>& job, int64_t begin, int64_t end) {
  const int64_t d = job.d;
  for (int64_t row = begin; row < end; ++row) {
    const T* xr = job.x + row * d;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const T inv = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(d) + job.eps));
    job.out_inv_rms[row] = inv;
    T* yr = job.y + row * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * job.w[i];
  }
}
PHASOR_SIMD_CLONES void rms_norm_rows_f32(const RmsNormJob<float>& job, int64_t begin, int64_t end) { rms_norm_rows(job, begin, end); }
template <class T>
void rms_norm_best(const RmsNormJob<T>& job, int64_t begin, int64_t end) {
  rms_norm_rows(job, begin, end);
}
void rms_norm_best(const RmsNormJob<float>& job, int64_t begin, int64_t end) { rms_norm_rows_f32(job, begin, end); }

// With u = g w and r = inv_rms: dx = r u - r^3 x mean(u x), dw = sum_rows g x r (into acc, this thread's sums).
template <class T>
[[gnu::always_inline]] inline void rms_norm_backward_rows(const RmsNormJob<T>& job, int64_t begin, int64_t end, double* acc) {
  const int64_t d = job.d;
  for (int64_t row = begin; row < end; ++row) {
    const T *gr = job.g + row * d, *xr = job.x + row * d;
    const double inv = job.inv_rms[row];
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < d; ++i) {
      dot += static_cast<double>(gr[i]) * job.w[i] * xr[i];
      acc[i] += static_cast<double>(gr[i]) * xr[i] * inv;
    }
    const T a = static_cast<T>(inv), b = static_cast<T>(inv * inv * inv * dot / static_cast<double>(d));
    T* dxr = job.dx + row * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) dxr[i] = a * gr[i] * job.w[i] - b * xr[i];
  }
}
PHASOR_SIMD_CLONES void rms_norm_backward_rows_f32(const RmsNormJob<float>& job, int64_t begin, int64_t end, double* acc) {
  rms_norm_backward_rows(job, begin, end, acc);
}
template <class T>
void rms_norm_backward_best(const RmsNormJob<T>& job, int64_t begin, int64_t end, double* acc) {
  rms_norm_backward_rows(job, begin, end, acc);
}
void rms_norm_backward_best(const RmsNormJob<float>& job, int64_t begin, int64_t end, double* acc) {
  rms_norm_backward_rows_f32(job, begin, end, acc);
}
}  // namespace

void CpuBackend::rms_norm(const ops::RmsNormArgs& args) {
  const ops::RmsNormResult& r = args.out;
  const Tensor &x = args.x, &w = args.weight;
  const double eps = args.eps;
  const int64_t d = x.size(-1), rows = rows_of(x);
  dispatch_floating(x.dtype(), "rms_norm", [&]<class T>() {
    const RmsNormJob<T> job{x.data<T>(), w.data<T>(), nullptr, nullptr, r.y.data<T>(), r.inv_rms.data<T>(), nullptr, d, eps};
    split_rows(rows, rows * d, [&](int64_t begin, int64_t end) { rms_norm_best(job, begin, end); });
  });
}

void CpuBackend::rms_norm_backward(const ops::RmsNormBackwardArgs& args) {
  const ops::RmsNormGrads& out = args.out;
  const Tensor &g = args.grad, &x = args.x, &w = args.weight, &r = args.inv_rms;
  const int64_t d = x.size(-1), rows = rows_of(x);
  ThreadSums dw(d);
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<class T>() {
    const RmsNormJob<T> job{x.data<T>(), w.data<T>(), g.data<T>(), r.data<T>(), nullptr, nullptr, out.dx.data<T>(), d, 0.0};
    split_rows(rows, rows * d, [&](int64_t begin, int64_t end) { rms_norm_backward_best(job, begin, end, dw.mine()); });
    dw.total_into(out.dweight.data<T>());
  });
}

// ---------------------------------------------------------------- cross-entropy

namespace {

// A row's log-sum-exp. float32 takes fastmath's vectorised exp (a few ulps)
// and sums in float32: at most v terms in (0, 1], so the sum keeps about 7
// digits, well past what a float32 loss holds; float64 keeps libm and a
// float64 sum, for the gradchecks. Scalar libm exp was 4% of a training
// step's samples on the small model.
PHASOR_SIMD_CLONES double logsumexp_row_f32(const float* row, int64_t v) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < v; ++j) m = row[j] > m ? row[j] : m;
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < v; ++j) s += fastmath::exp(row[j] - m);
  return static_cast<double>(m) + std::log(static_cast<double>(s));
}
double logsumexp_row(const float* row, int64_t v) { return logsumexp_row_f32(row, v); }
double logsumexp_row(const double* row, int64_t v) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < v; ++j) m = row[j] > m ? row[j] : m;
  double s = 0;
  for (int64_t j = 0; j < v; ++j) s += std::exp(row[j] - m);
  return m + std::log(s);
}

// out = g softmax(row), the softmax from the row's log-sum-exp.
PHASOR_SIMD_CLONES void softmax_times_f32(const float* row, float lse, float g, float* out, int64_t v) {
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) out[j] = g * fastmath::exp(row[j] - lse);
}
void softmax_times(const float* row, float lse, float g, float* out, int64_t v) { softmax_times_f32(row, lse, g, out, v); }
void softmax_times(const double* row, double lse, double g, double* out, int64_t v) {
  for (int64_t j = 0; j < v; ++j) out[j] = g * std::exp(row[j] - lse);
}

}  // namespace

void CpuBackend::cross_entropy(const ops::CrossEntropyArgs& args) {
  const ops::CrossEntropyResult& r = args.out;
  const Tensor &logits = args.logits, &targets = args.targets;
  const int64_t ignore_index = args.ignore_index;
  const bool mean = args.mean;
  const int64_t rows = logits.size(0), v = logits.size(1);
  const int64_t* pt = targets.data<int64_t>();
  int64_t count = 0;  // the rows counted; every other target must be a class
  for (int64_t i = 0; i < rows; ++i) {
    if (pt[i] == ignore_index) continue;
    PHASOR_CHECK(pt[i] >= 0 && pt[i] < v, "cross_entropy: target ", pt[i], " at row ", i, " is outside [0, ", v, ")");
    ++count;
  }
  *r.count.data<double>() = static_cast<double>(count);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* pl = logits.data<T>();
    T* plse = r.logsumexp.data<T>();
    double total = 0;
#pragma omp parallel for reduction(+ : total) if (threaded(rows * v))
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = pl + i * v;
      const double lse = logsumexp_row(row, v);
      plse[i] = static_cast<T>(lse);
      if (pt[i] != ignore_index) total += lse - static_cast<double>(row[pt[i]]);
    }
    const double denom = mean ? static_cast<double>(std::max<int64_t>(count, 1)) : 1.0;
    *r.loss.data<T>() = count ? static_cast<T>(total / denom) : mean ? std::numeric_limits<T>::quiet_NaN() : T(0);  // a mean of none: 0/0
  });
}

void CpuBackend::cross_entropy_backward(const ops::CrossEntropyBackwardArgs& args) {
  const Tensor &d = args.dlogits, &logits = args.logits, &targets = args.targets, &lse = args.logsumexp;
  const double scale = args.count.defined() ? 1.0 / std::max(*args.count.data<double>(), 1.0) : 1.0;
  const double grad = *args.grad.data<double>() * scale;
  const int64_t ignore_index = args.ignore_index;
  const int64_t rows = logits.size(0), v = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    const T *pl = logits.data<T>(), *plse = lse.data<T>();
    const int64_t* pt = targets.data<int64_t>();
    T* pd = d.data<T>();
    const T g = static_cast<T>(grad);
#pragma omp parallel for if (threaded(rows * v))
    for (int64_t i = 0; i < rows; ++i) {
      T* out = pd + i * v;
      if (pt[i] == ignore_index) {
        for (int64_t j = 0; j < v; ++j) out[j] = T(0);
        continue;
      }
      softmax_times(pl + i * v, plse[i], g, out, v);
      out[pt[i]] -= g;
    }
  });
}

// ---------------------------------------------------------------- SwiGLU

namespace {
template <class T>
[[gnu::always_inline]] inline T sigmoid_of(T a) {
  return T(1) / (T(1) + fastmath::exp(-a));
}
template <class T>
[[gnu::always_inline]] inline void swiglu_block(const T* gate, const T* up, T* out, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) out[i] = scalar::swiglu_value(gate[i], up[i], sigmoid_of(gate[i]));
}
PHASOR_SIMD_CLONES void swiglu_block_f32(const float* gate, const float* up, float* out, int64_t begin, int64_t end) {
  swiglu_block(gate, up, out, begin, end);
}
template <class T>
[[gnu::always_inline]] inline void swiglu_backward_block(const T* g, const T* gate, const T* up, T* dgate, T* dup, int64_t begin,
                                                         int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) scalar::swiglu_grads(gate[i], up[i], sigmoid_of(gate[i]), g[i], dgate[i], dup[i]);
}
PHASOR_SIMD_CLONES void swiglu_backward_block_f32(const float* g, const float* gate, const float* up, float* dgate, float* dup,
                                                  int64_t begin, int64_t end) {
  swiglu_backward_block(g, gate, up, dgate, dup, begin, end);
}
}  // namespace

void CpuBackend::swiglu(const ops::SwigluArgs& args) {
  const Tensor &out = args.out, &gate = args.gate, &up = args.up;
  dispatch_floating(gate.dtype(), "swiglu", [&]<class T>() {
    const T *pg = gate.data<T>(), *pu = up.data<T>();
    T* po = out.data<T>();
    split_rows(gate.numel(), gate.numel() * 4, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) swiglu_block_f32(pg, pu, po, begin, end);
      else swiglu_block<T>(pg, pu, po, begin, end);
    });
  });
}

void CpuBackend::swiglu_backward(const ops::SwigluBackwardArgs& args) {
  const ops::SwigluGrads& out = args.out;
  const Tensor &grad = args.grad, &gate = args.gate, &up = args.up;
  dispatch_floating(gate.dtype(), "swiglu_backward", [&]<class T>() {
    const T *pgrad = grad.data<T>(), *pg = gate.data<T>(), *pu = up.data<T>();
    T *pdg = out.dgate.data<T>(), *pdu = out.dup.data<T>();
    split_rows(gate.numel(), gate.numel() * 4, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) swiglu_backward_block_f32(pgrad, pg, pu, pdg, pdu, begin, end);
      else swiglu_backward_block(pgrad, pg, pu, pdg, pdu, begin, end);
    });
  });
}

// ---------------------------------------------------------------- attention softmax

void CpuBackend::attention_softmax(const ops::AttentionSoftmaxArgs& args) {
  const Tensor &probs = args.probs, &scores = args.scores, &slopes = args.slopes;
  const double scale = args.scale;
  const int64_t offset = args.offset;
  const int64_t b = scores.size(0), h = scores.size(1), nq = scores.size(2), nk = scores.size(3);
  dispatch_floating(scores.dtype(), "attention_softmax", [&]<class T>() {
    const T* ps = scores.data<T>();
    const T* pslope = slopes.defined() ? slopes.data<T>() : nullptr;
    T* pp = probs.data<T>();
    const T sc = static_cast<T>(scale);
#pragma omp parallel for collapse(2) if (threaded(scores.numel()))
    for (int64_t bh = 0; bh < b * h; ++bh)
      for (int64_t m = 0; m < nq; ++m) {
        const T* row = ps + (bh * nq + m) * nk;
        T* out = pp + (bh * nq + m) * nk;
        const int64_t visible = std::min(nk, std::max<int64_t>(0, m + offset + 1));  // keys n <= m + offset
        const T slope = pslope ? pslope[bh % h] : T(0);
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t k = 0; k < visible; ++k) {
          out[k] = sc * row[k] - slope * static_cast<T>(m + offset - k);
          mx = out[k] > mx ? out[k] : mx;
        }
        double sum = 0;
        for (int64_t k = 0; k < visible; ++k) sum += (out[k] = std::exp(out[k] - mx));
        const T inv = visible ? static_cast<T>(1.0 / sum) : T(0);
        for (int64_t k = 0; k < visible; ++k) out[k] *= inv;
        for (int64_t k = visible; k < nk; ++k) out[k] = T(0);
      }
  });
}

void CpuBackend::attention_softmax_backward(const ops::AttentionSoftmaxBackwardArgs& args) {
  const Tensor &d = args.dscores, &grad = args.grad, &probs = args.probs;
  const double scale = args.scale;
  const int64_t nk = probs.size(-1), rows = rows_of(probs);
  dispatch_floating(probs.dtype(), "attention_softmax_backward", [&]<class T>() {
    const T *pg = grad.data<T>(), *pp = probs.data<T>();
    T* pd = d.data<T>();
    const T sc = static_cast<T>(scale);
#pragma omp parallel for if (threaded(probs.numel()))
    for (int64_t r = 0; r < rows; ++r) {
      const T *g = pg + r * nk, *y = pp + r * nk;
      double dot = 0;
      for (int64_t k = 0; k < nk; ++k) dot += static_cast<double>(g[k]) * y[k];
      const T dt = static_cast<T>(dot);
      T* out = pd + r * nk;
      for (int64_t k = 0; k < nk; ++k) out[k] = sc * y[k] * (g[k] - dt);
    }
  });
}

// ---------------------------------------------------------------- AdamW

void CpuBackend::adamw_step(const ops::AdamWArgs& args) {
  const Tensor &param = args.param, &grad = args.grad, &exp_avg = args.exp_avg, &exp_avg_sq = args.exp_avg_sq;
  const ops::AdamWStep& s = args.step;
  double bc1 = s.bias_correction1, bc2_sqrt = s.bias_correction2_sqrt;
  if (!scalar::scheduled_corrections(s.schedule.defined() ? s.schedule.data<double>() : nullptr, bc1, bc2_sqrt)) return;
  const scalar::AdamWHyper hyper{s.lr, s.weight_decay, s.beta1, s.beta2, s.eps};
  dispatch_floating(param.dtype(), "AdamW", [&]<class T>() {
    const scalar::AdamWConstants<T> c = hyper.constants<T>(bc1, bc2_sqrt);
    T *pp = param.data<T>(), *pm = exp_avg.data<T>(), *pv = exp_avg_sq.data<T>();
    const T* pg = grad.data<T>();
    const int64_t n = param.numel();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) scalar::adamw_update(pp[i], pg[i], pm[i], pv[i], c);
  });
}

}  // namespace phasor::cpu
