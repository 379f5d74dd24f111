// Fused transformer kernels (CPU). Rows are independent and split across
// OpenMP threads; per-parameter reductions (RMSNorm weight, CMHA delta /
// phase_bias / beta) accumulate per thread and are summed once at the end.
#include "tensor/backend.h"
#include "tensor/fused.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "tensor/fast_math.h"
#include "tensor/loop.h"
#include "tensor/ops.h"

namespace phasor::ops {

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

bool threaded(int64_t work) { return work > cpu::kParallelGrain; }
}  // namespace

// ---------------------------------------------------------------- RMSNorm

RmsNormResult rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  if (Backend* b = device_backend("rms_norm", x_in, {weight})) return b->rms_norm(x_in, weight, eps);
  PHASOR_CHECK(x_in.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x_in.size(-1), "rms_norm: weight shape ", weight.shape(),
               " does not match the last dim of input ", x_in.shape());
  PHASOR_CHECK(x_in.dtype() == weight.dtype(), "rms_norm: input dtype ", x_in.dtype(), " differs from weight dtype ", weight.dtype());
  const Tensor x = contiguous(x_in), w = contiguous(weight);
  const int64_t d = x.size(-1), rows = rows_of(x);
  Dims row_shape = x.shape();
  row_shape.erase(row_shape.size() - 1);
  RmsNormResult r{empty(x.shape(), x.dtype()), empty(row_shape, x.dtype())};
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
  return r;
}

// With u = g w and r = inv_rms: dx = r u - r^3 x mean(u x), dw = sum_rows g x r.
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x_in, const Tensor& weight, const Tensor& inv_rms) {
  if (Backend* b = device_backend("rms_norm_backward", grad, {x_in, weight, inv_rms})) return b->rms_norm_backward(grad, x_in, weight, inv_rms);
  const Tensor g = contiguous(grad), x = contiguous(x_in), w = contiguous(weight), r = contiguous(inv_rms);
  const int64_t d = x.size(-1), rows = rows_of(x);
  RmsNormGrads out{empty(x.shape(), x.dtype()), empty(w.shape(), w.dtype())};
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
  return out;
}

// ---------------------------------------------------------------- cross-entropy

CrossEntropyResult cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index, bool mean) {
  if (Backend* b = device_backend("cross_entropy", logits_in, {targets_in})) return b->cross_entropy(logits_in, targets_in, ignore_index, mean);
  PHASOR_CHECK(logits_in.dim() == 2, "cross_entropy: logits must be [rows, classes], got ", logits_in.shape());
  PHASOR_CHECK(targets_in.dtype() == DType::Int64 && targets_in.dim() == 1 && targets_in.size(0) == logits_in.size(0),
               "cross_entropy: targets must be int64 [", logits_in.size(0), "], got ", targets_in.dtype(), " ", targets_in.shape());
  const Tensor logits = contiguous(logits_in), targets = contiguous(targets_in);
  const int64_t rows = logits.size(0), v = logits.size(1);
  const int64_t* pt = targets.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (pt[i] == ignore_index) continue;
    PHASOR_CHECK(pt[i] >= 0 && pt[i] < v, "cross_entropy: target ", pt[i], " at row ", i, " is outside [0, ", v, ")");
    ++count;
  }
  CrossEntropyResult r{empty({}, logits.dtype()), empty({rows}, logits.dtype()), count};
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
  return r;
}

Tensor cross_entropy_backward(double grad, const Tensor& logits_in, const Tensor& targets_in, const Tensor& logsumexp,
                              int64_t ignore_index, double scale) {
  if (Backend* b = device_backend("cross_entropy_backward", logits_in, {targets_in, logsumexp})) return b->cross_entropy_backward(grad, logits_in, targets_in, logsumexp, ignore_index, scale);
  const Tensor logits = contiguous(logits_in), targets = contiguous(targets_in), lse = contiguous(logsumexp);
  const int64_t rows = logits.size(0), v = logits.size(1);
  Tensor d = empty(logits.shape(), logits.dtype());
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    const T *pl = logits.data<T>(), *plse = lse.data<T>();
    const int64_t* pt = targets.data<int64_t>();
    T* pd = d.data<T>();
    const T g = static_cast<T>(grad * scale);
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
  return d;
}

// ---------------------------------------------------------------- rotary

Tensor rotary_table(int64_t n, int64_t pairs, int64_t offset, double base, double xpos_scale_base, int xpos_sign, DType dtype) {
  PHASOR_CHECK(is_complex(dtype), "rotary_table: dtype must be complex, got ", dtype);
  Tensor table = empty({n, pairs}, dtype);
  const double d = 2.0 * static_cast<double>(pairs);
  dispatch_inexact(dtype, "rotary_table", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      C* p = table.data<C>();
      for (int64_t m = 0; m < n; ++m) {
        const double pos = static_cast<double>(offset + m);
        for (int64_t j = 0; j < pairs; ++j) {
          const double w = std::pow(base, -2.0 * static_cast<double>(j) / d);
          double scale = 1.0;
          if (xpos_scale_base > 0) {
            const double zeta = (2.0 * static_cast<double>(j) + 0.4 * d) / (1.4 * d);
            scale = std::pow(zeta, xpos_sign * pos / xpos_scale_base);
          }
          p[m * pairs + j] = C(static_cast<R>(scale * std::cos(pos * w)), static_cast<R>(scale * std::sin(pos * w)));
        }
      }
    }
  });
  return table;
}

Tensor rotate(const Tensor& z_in, const Tensor& table_in, bool conjugate_table) {
  if (Backend* b = device_backend("rotate", z_in, {table_in})) return b->rotate(z_in, table_in, conjugate_table);
  PHASOR_CHECK(z_in.is_complex() && z_in.dim() == 4, "rotate: expected complex [B, N, H, P], got ", z_in.dtype(), " ", z_in.shape());
  PHASOR_CHECK(table_in.dim() == 2 && table_in.size(0) == z_in.size(1) && table_in.size(1) == z_in.size(3),
               "rotate: table shape ", table_in.shape(), " does not match [N, P] of ", z_in.shape());
  const Tensor z = contiguous(z_in), table = to(contiguous(table_in), z_in.dtype());
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  Tensor out = empty(z.shape(), z.dtype());
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
  return out;
}

// ---------------------------------------------------------------- ComplexFormer rotation

namespace {
void check_cmha(const Tensor& z, const CmhaParams& p) {
  PHASOR_CHECK(z.is_complex() && z.dim() == 4, "cmha_rotate: expected complex [B, N, H, P], got ", z.dtype(), " ", z.shape());
  const int64_t h = z.size(2), pairs = z.size(3);
  PHASOR_CHECK(p.delta.shape() == Dims({h, pairs}), "cmha_rotate: delta shape ", p.delta.shape(), " is not [H, P] = [", h, ", ", pairs, "]");
  PHASOR_CHECK(!p.phase_bias.defined() || p.phase_bias.shape() == Dims({h, pairs}), "cmha_rotate: phase_bias shape ",
               p.phase_bias.shape(), " is not [", h, ", ", pairs, "]");
  PHASOR_CHECK(p.beta.shape() == Dims({h}), "cmha_rotate: beta shape ", p.beta.shape(), " is not [", h, "]");
}

// Per-pair frequencies w_j, in double.
std::vector<double> frequencies(int64_t pairs, double base) {
  std::vector<double> w(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j) w[j] = std::pow(base, -2.0 * static_cast<double>(j) / (2.0 * static_cast<double>(pairs)));
  return w;
}

// Parameters as contiguous float arrays in the real dtype of z.
struct CmhaArrays {
  Tensor delta, bias, beta;
};
CmhaArrays arrays(const Tensor& z, const CmhaParams& p) {
  const DType rt = real_dtype(z.dtype());
  return {contiguous(to(p.delta, rt)), p.phase_bias.defined() ? contiguous(to(p.phase_bias, rt)) : Tensor(), contiguous(to(p.beta, rt))};
}
}  // namespace

Tensor cmha_rotate(const Tensor& z_in, const CmhaParams& p) {
  if (Backend* b = device_backend("cmha_rotate", z_in, {p.delta, p.phase_bias, p.beta})) return b->cmha_rotate(z_in, p);
  check_cmha(z_in, p);
  const Tensor z = contiguous(z_in);
  const CmhaArrays a = arrays(z, p);
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  const std::vector<double> w = frequencies(pairs, p.rope_base);
  Tensor out = empty(z.shape(), z.dtype());
  dispatch_inexact(z.dtype(), "cmha_rotate", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const std::vector<R> no_bias(static_cast<size_t>(pairs), R(0));  // keys: no phase bias
      const C* pz = z.data<C>();
      const R *pd = a.delta.data<R>(), *pbeta = a.beta.data<R>(), *pbias = a.bias.defined() ? a.bias.data<R>() : nullptr;
      C* po = out.data<C>();
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
              // Phase in float32 or wider; m w_j is formed in double and rounded once (as the spec's reference does).
              const R theta = delta[j] * phi + bias[j] + beta * static_cast<R>(pos * wd[j]);
              R s, c;
              fastmath::sincos(theta, s, c);
              zout[2 * j] = r * c;
              zout[2 * j + 1] = r * s;
            }
          }
        }
    }
  });
  return out;
}

// out = r e^{i theta}. With u = conj(G) e^{i theta}: dL/dr = Re u, dL/dtheta = -r Im u.
// theta = delta phi + bias + beta m w: dL/ddelta += dL/dtheta phi, dL/dbias += dL/dtheta,
// dL/dbeta += dL/dtheta m w, dL/dphi = dL/dtheta delta. Then, with the spec's
// regularised derivatives dr/dz = z/r and dphi/d(x, y) = (-y, x)/r^2:
//   G_z = (dL/dr / r + i dL/dphi / r^2) z.
CmhaGrads cmha_rotate_backward(const Tensor& grad, const Tensor& z_in, const CmhaParams& p) {
  if (Backend* b = device_backend("cmha_rotate_backward", grad, {z_in, p.delta, p.phase_bias, p.beta})) return b->cmha_rotate_backward(grad, z_in, p);
  check_cmha(z_in, p);
  const Tensor z = contiguous(z_in), g = contiguous(to(grad, z_in.dtype()));
  const CmhaArrays a = arrays(z, p);
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), pairs = z.size(3);
  const std::vector<double> w = frequencies(pairs, p.rope_base);
  const DType rt = real_dtype(z.dtype());
  CmhaGrads out{empty(z.shape(), z.dtype()), empty({h, pairs}, rt), p.phase_bias.defined() ? empty({h, pairs}, rt) : Tensor(),
                empty({h}, rt)};
  // Per-thread sums: [delta (h*pairs) | bias (h*pairs) | beta (h)].
  ThreadSums sums(2 * h * pairs + h);
  dispatch_inexact(z.dtype(), "cmha_rotate_backward", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const std::vector<R> no_bias(static_cast<size_t>(pairs), R(0));
      const C *pz = z.data<C>(), *pg = g.data<C>();
      const R *pd = a.delta.data<R>(), *pbeta = a.beta.data<R>(), *pbias = a.bias.defined() ? a.bias.data<R>() : nullptr;
      C* pdz = out.dz.data<C>();
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
                const R mw = static_cast<R>(pos * wd[j]);
                const R theta = delta[j] * phi + bias[j] + beta * mw;
                R s, c;
                fastmath::sincos(theta, s, c);
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
  return out;
}

// ---------------------------------------------------------------- attention softmax

Tensor attention_softmax(const Tensor& scores_in, double scale, int64_t offset, const Tensor& slopes_in) {
  if (Backend* b = device_backend("attention_softmax", scores_in, {slopes_in})) return b->attention_softmax(scores_in, scale, offset, slopes_in);
  PHASOR_CHECK(scores_in.dim() == 4, "attention_softmax: expected scores [B, H, Nq, Nk], got ", scores_in.shape());
  const Tensor scores = contiguous(scores_in);
  const int64_t b = scores.size(0), h = scores.size(1), nq = scores.size(2), nk = scores.size(3);
  PHASOR_CHECK(!slopes_in.defined() || slopes_in.shape() == Dims({h}), "attention_softmax: slopes shape ", slopes_in.shape(),
               " is not [", h, "]");
  const Tensor slopes = slopes_in.defined() ? contiguous(to(slopes_in, scores.dtype())) : Tensor();
  Tensor probs = empty(scores.shape(), scores.dtype());
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
  return probs;
}

Tensor attention_softmax_backward(const Tensor& grad_in, const Tensor& probs, double scale) {
  if (Backend* b = device_backend("attention_softmax_backward", grad_in, {probs})) return b->attention_softmax_backward(grad_in, probs, scale);
  const Tensor grad = contiguous(grad_in);
  const int64_t nk = probs.size(-1), rows = probs.numel() / std::max<int64_t>(nk, 1);
  Tensor d = empty(probs.shape(), probs.dtype());
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
  return d;
}

}  // namespace phasor::ops
