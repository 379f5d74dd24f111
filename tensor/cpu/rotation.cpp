// The rotary kernels of the position encodings: RoPE / XPos's product with a
// table, and ComplexFormer's Euler transform + adaptive rotation with its
// backward. Each runs over the rows (b, m) of z [B, N, H, P], read as
// interleaved (re, im) reals, one contiguous block of rows per thread; the
// float32 loops are compiled for AVX-512, AVX2 and baseline x86-64
// (tensor/cpu/simd.h), so they run near memory speed instead of one complex
// number at a time.
//
// This file is built with -ffp-contract=off (CMakeLists.txt): the phase must
// round product by product, as the CUDA backend does (scalar::cmha_theta),
// also in the AVX2 / AVX-512 versions, where the compiler would otherwise fuse
// a multiply and an add. CUDA twin: cuda/fused.cu.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/simd.h"
#include "tensor/cpu/thread_sums.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

using ops::kEulerEps;

namespace {

int64_t positions_of(const Tensor& z) { return z.size(0) * z.size(1); }

// ---------------------------------------------------------------- RoPE / XPos

template <class R>
struct RotaryJob {
  const R* z;      // [B * N, H, P] pairs
  const R* table;  // [N, P] pairs
  R* out;
  int64_t n, h, pairs;
  R sign;  // +1, or -1 to multiply by the conjugate table (the backward)
};

template <class R>
[[gnu::always_inline]] inline void rotary_rows(const RotaryJob<R>& job, int64_t begin, int64_t end) {
  const int64_t width = 2 * job.pairs;
  for (int64_t row = begin; row < end; ++row) {
    const R* t = job.table + (row % job.n) * width;
    for (int64_t hi = 0; hi < job.h; ++hi) {
      const R* z = job.z + (row * job.h + hi) * width;
      R* o = job.out + (row * job.h + hi) * width;
#pragma omp simd
      for (int64_t j = 0; j < job.pairs; ++j) {
        const R z_re = z[2 * j], z_im = z[2 * j + 1], t_re = t[2 * j], t_im = job.sign * t[2 * j + 1];
        o[2 * j] = z_re * t_re - z_im * t_im;
        o[2 * j + 1] = z_re * t_im + z_im * t_re;
      }
    }
  }
}
PHASOR_SIMD_CLONES void rotary_rows_f32(const RotaryJob<float>& job, int64_t begin, int64_t end) { rotary_rows(job, begin, end); }
// The best version for R: float32's multi-versioned one, any other inline.
template <class R>
void rotary_best(const RotaryJob<R>& job, int64_t begin, int64_t end) {
  rotary_rows(job, begin, end);
}
void rotary_best(const RotaryJob<float>& job, int64_t begin, int64_t end) { rotary_rows_f32(job, begin, end); }

// ---------------------------------------------------------------- ComplexFormer

// Per-pair frequencies w_j, in double.
std::vector<double> frequencies(int64_t pairs, double base) {
  std::vector<double> w(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j) w[j] = scalar::rope_frequency(base, j, pairs);
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
  double fastest = 1.0;  // w_0 = 1 unless the frequencies are given
  if (p.frequencies.defined())
    for (double w : p.frequencies.to_vector<double>()) fastest = std::max(fastest, std::abs(w));
  const double bound = largest(p.delta) * M_PI + largest(p.phase_bias) + largest(p.beta) * farthest * fastest;
  return bound > static_cast<double>(fastmath::kSincosExactRange);
}

template <bool kWide, class R>
[[gnu::always_inline]] inline void phase_sincos(R theta, R& s, R& c) {
  if constexpr (kWide) {
    s = static_cast<R>(std::sin(static_cast<double>(theta)));
    c = static_cast<R>(std::cos(static_cast<double>(theta)));
  } else {
    fastmath::sincos(theta, s, c);
  }
}

template <class R>
struct CmhaJob {
  const R* z;         // [B * N, H, P] pairs
  const R* grad;      // the same shape; backward only
  R* out;             // the rotated z (forward) or G_z (backward)
  const R* delta;     // [H, P]
  const R* bias;      // [H, P]; zeros for keys
  const R* beta;      // [H, P]: each head's beta repeated over its pairs
  const R* position;  // [N, P]: m w_j, rounded to R once, as the spec's reference does
  int64_t n, h, pairs;
};

// What every CMHA call derives from its parameters before the loop: the
// position angles of its rows (the same for every batch item and head, so
// computed once here instead of once per element), a zero bias for keys, and
// beta laid out like delta, so that the loops below run over a whole row
// (all heads at once) rather than head by head: a head of 8 pairs is shorter
// than one AVX-512 vector, and the compiler leaves such loops scalar.
template <class R>
class CmhaSetup {
 public:
  CmhaSetup(const Tensor& z, const ops::CmhaParams& p)
      : n_(z.size(1)), h_(z.size(2)), pairs_(z.size(3)), wide_(needs_wide_sincos<R>(p, n_)) {
    const std::vector<double> w =
        p.frequencies.defined() ? p.frequencies.to_vector<double>() : frequencies(pairs_, p.rope_base);
    position_.resize(static_cast<size_t>(n_ * pairs_));
    for (int64_t m = 0; m < n_; ++m)
      for (int64_t j = 0; j < pairs_; ++j)
        position_[m * pairs_ + j] = scalar::cmha_position_angle<R>(static_cast<double>(p.offset + m), w[j]);
    if (!p.phase_bias.defined()) no_bias_.assign(static_cast<size_t>(h_ * pairs_), R(0));
    beta_.resize(static_cast<size_t>(h_ * pairs_));
    for (int64_t hi = 0; hi < h_; ++hi)
      for (int64_t j = 0; j < pairs_; ++j) beta_[hi * pairs_ + j] = p.beta.data<R>()[hi];
  }
  CmhaJob<R> job(const Tensor& z, const Tensor& grad, const Tensor& out, const ops::CmhaParams& p) const {
    return {reinterpret_cast<const R*>(z.data<std::complex<R>>()),
            grad.defined() ? reinterpret_cast<const R*>(grad.data<std::complex<R>>()) : nullptr,
            reinterpret_cast<R*>(out.data<std::complex<R>>()),
            p.delta.data<R>(),
            p.phase_bias.defined() ? p.phase_bias.data<R>() : no_bias_.data(),
            beta_.data(),
            position_.data(),
            n_,
            h_,
            pairs_};
  }
  bool wide() const { return wide_; }

 private:
  int64_t n_, h_, pairs_;
  bool wide_;
  std::vector<R> position_, no_bias_, beta_;
};

// One thread's view of a row's position angles, repeated for each head ([H, P]
// like the row), so that the loops over a row index every operand alike.
template <class R>
class RowPositions {
 public:
  explicit RowPositions(const CmhaJob<R>& job) : job_(job), angles_(static_cast<size_t>(job.h * job.pairs)) {}
  const R* of(int64_t row) {
    const R* position = job_.position + (row % job_.n) * job_.pairs;
    for (int64_t hi = 0; hi < job_.h; ++hi)
      std::copy(position, position + job_.pairs, angles_.begin() + hi * job_.pairs);
    return angles_.data();
  }

 private:
  const CmhaJob<R>& job_;
  std::vector<R> angles_;
};

template <class R, bool kWide>
[[gnu::always_inline]] inline void cmha_forward_rows(const CmhaJob<R>& job, int64_t begin, int64_t end) {
  const int64_t hp = job.h * job.pairs;
  const R *delta = job.delta, *bias = job.bias, *beta = job.beta;
  RowPositions<R> positions(job);
  for (int64_t row = begin; row < end; ++row) {
    const R* position = positions.of(row);
    const R* z = job.z + row * 2 * hp;
    R* o = job.out + row * 2 * hp;
#pragma omp simd
    for (int64_t k = 0; k < hp; ++k) {
      const R re = z[2 * k], im = z[2 * k + 1];
      const R r = std::sqrt(re * re + im * im + static_cast<R>(kEulerEps));
      const R phi = fastmath::atan2(im, re);
      const R theta = scalar::cmha_theta(delta[k], phi, bias[k], beta[k], position[k]);
      R s, c;
      phase_sincos<kWide>(theta, s, c);
      o[2 * k] = r * c;
      o[2 * k + 1] = r * s;
    }
  }
}
PHASOR_SIMD_CLONES void cmha_forward_rows_f32(const CmhaJob<float>& job, int64_t begin, int64_t end) {
  cmha_forward_rows<float, false>(job, begin, end);
}
template <class R>
void cmha_forward_best(const CmhaJob<R>& job, int64_t begin, int64_t end) {
  cmha_forward_rows<R, false>(job, begin, end);
}
void cmha_forward_best(const CmhaJob<float>& job, int64_t begin, int64_t end) { cmha_forward_rows_f32(job, begin, end); }

// out = r e^{i theta}. With u = conj(G) e^{i theta}: dL/dr = Re u, dL/dtheta = -r Im u.
// theta = delta phi + bias + beta m w: dL/ddelta += dL/dtheta phi, dL/dbias += dL/dtheta,
// dL/dbeta += dL/dtheta m w, dL/dphi = dL/dtheta delta. Then, with the spec's
// regularised derivatives dr/dz = z/r and dphi/d(x, y) = (-y, x)/r^2:
//   G_z = (dL/dr / r + i dL/dphi / r^2) z.
// acc: this thread's sums, [delta | bias | beta], each [H, P]; beta's are
// summed over each head's pairs once all rows are done.
template <class R, bool kWide>
[[gnu::always_inline]] inline void cmha_backward_rows(const CmhaJob<R>& job, int64_t begin, int64_t end, double* acc) {
  const int64_t hp = job.h * job.pairs;
  const R *delta = job.delta, *bias = job.bias, *beta = job.beta;
  double *acc_delta = acc, *acc_bias = acc + hp, *acc_beta = acc + 2 * hp;
  RowPositions<R> positions(job);
  for (int64_t row = begin; row < end; ++row) {
    const R* position = positions.of(row);
    const R *z = job.z + row * 2 * hp, *g = job.grad + row * 2 * hp;
    R* dz = job.out + row * 2 * hp;
#pragma omp simd
    for (int64_t k = 0; k < hp; ++k) {
      const R re = z[2 * k], im = z[2 * k + 1], g_re = g[2 * k], g_im = g[2 * k + 1];
      const R r2 = re * re + im * im + static_cast<R>(kEulerEps);
      const R r = std::sqrt(r2);
      const R phi = fastmath::atan2(im, re);
      const R theta = scalar::cmha_theta(delta[k], phi, bias[k], beta[k], position[k]);
      R s, c;
      phase_sincos<kWide>(theta, s, c);
      const R u_re = g_re * c + g_im * s;  // u = conj(G) (c + i s)
      const R u_im = g_re * s - g_im * c;
      const R d_r = u_re, d_theta = -r * u_im;
      const R d_phi = d_theta * delta[k];
      const R k_re = d_r / r, k_im = d_phi / r2;
      dz[2 * k] = k_re * re - k_im * im;
      dz[2 * k + 1] = k_re * im + k_im * re;
      acc_delta[k] += static_cast<double>(d_theta * phi);
      acc_bias[k] += static_cast<double>(d_theta);
      acc_beta[k] += static_cast<double>(d_theta * position[k]);
    }
  }
}
PHASOR_SIMD_CLONES void cmha_backward_rows_f32(const CmhaJob<float>& job, int64_t begin, int64_t end, double* acc) {
  cmha_backward_rows<float, false>(job, begin, end, acc);
}
template <class R>
void cmha_backward_best(const CmhaJob<R>& job, int64_t begin, int64_t end, double* acc) {
  cmha_backward_rows<R, false>(job, begin, end, acc);
}
void cmha_backward_best(const CmhaJob<float>& job, int64_t begin, int64_t end, double* acc) { cmha_backward_rows_f32(job, begin, end, acc); }

}  // namespace

void CpuBackend::rotate(const ops::RotateArgs& args) {
  const Tensor &out = args.out, &z = args.z, &table = args.table;
  const bool conjugate_table = args.conjugate_table;
  dispatch_inexact(z.dtype(), "rotate", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const RotaryJob<R> job{reinterpret_cast<const R*>(z.data<C>()), reinterpret_cast<const R*>(table.data<C>()),
                             reinterpret_cast<R*>(out.data<C>()),     z.size(1),
                             z.size(2),                               z.size(3),
                             conjugate_table ? R(-1) : R(1)};
      split_rows(positions_of(z), z.numel(), [&](int64_t begin, int64_t end) { rotary_best(job, begin, end); });
    }
  });
}

void CpuBackend::cmha_rotate(const ops::CmhaRotateArgs& args) {
  const Tensor &out = args.out, &z = args.z;
  const ops::CmhaParams& p = args.p;
  dispatch_inexact(z.dtype(), "cmha_rotate", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const CmhaSetup<R> setup(z, p);
      const CmhaJob<R> job = setup.job(z, Tensor(), out, p);
      split_rows(positions_of(z), z.numel() * 8, [&](int64_t begin, int64_t end) {
        if (setup.wide()) cmha_forward_rows<R, true>(job, begin, end);
        else cmha_forward_best(job, begin, end);
      });
    }
  });
}

void CpuBackend::cmha_rotate_backward(const ops::CmhaRotateBackwardArgs& args) {
  const ops::CmhaGrads& out = args.out;
  const Tensor &g = args.grad, &z = args.z;
  const ops::CmhaParams& p = args.p;
  const int64_t h = z.size(2), pairs = z.size(3);
  ThreadSums sums(3 * h * pairs);
  dispatch_inexact(z.dtype(), "cmha_rotate_backward", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      const CmhaSetup<R> setup(z, p);
      const CmhaJob<R> job = setup.job(z, g, out.dz, p);
      split_rows(positions_of(z), z.numel() * 8, [&](int64_t begin, int64_t end) {
        double* acc = sums.mine();
        if (setup.wide()) cmha_backward_rows<R, true>(job, begin, end, acc);
        else cmha_backward_best(job, begin, end, acc);
      });
      std::vector<double> total(static_cast<size_t>(3 * h * pairs));
      sums.total_into(total.data());
      R* odelta = out.ddelta.data<R>();
      R* obeta = out.dbeta.data<R>();
      for (int64_t i = 0; i < h * pairs; ++i) odelta[i] = static_cast<R>(total[i]);
      if (out.dphase_bias.defined()) {
        R* obias = out.dphase_bias.data<R>();
        for (int64_t i = 0; i < h * pairs; ++i) obias[i] = static_cast<R>(total[h * pairs + i]);
      }
      for (int64_t i = 0; i < h; ++i) {
        double beta_sum = 0;
        for (int64_t j = 0; j < pairs; ++j) beta_sum += total[(2 * h + i) * pairs + j];
        obeta[i] = static_cast<R>(beta_sum);
      }
    }
  });
}

}  // namespace phasor::cpu
