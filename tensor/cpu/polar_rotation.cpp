// The polar rotation of pope, carope and complexformer-seed (tensor/fused_ops.h,
// "polar rotation"): z [B, N, H, W] turned by angles of its own, one pass each
// way. Work is split over the plane of columns (n, h, c): a thread takes a run
// of them and goes through the batch inside, so an angle shared by the batch
// is turned into (cos, sin) once, and its gradient and the gain's are summed
// over the batch in a fixed order, without atomics. The float32
// loops are compiled for AVX-512, AVX2 and baseline x86-64 (tensor/cpu/simd.h)
// with the vectorisable sincos, tanh and softplus of tensor/fast_math.h.
// CUDA twin: cuda/polar_rotation.cu.
#include <algorithm>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/simd.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"

namespace phasor::cpu {

namespace {

template <class R>
struct PolarJob {
  const R* z;      // [B, N, H, W]: reals, or (re, im) pairs when complex
  const R* angle;  // [A, N, H, W], A = B or 1 (shared)
  const R* gain;   // [H], or null (1)
  const R* grad;   // backward: [B, N, H, W] (re, im) pairs
  R* out;          // forward: [B, N, H, W] (re, im) pairs; backward: dz, like z
  R* dangle;       // backward: like angle
  R* dgain;        // backward: [N, H, W] columns summed over the batch, or null
  int64_t b, n, h, w;
  bool complex_z, shared_angle, softplus, tanh_angle;
};

// The plane of columns (n, h, c), N H W elements, is cut into chunks of
// kChunk consecutive elements (contiguous in z for each batch item): a
// thread takes a run of chunks and runs through the batch inside each, with
// (cos, sin) of a shared angle, the gains and the batch sums in arrays of
// that size on the stack, so the loops are long and vectorise whatever W is.
constexpr int64_t kChunk = 256;

// t = exp(i f(angle)) and f'(angle) for `len` angles.
template <class R, bool kTanh>
[[gnu::always_inline]] inline void turns(const R* angle, int64_t len, R* tc, R* ts, R* df) {
#pragma omp simd
  for (int64_t c = 0; c < len; ++c) {
    R a = angle[c];
    if constexpr (kTanh) {
      a = fastmath::tanh(a);
      df[c] = R(1) - a * a;
    } else {
      df[c] = R(1);
    }
    fastmath::sincos(a, ts[c], tc[c]);
  }
}

// m(z) (mr, mi) and m'(z) of element c.
template <class R, bool kComplex, bool kSoftplus>
[[gnu::always_inline]] inline void magnitude(const R* z, int64_t c, R& mr, R& mi, R& dm) {
  if constexpr (kComplex) {
    mr = z[2 * c];
    mi = z[2 * c + 1];
    dm = R(1);
  } else if constexpr (kSoftplus) {
    fastmath::softplus_sigmoid(z[c], mr, dm);
    mi = R(0);
  } else {
    mr = z[c];
    mi = R(0);
    dm = R(1);
  }
}

// The chunk [e0, e0 + len) of the plane: its gains (1 without).
template <class R>
[[gnu::always_inline]] inline void chunk_gains(const PolarJob<R>& job, int64_t e0, int64_t len, R* gain) {
  if (!job.gain) {
    std::fill(gain, gain + len, R(1));
    return;
  }
  for (int64_t c = 0; c < len; ++c) gain[c] = job.gain[((e0 + c) / job.w) % job.h];
}

template <class R, bool kComplex, bool kSoftplus, bool kTanh>
[[gnu::always_inline]] inline void polar_forward_chunks(const PolarJob<R>& job, int64_t begin, int64_t end) {
  const int64_t plane = job.n * job.h * job.w, zs = kComplex ? 2 : 1;
  alignas(64) R tc[kChunk], ts[kChunk], df[kChunk], gain[kChunk];
  for (int64_t chunk = begin; chunk < end; ++chunk) {
    const int64_t e0 = chunk * kChunk, len = std::min(kChunk, plane - e0);
    chunk_gains(job, e0, len, gain);
    if (job.shared_angle) turns<R, kTanh>(job.angle + e0, len, tc, ts, df);
    for (int64_t bi = 0; bi < job.b; ++bi) {
      const int64_t at = bi * plane + e0;
      if (!job.shared_angle) turns<R, kTanh>(job.angle + at, len, tc, ts, df);
      const R* z = job.z + zs * at;
      R* o = job.out + 2 * at;
#pragma omp simd
      for (int64_t c = 0; c < len; ++c) {
        R mr, mi, dm;
        magnitude<R, kComplex, kSoftplus>(z, c, mr, mi, dm);
        o[2 * c] = gain[c] * (mr * tc[c] - mi * ts[c]);
        o[2 * c + 1] = gain[c] * (mr * ts[c] + mi * tc[c]);
      }
    }
  }
}

template <class R, bool kComplex, bool kSoftplus, bool kTanh>
[[gnu::always_inline]] inline void polar_backward_chunks(const PolarJob<R>& job, int64_t begin, int64_t end) {
  const int64_t plane = job.n * job.h * job.w, zs = kComplex ? 2 : 1;
  alignas(64) R tc[kChunk], ts[kChunk], df[kChunk], gain[kChunk], dangle[kChunk], angle_sum[kChunk], gain_sum[kChunk];
  for (int64_t chunk = begin; chunk < end; ++chunk) {
    const int64_t e0 = chunk * kChunk, len = std::min(kChunk, plane - e0);
    chunk_gains(job, e0, len, gain);
    if (job.shared_angle) turns<R, kTanh>(job.angle + e0, len, tc, ts, df);
    std::fill(angle_sum, angle_sum + len, R(0));
    std::fill(gain_sum, gain_sum + len, R(0));
    for (int64_t bi = 0; bi < job.b; ++bi) {
      const int64_t at = bi * plane + e0;
      if (!job.shared_angle) turns<R, kTanh>(job.angle + at, len, tc, ts, df);
      const R* z = job.z + zs * at;
      const R* g = job.grad + 2 * at;
      R* dz = job.out + zs * at;
#pragma omp simd
      for (int64_t c = 0; c < len; ++c) {
        R mr, mi, dm, dzr, dzi, dgain;
        magnitude<R, kComplex, kSoftplus>(z, c, mr, mi, dm);
        scalar::polar_grads(mr, mi, dm, tc[c], ts[c], df[c], gain[c], g[2 * c], g[2 * c + 1], kComplex, dzr, dzi, dangle[c], dgain);
        if constexpr (kComplex) {
          dz[2 * c] = dzr;
          dz[2 * c + 1] = dzi;
        } else {
          dz[c] = dzr;
        }
        gain_sum[c] += dgain;
      }
      if (job.shared_angle) {
#pragma omp simd
        for (int64_t c = 0; c < len; ++c) angle_sum[c] += dangle[c];
      } else {
        std::copy(dangle, dangle + len, job.dangle + at);
      }
    }
    if (job.shared_angle) std::copy(angle_sum, angle_sum + len, job.dangle + e0);
    if (job.dgain) std::copy(gain_sum, gain_sum + len, job.dgain + e0);
  }
}

template <class R, bool kBackward, bool kComplex, bool kSoftplus, bool kTanh>
[[gnu::always_inline]] inline void polar_kind(const PolarJob<R>& job, int64_t begin, int64_t end) {
  if constexpr (kBackward) polar_backward_chunks<R, kComplex, kSoftplus, kTanh>(job, begin, end);
  else polar_forward_chunks<R, kComplex, kSoftplus, kTanh>(job, begin, end);
}

// The loop for the job's kind: its flags fixed at compile time, so that each
// body vectorises without tests inside (always inlined: into each SIMD clone).
template <class R, bool kBackward>
[[gnu::always_inline]] inline void polar_columns(const PolarJob<R>& job, int64_t begin, int64_t end) {
  if (job.complex_z) {
    if (job.tanh_angle) polar_kind<R, kBackward, true, false, true>(job, begin, end);
    else polar_kind<R, kBackward, true, false, false>(job, begin, end);
  } else if (job.softplus) {
    if (job.tanh_angle) polar_kind<R, kBackward, false, true, true>(job, begin, end);
    else polar_kind<R, kBackward, false, true, false>(job, begin, end);
  } else {
    if (job.tanh_angle) polar_kind<R, kBackward, false, false, true>(job, begin, end);
    else polar_kind<R, kBackward, false, false, false>(job, begin, end);
  }
}
PHASOR_SIMD_CLONES void polar_forward_f32(const PolarJob<float>& job, int64_t begin, int64_t end) {
  polar_columns<float, false>(job, begin, end);
}
PHASOR_SIMD_CLONES void polar_backward_f32(const PolarJob<float>& job, int64_t begin, int64_t end) {
  polar_columns<float, true>(job, begin, end);
}
template <class R>
void polar_best(const PolarJob<R>& job, bool backward, int64_t begin, int64_t end) {
  if (backward) polar_columns<R, true>(job, begin, end);
  else polar_columns<R, false>(job, begin, end);
}
void polar_best(const PolarJob<float>& job, bool backward, int64_t begin, int64_t end) {
  if (backward) polar_backward_f32(job, begin, end);
  else polar_forward_f32(job, begin, end);
}

template <class R>
PolarJob<R> polar_job(const Tensor& z, const ops::PolarParams& p) {
  PolarJob<R> job{};
  job.z = static_cast<const R*>(z.raw_data());
  job.angle = p.angle.data<R>();
  job.gain = p.gain.defined() ? p.gain.data<R>() : nullptr;
  job.b = z.size(0);
  job.n = z.size(1);
  job.h = z.size(2);
  job.w = z.size(3);
  job.complex_z = z.is_complex();
  job.shared_angle = p.angle.size(0) == 1 && job.b != 1;
  job.softplus = p.magnitude == ops::PolarMagnitude::Softplus;
  job.tanh_angle = p.angle_map == ops::PolarAngle::Tanh;
  return job;
}

// The plane's chunks, and the work of the whole, in elements touched, for split_rows's grain.
int64_t polar_chunks(const Tensor& z) { return (z.size(1) * z.size(2) * z.size(3) + kChunk - 1) / kChunk; }
int64_t polar_work(const Tensor& z) { return z.numel() * 8; }

}  // namespace

void CpuBackend::polar_rotate(const ops::PolarRotateArgs& args) {
  const Tensor &z = args.z, &out = args.out;
  dispatch_floating(real_dtype(z.dtype()), "polar_rotate", [&]<class R>() {
    PolarJob<R> job = polar_job<R>(z, args.p);
    job.out = static_cast<R*>(out.raw_data());
    split_rows(polar_chunks(z), polar_work(z), [&](int64_t begin, int64_t end) { polar_best(job, false, begin, end); });
  });
}

void CpuBackend::polar_rotate_backward(const ops::PolarRotateBackwardArgs& args) {
  const Tensor& z = args.z;
  const ops::PolarGrads& out = args.out;
  dispatch_floating(real_dtype(z.dtype()), "polar_rotate_backward", [&]<class R>() {
    PolarJob<R> job = polar_job<R>(z, args.p);
    job.grad = static_cast<const R*>(args.grad.raw_data());
    job.out = static_cast<R*>(out.dz.raw_data());
    job.dangle = out.dangle.data<R>();
    job.dgain = out.dgain.defined() ? out.dgain.data<R>() : nullptr;
    split_rows(polar_chunks(z), polar_work(z), [&](int64_t begin, int64_t end) { polar_best(job, true, begin, end); });
  });
}

}  // namespace phasor::cpu
