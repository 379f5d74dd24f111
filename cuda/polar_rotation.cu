// The polar rotation of pope, carope and complexformer-seed on CUDA
// (tensor/fused_ops.h, "polar rotation"), with the maths of its CPU reference,
// tensor/cpu/polar_rotation.cpp. One thread per column element (n, h, c)
// runs through the batch: an angle shared by the batch is turned once, and
// the angle's and the gain's gradients are summed over the batch in the
// thread, in batch order: no atomics, the same bits on every run.
#include "cuda/common.cuh"
#include "tensor/scalar_math.h"

namespace phasor::gpu {

namespace {

template <class R>
struct PolarDev {
  const R* z;      // [B, N, H, W]: reals, or (re, im) pairs when complex
  const R* angle;  // [A, N, H, W]
  const R* gain;   // [H] or null
  int64_t b, nh, h, w;
  bool complex_z, shared_angle, softplus, tanh_angle;
};

// f(angle) turned into (cos, sin), and f'(angle).
template <class R>
__device__ inline void turn(const PolarDev<R>& a, R angle, R& tc, R& ts, R& df) {
  if (a.tanh_angle) {
    angle = scalar::math::tanh(angle);
    df = R(1) - angle * angle;
  } else {
    df = R(1);
  }
  tc = scalar::math::cos(angle);
  ts = scalar::math::sin(angle);
}

// m(z) and m'(z) of element i of z.
template <class R>
__device__ inline void magnitude(const PolarDev<R>& a, int64_t i, R& mr, R& mi, R& dm) {
  if (a.complex_z) {
    mr = a.z[2 * i];
    mi = a.z[2 * i + 1];
    dm = R(1);
    return;
  }
  const R x = a.z[i];
  mi = R(0);
  if (a.softplus) {
    const R e = scalar::math::exp(-(x < R(0) ? -x : x));
    mr = (x > R(0) ? x : R(0)) + scalar::math::log1p(e);
    dm = x >= R(0) ? R(1) / (R(1) + e) : e / (R(1) + e);
  } else {
    mr = x;
    dm = R(1);
  }
}

template <class R>
__global__ void polar_kernel(PolarDev<R> a, R* out) {
  const int64_t columns = a.nh * a.w, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < columns; e += step) {
    const R gain = a.gain ? a.gain[(e / a.w) % a.h] : R(1);
    R tc = R(1), ts = R(0), df = R(1);
    if (a.shared_angle) turn(a, a.angle[e], tc, ts, df);
    for (int64_t bi = 0; bi < a.b; ++bi) {
      const int64_t i = bi * columns + e;
      if (!a.shared_angle) turn(a, a.angle[i], tc, ts, df);
      R mr, mi, dm;
      magnitude(a, i, mr, mi, dm);
      out[2 * i] = gain * (mr * tc - mi * ts);
      out[2 * i + 1] = gain * (mr * ts + mi * tc);
    }
  }
}

template <class R>
__global__ void polar_backward_kernel(PolarDev<R> a, const R* grad, R* dz, R* dangle, R* dgain) {
  const int64_t columns = a.nh * a.w, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < columns; e += step) {
    const R gain = a.gain ? a.gain[(e / a.w) % a.h] : R(1);
    R tc = R(1), ts = R(0), df = R(1), angle_sum = R(0), gain_sum = R(0);
    if (a.shared_angle) turn(a, a.angle[e], tc, ts, df);
    for (int64_t bi = 0; bi < a.b; ++bi) {
      const int64_t i = bi * columns + e;
      if (!a.shared_angle) turn(a, a.angle[i], tc, ts, df);
      R mr, mi, dm, dzr, dzi, da, dg;
      magnitude(a, i, mr, mi, dm);
      scalar::polar_grads(mr, mi, dm, tc, ts, df, gain, grad[2 * i], grad[2 * i + 1], a.complex_z, dzr, dzi, da, dg);
      if (a.complex_z) {
        dz[2 * i] = dzr;
        dz[2 * i + 1] = dzi;
      } else {
        dz[i] = dzr;
      }
      if (a.shared_angle) angle_sum += da;
      else dangle[i] = da;
      gain_sum += dg;
    }
    if (a.shared_angle) dangle[e] = angle_sum;
    if (dgain) dgain[e] = gain_sum;
  }
}

template <class R>
PolarDev<R> polar_dev(const Tensor& z, const ops::PolarParams& p) {
  PolarDev<R> a{};
  a.z = static_cast<const R*>(z.raw_data());
  a.angle = static_cast<const R*>(p.angle.raw_data());
  a.gain = static_cast<const R*>(data_or_null(p.gain));
  a.b = z.size(0);
  a.nh = z.size(1) * z.size(2);
  a.h = z.size(2);
  a.w = z.size(3);
  a.complex_z = z.is_complex();
  a.shared_angle = p.angle.size(0) == 1 && a.b != 1;
  a.softplus = p.magnitude == ops::PolarMagnitude::Softplus;
  a.tanh_angle = p.angle_map == ops::PolarAngle::Tanh;
  return a;
}

}  // namespace

void polar_rotate(const ops::PolarRotateArgs& args) {
  const Tensor& z = args.z;
  const int64_t columns = z.size(1) * z.size(2) * z.size(3);
  if (columns * z.size(0) == 0) return;
  dispatch_real(real_dtype(z.dtype()), "polar_rotate", [&]<class R>() {
    PHASOR_LAUNCH(grid_for(columns), kThreads, 0, stream(), polar_kernel<R>)(polar_dev<R>(z, args.p), static_cast<R*>(args.out.raw_data()));
    check_launch("polar_rotate");
  });
}

void polar_rotate_backward(const ops::PolarRotateBackwardArgs& args) {
  const Tensor& z = args.z;
  const ops::PolarGrads& out = args.out;
  const int64_t columns = z.size(1) * z.size(2) * z.size(3);
  if (columns == 0) return;
  dispatch_real(real_dtype(z.dtype()), "polar_rotate_backward", [&]<class R>() {
    PHASOR_LAUNCH(grid_for(columns), kThreads, 0, stream(), polar_backward_kernel<R>)(
        polar_dev<R>(z, args.p), static_cast<const R*>(args.grad.raw_data()), static_cast<R*>(out.dz.raw_data()),
        static_cast<R*>(out.dangle.raw_data()), out.dgain.defined() ? static_cast<R*>(out.dgain.raw_data()) : nullptr);
    check_launch("polar_rotate_backward");
  });
}

}  // namespace phasor::gpu
