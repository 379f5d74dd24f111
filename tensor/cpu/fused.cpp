// Fused transformer CPU kernels: one pass over memory where the composed ops
// would take several. Rows are independent and split across OpenMP threads;
// per-parameter reductions (RMSNorm weight, CMHA delta / phase_bias / beta)
// accumulate per thread and are summed once at the end, in thread order, so
// results are deterministic for a given thread count. CUDA twin: cuda/fused.cu.
#include <omp.h>

#include <cmath>
#include <limits>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

using ops::kEulerEps;

namespace {
int64_t rows_of(const Tensor& x) { return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1; }

// Per-thread accumulators of `n` values in double, summed at the end.
class ThreadSums {
 public:
  explicit ThreadSums(int64_t n) : n_(n), sums_(static_cast<size_t>(n * omp_get_max_threads()), 0.0) {}
  double* mine() { return sums_.data() + static_cast<size_t>(n_ * omp_get_thread_num()); }
  template <class T>
  void total_into(T* out) const {
    for (int64_t i = 0; i < n_; ++i) {
      double s = 0;
      for (size_t t = 0; t < sums_.size() / static_cast<size_t>(std::max<int64_t>(n_, 1)); ++t) s += sums_[t * n_ + i];
      out[i] = static_cast<T>(s);
    }
  }

 private:
  int64_t n_;
  std::vector<double> sums_;
};

bool threaded(int64_t work) { return work > kParallelGrain; }

// Per-pair frequencies w_j, in double.
std::vector<double> frequencies(int64_t pairs, double base) {
  std::vector<double> w(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j) w[j] = std::pow(base, -2.0 * static_cast<double>(j) / (2.0 * static_cast<double>(pairs)));
  return w;
}
// The largest |theta| a CMHA call can form: |delta| pi + |phase_bias| + |beta| m w_0
// at its farthest position. Past fastmath's exact range (about 65,000
// positions at beta = 1.5) the kernels take libm's sincos in double instead.
template <class R>
bool needs_wide_sincos(const ops::CmhaParams& p, int64_t n) {
  auto largest = [](const Tensor& t) {
    double m = 0;
    if (t.defined())
      for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(t.data<R>()[i])));
    return m;
  };
  const double farthest = std::max(std::abs(static_cast<double>(p.offset)), std::abs(static_cast<double>(p.offset + n - 1)));
  const double bound = largest(p.delta) * M_PI + largest(p.phase_bias) + largest(p.beta) * farthest;  // w_0 = 1
  return bound > static_cast<double>(fastmath::kSincosExactRange);
}

template <bool kWide, class R>
inline void phase_sincos(R theta, R& s, R& c) {
  if constexpr (kWide) {
    s = static_cast<R>(std::sin(static_cast<double>(theta)));
    c = static_cast<R>(std::cos(static_cast<double>(theta)));
  } else {
    fastmath::sincos(theta, s, c);
  }
}

}  // namespace

// ---------------------------------------------------------------- RMSNorm

void CpuBackend::rms_norm(const ops::RmsNormResult& r, const Tensor& x, const Tensor& w, double eps) {
  const int64_t d = x.size(-1), rows = rows_of(x);
  dispatch_floating(x.dtype(), "rms_norm", [&]<class T>() {
    const T *px = x.data<T>(), *pw = w.data<T>();
    T *py = r.y.data<T>(), *pr = r.inv_rms.data<T>();
#pragma omp parallel for if (threaded(rows * d))
    for (int64_t row = 0; row < rows; ++row) {
      const T* xr = px + row * d;
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const T inv = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
      pr[row] = inv;
      T* yr = py + row * d;
      for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * pw[i];
    }
  });
}

// With u = g w and r = inv_rms: dx = r u - r^3 x mean(u x), dw = sum_rows g x r.
void CpuBackend::rms_norm_backward(const ops::RmsNormGrads& out, const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& r) {
  const int64_t d = x.size(-1), rows = rows_of(x);
  ThreadSums dw(d);
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<class T>() {
    const T *pg = g.data<T>(), *px = x.data<T>(), *pw = w.data<T>(), *pr = r.data<T>();
    T* pdx = out.dx.data<T>();
#pragma omp parallel if (threaded(rows * d))
    {
      double* acc = dw.mine();
#pragma omp for
      for (int64_t row = 0; row < rows; ++row) {
        const T *gr = pg + row * d, *xr = px + row * d;
        const double inv = pr[row];
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
          dot += static_cast<double>(gr[i]) * pw[i] * xr[i];
          acc[i] += static_cast<double>(gr[i]) * xr[i] * inv;
        }
        const T a = static_cast<T>(inv), b = static_cast<T>(inv * inv * inv * dot / static_cast<double>(d));
        T* dxr = pdx + row * d;
        for (int64_t i = 0; i < d; ++i) dxr[i] = a * gr[i] * pw[i] - b * xr[i];
      }
    }
    dw.total_into(out.dweight.data<T>());
  });
}

// ---------------------------------------------------------------- cross-entropy

int64_t CpuBackend::cross_entropy(const ops::CrossEntropyResult& r, const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                  bool mean) {
  const int64_t rows = logits.size(0), v = logits.size(1);
  const int64_t* pt = targets.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (pt[i] == ignore_index) continue;
    if (pt[i] < 0 || pt[i] >= v) target_out_of_range(pt[i], i, v);
    ++count;
  }
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* pl = logits.data<T>();
    T* plse = r.logsumexp.data<T>();
    double total = 0;
#pragma omp parallel for reduction(+ : total) if (threaded(rows * v))
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = pl + i * v;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < v; ++j) m = row[j] > m ? row[j] : m;
      double s = 0;
      for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(row[j] - m));
      const double lse = static_cast<double>(m) + std::log(s);
      plse[i] = static_cast<T>(lse);
      if (pt[i] != ignore_index) total += lse - static_cast<double>(row[pt[i]]);
    }
    const double denom = mean ? static_cast<double>(std::max<int64_t>(count, 1)) : 1.0;
    *r.loss.data<T>() = static_cast<T>(count ? total / denom : 0.0);
  });
  return count;
}

void CpuBackend::cross_entropy_backward(const Tensor& d, double grad, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                        int64_t ignore_index) {
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
      const T* row = pl + i * v;
      for (int64_t j = 0; j < v; ++j) out[j] = g * std::exp(row[j] - plse[i]);
      out[pt[i]] -= g;
    }
  });
}

// ---------------------------------------------------------------- rotary

void CpuBackend::rotate(const Tensor& out, const Tensor& z, const Tensor& table, bool conjugate_table) {
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  dispatch_inexact(z.dtype(), "rotate", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      const C *pz = z.data<C>(), *pt = table.data<C>();
      C* po = out.data<C>();
#pragma omp parallel for collapse(2) if (threaded(z.numel()))
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t m = 0; m < n; ++m) {
          const C* t = pt + m * pairs;
          for (int64_t hi = 0; hi < h; ++hi) {
            const int64_t base = ((bi * n + m) * h + hi) * pairs;
            for (int64_t j = 0; j < pairs; ++j) po[base + j] = pz[base + j] * (conjugate_table ? std::conj(t[j]) : t[j]);
          }
        }
    }
  });
}

// ---------------------------------------------------------------- ComplexFormer rotation

void CpuBackend::cmha_rotate(const Tensor& out, const Tensor& z, const ops::CmhaParams& p) {
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  const std::vector<double> w = frequencies(pairs, p.rope_base);
  dispatch_inexact(z.dtype(), "cmha_rotate", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const std::vector<R> no_bias(static_cast<size_t>(pairs), R(0));  // keys: no phase bias
      const C* pz = z.data<C>();
      const R *pd = p.delta.data<R>(), *pbeta = p.beta.data<R>(), *pbias = p.phase_bias.defined() ? p.phase_bias.data<R>() : nullptr;
      C* po = out.data<C>();
      auto rotate_all = [&]<bool kWide>() {
#pragma omp parallel for collapse(2) if (threaded(z.numel() * 8))
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t m = 0; m < n; ++m) {
          const double pos = static_cast<double>(p.offset + m);
          for (int64_t hi = 0; hi < h; ++hi) {
            const int64_t base = ((bi * n + m) * h + hi) * pairs;
            // Interleaved (re, im) as plain reals so the pair loop vectorises.
            const R* zin = reinterpret_cast<const R*>(pz + base);
            R* zout = reinterpret_cast<R*>(po + base);
            const R* delta = pd + hi * pairs;
            const R* bias = pbias ? pbias + hi * pairs : no_bias.data();
            const R beta = pbeta[hi];
            const double* wd = w.data();
#pragma omp simd
            for (int64_t j = 0; j < pairs; ++j) {
              const R re = zin[2 * j], im = zin[2 * j + 1];
              const R r = std::sqrt(re * re + im * im + static_cast<R>(kEulerEps));
              const R phi = fastmath::atan2(im, re);
              const R theta = scalar::cmha_theta(delta[j], phi, bias[j], beta, scalar::cmha_position_angle<R>(pos, wd[j]));
              R s, c;
              phase_sincos<kWide>(theta, s, c);
              zout[2 * j] = r * c;
              zout[2 * j + 1] = r * s;
            }
          }
        }
      };
      if (needs_wide_sincos<R>(p, n)) rotate_all.template operator()<true>();
      else rotate_all.template operator()<false>();
    }
  });
}

// out = r e^{i theta}. With u = conj(G) e^{i theta}: dL/dr = Re u, dL/dtheta = -r Im u.
// theta = delta phi + bias + beta m w: dL/ddelta += dL/dtheta phi, dL/dbias += dL/dtheta,
// dL/dbeta += dL/dtheta m w, dL/dphi = dL/dtheta delta. Then, with the spec's
// regularised derivatives dr/dz = z/r and dphi/d(x, y) = (-y, x)/r^2:
//   G_z = (dL/dr / r + i dL/dphi / r^2) z.
void CpuBackend::cmha_rotate_backward(const ops::CmhaGrads& out, const Tensor& g, const Tensor& z, const ops::CmhaParams& p) {
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  const std::vector<double> w = frequencies(pairs, p.rope_base);
  // Per-thread sums: [delta (h*pairs) | bias (h*pairs) | beta (h)].
  ThreadSums sums(2 * h * pairs + h);
  dispatch_inexact(z.dtype(), "cmha_rotate_backward", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const std::vector<R> no_bias(static_cast<size_t>(pairs), R(0));
      const C *pz = z.data<C>(), *pg = g.data<C>();
      const R *pd = p.delta.data<R>(), *pbeta = p.beta.data<R>(), *pbias = p.phase_bias.defined() ? p.phase_bias.data<R>() : nullptr;
      C* pdz = out.dz.data<C>();
      auto backward_all = [&]<bool kWide>() {
#pragma omp parallel if (threaded(z.numel() * 8))
      {
        double* acc = sums.mine();
        double* acc_delta = acc;
        double* acc_bias = acc + h * pairs;
        double* acc_beta = acc + 2 * h * pairs;
#pragma omp for collapse(2)
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t m = 0; m < n; ++m) {
            const double pos = static_cast<double>(p.offset + m);
            for (int64_t hi = 0; hi < h; ++hi) {
              const int64_t base = ((bi * n + m) * h + hi) * pairs;
              const R* zin = reinterpret_cast<const R*>(pz + base);
              const R* gin = reinterpret_cast<const R*>(pg + base);
              R* dz = reinterpret_cast<R*>(pdz + base);
              const R* delta = pd + hi * pairs;
              const R* bias = pbias ? pbias + hi * pairs : no_bias.data();
              double* ad = acc_delta + hi * pairs;
              double* ab = acc_bias + hi * pairs;
              const R beta = pbeta[hi];
              const double* wd = w.data();
              R beta_sum = 0;
#pragma omp simd reduction(+ : beta_sum)
              for (int64_t j = 0; j < pairs; ++j) {
                const R re = zin[2 * j], im = zin[2 * j + 1], g_re = gin[2 * j], g_im = gin[2 * j + 1];
                const R r2 = re * re + im * im + static_cast<R>(kEulerEps);
                const R r = std::sqrt(r2);
                const R phi = fastmath::atan2(im, re);
                const R mw = scalar::cmha_position_angle<R>(pos, wd[j]);
                const R theta = scalar::cmha_theta(delta[j], phi, bias[j], beta, mw);
                R s, c;
                phase_sincos<kWide>(theta, s, c);
                // u = conj(G) (c + i s)
                const R u_re = g_re * c + g_im * s;
                const R u_im = g_re * s - g_im * c;
                const R d_r = u_re, d_theta = -r * u_im;
                const R d_phi = d_theta * delta[j];
                const R k_re = d_r / r, k_im = d_phi / r2;
                dz[2 * j] = k_re * re - k_im * im;
                dz[2 * j + 1] = k_re * im + k_im * re;
                ad[j] += static_cast<double>(d_theta * phi);
                ab[j] += static_cast<double>(d_theta);
                beta_sum += d_theta * mw;
              }
              acc_beta[hi] += beta_sum;
            }
          }
      }
      };
      if (needs_wide_sincos<R>(p, n)) backward_all.template operator()<true>();
      else backward_all.template operator()<false>();
      std::vector<double> total(static_cast<size_t>(2 * h * pairs + h));
      sums.total_into(total.data());
      R* odelta = out.ddelta.data<R>();
      R* obeta = out.dbeta.data<R>();
      for (int64_t i = 0; i < h * pairs; ++i) odelta[i] = static_cast<R>(total[i]);
      if (out.dphase_bias.defined()) {
        R* obias = out.dphase_bias.data<R>();
        for (int64_t i = 0; i < h * pairs; ++i) obias[i] = static_cast<R>(total[h * pairs + i]);
      }
      for (int64_t i = 0; i < h; ++i) obeta[i] = static_cast<R>(total[2 * h * pairs + i]);
    }
  });
}

// ---------------------------------------------------------------- attention softmax

void CpuBackend::attention_softmax(const Tensor& probs, const Tensor& scores, const Tensor& slopes, double scale, int64_t offset) {
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

void CpuBackend::attention_softmax_backward(const Tensor& d, const Tensor& grad, const Tensor& probs, double scale) {
  const int64_t nk = probs.size(-1), rows = probs.numel() / std::max<int64_t>(nk, 1);
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

void CpuBackend::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const ops::AdamWStep& s) {
  dispatch_floating(param.dtype(), "AdamW", [&]<class T>() {
    const scalar::AdamWConstants<T> c{static_cast<T>(1.0 - s.lr * s.weight_decay), static_cast<T>(s.beta1),
                                      static_cast<T>(s.beta2),                     static_cast<T>(1.0 - s.beta1),
                                      static_cast<T>(1.0 - s.beta2),               static_cast<T>(s.eps),
                                      static_cast<T>(s.bias_correction2_sqrt),     static_cast<T>(s.lr / s.bias_correction1)};
    T *pp = param.data<T>(), *pm = exp_avg.data<T>(), *pv = exp_avg_sq.data<T>();
    const T* pg = grad.data<T>();
    const int64_t n = param.numel();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) scalar::adamw_update(pp[i], pg[i], pm[i], pv[i], c);
  });
}

}  // namespace phasor::cpu
