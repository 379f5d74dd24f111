// The rotary kernels on CUDA: RoPE / XPos's product with a table, and the
// ComplexFormer rotation (CMHA) with its backward, each with the maths of its
// CPU twin in tensor/cpu/rotation.cpp (read the comments there for the
// derivations).
//
// They are memory-bound, so each reads its inputs once and writes its outputs
// once (issue #31): z [B, N, H, P] moves 16 bytes an access where the layout
// allows (VectorRows over the H*P (head, pair) slots of a position), the
// small per-slot operands (the table row, the CMHA phase terms) are read once
// per block into shared memory or registers, and the CMHA frequencies are
// computed in-kernel rather than uploaded. Every global access goes through
// cuda/global_memory.cuh, so the simulator counts it (tests/test_sim_traffic.cpp
// holds each op within 1.1x of its minimum). The CMHA parameter gradients are
// reduced per block and then over blocks in a fixed order: no atomics, so
// every run gives the same bits.
#include "cuda/common.cuh"
#include "tensor/scalar_math.h"

namespace phasor::gpu {

namespace {

template <class R>
__device__ inline cplx<R> mul(cplx<R> a, cplx<R> b) {
  return cplx<R>(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

// Threads along a row: a multiple of 32 covering `groups`, 256 at most.
int row_block_x(int groups) { return static_cast<int>(std::min<int64_t>(256, (groups + 31) / 32 * 32)); }

// ---------------------------------------------------------------- RoPE / XPos

// Block m reads table row m (P values) once into shared memory, then turns
// position m of every batch with it: threadIdx.y walks the batches,
// threadIdx.x the slot groups of a position. Read per element, the table
// would cost B*H reads of each value, as much traffic as z itself. Without
// room for a row in shared memory (`cached` false: P past thousands of pairs),
// each element reads its table value from global memory.
template <class C>
__global__ void rotate_kernel(const C* z, const C* table, C* out, VectorRows<C> rows, int64_t b, int64_t n, int p, bool conj, bool cached) {
  PHASOR_EXTERN_SHARED(double, shared);  // one type for every kernel: nvcc declares them all as one array
  C* row = reinterpret_cast<C*>(shared);
  const int64_t m = blockIdx.x;
  const C* t = table + m * p;
  if (cached) {
    const int threads = static_cast<int>(blockDim.x * blockDim.y);
    for (int j = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x); j < p; j += threads) row[j] = load_global(t + j);
    __syncthreads();
  }
  auto entry = [&](int j) {
    const C w = cached ? row[j] : load_global(t + j);
    return conj ? C(w.real(), -w.imag()) : w;
  };
  for (int64_t bi = threadIdx.y; bi < b; bi += blockDim.y) {
    const int64_t base = (bi * n + m) * rows.count;
    for (int g = threadIdx.x; g < rows.groups(); g += blockDim.x)
      rows.visit(g, [&](int slot, auto width) {
        constexpr int W = decltype(width)::value;
        const Vec<C, W> v = load_global_vec<W>(z + base + slot);
        Vec<C, W> o;
        int j = slot % p;
        for (int i = 0; i < W; ++i, j = j + 1 == p ? 0 : j + 1) o.v[i] = mul(v.v[i], entry(j));
        store_global_vec(out + base + slot, o);
      });
  }
}

// ---------------------------------------------------------------- ComplexFormer rotation

template <class R>
struct CmhaParamsDev {
  const R* delta;
  const R* bias;  // may be null
  const R* beta;
  int64_t n, h, p, offset;
  double rope_base;
  const double* frequencies;  // may be null: rope_base^(-2j/d)
};

// The CMHA kernels' grid: a block is a warp of slot groups along x (512
// contiguous bytes an access) by 8 positions along y; blockIdx.x picks the
// block's groups, blockIdx.y a chunk of positions. A chunk holds at least
// kMinChunk positions, so that what a block reads once (its slots' phase
// terms) and the backward's per-chunk partial sums stay a few percent of its
// traffic.
constexpr int kCmhaX = 32, kCmhaY = 8;
constexpr int64_t kMinChunk = 64;
struct CmhaGrid {
  dim3 grid, block;
  int64_t per_chunk;
};
CmhaGrid cmha_grid(int groups, int64_t positions) {
  const int64_t group_blocks = (groups + kCmhaX - 1) / kCmhaX;
  const int64_t fill = (8 * static_cast<int64_t>(multiprocessors()) + group_blocks - 1) / group_blocks;  // blocks to fill the GPU
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>({fill, positions / kMinChunk, 65535}));
  return {dim3(static_cast<unsigned>(group_blocks), static_cast<unsigned>(chunks)), dim3(kCmhaX, kCmhaY), (positions + chunks - 1) / chunks};
}

// One slot's terms of the phase theta = delta phi + bias + beta (m w_j).
template <class R>
struct SlotPhase {
  R delta, bias, beta;
  double w;  // the pair's frequency w_j, in double as on the CPU

  __device__ R position_angle(double m) const { return scalar::cmha_position_angle<R>(m, w); }
  __device__ R theta(R phi, R angle) const { return scalar::cmha_theta(delta, phi, bias, beta, angle); }
};

// The phase terms of the block's slots, read once into shared memory by the
// whole block; `first` is the block's first slot. Every thread calls it.
template <class R>
__device__ const SlotPhase<R>* block_phases(const CmhaParamsDev<R>& a, const VectorRows<cplx<R>>& rows, int& first) {
  PHASOR_SHARED(SlotPhase<R>, phases, kCmhaX * VectorRows<cplx<R>>::kWidth);
  const int g0 = static_cast<int>(blockIdx.x * blockDim.x), g1 = g0 + static_cast<int>(blockDim.x);
  first = rows.first(g0);
  const int count = (g1 < rows.groups() ? rows.first(g1) : rows.count) - first;
  for (int k = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x); k < count; k += static_cast<int>(blockDim.x * blockDim.y)) {
    const int slot = first + k, hi = slot / static_cast<int>(a.p), j = slot - hi * static_cast<int>(a.p);
    phases[k] = SlotPhase<R>{load_global(a.delta + slot), a.bias ? load_global(a.bias + slot) : R(0), load_global(a.beta + hi),
                             a.frequencies ? load_global(a.frequencies + j) : scalar::rope_frequency(a.rope_base, j, a.p)};
  }
  __syncthreads();
  return phases;
}

__device__ inline void sin_cos(float x, float* s, float* c) { sincosf(x, s, c); }
__device__ inline void sin_cos(double x, double* s, double* c) { sincos(x, s, c); }

template <class R>
__device__ inline cplx<R> cmha_value(cplx<R> v, const SlotPhase<R>& s, double position) {
  const R re = v.real(), im = v.imag();
  const R r = ::cuda::std::sqrt(re * re + im * im + static_cast<R>(ops::kEulerEps));
  const R theta = s.theta(::cuda::std::atan2(im, re), s.position_angle(position));
  R sn, cs;
  sin_cos(theta, &sn, &cs);
  return cplx<R>(r * cs, r * sn);
}

// Each thread keeps its group's phase terms in registers and walks the
// positions of its block's chunk.
template <class R>
__global__ void cmha_kernel(const cplx<R>* z, cplx<R>* out, CmhaParamsDev<R> a, VectorRows<cplx<R>> rows, int64_t positions, int64_t per_chunk) {
  int first;
  const SlotPhase<R>* phases = block_phases(a, rows, first);
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= rows.groups()) return;
  const int64_t begin = blockIdx.y * per_chunk, end = begin + per_chunk < positions ? begin + per_chunk : positions;
  rows.visit(g, [&](int slot, auto width) {
    constexpr int W = decltype(width)::value;
    SlotPhase<R> s[W];
    for (int i = 0; i < W; ++i) s[i] = phases[slot - first + i];
    for (int64_t pos = begin + threadIdx.y; pos < end; pos += blockDim.y) {
      const double position = static_cast<double>(a.offset + pos % a.n);
      const int64_t e = pos * rows.count + slot;
      const Vec<cplx<R>, W> v = load_global_vec<W>(z + e);
      Vec<cplx<R>, W> o;
      for (int i = 0; i < W; ++i) o.v[i] = cmha_value(v.v[i], s[i], position);
      store_global_vec(out + e, o);
    }
  });
}

// The parameter-gradient terms of one thread's slots, summed over its positions.
template <int V>
struct PhaseSums {
  double delta[V] = {}, bias[V] = {}, beta[V] = {};
};

// dz of one element from its gradient gv, and its terms of ddelta, dphase_bias and dbeta added to sums[i].
template <class R, int V>
__device__ inline cplx<R> cmha_grad(cplx<R> gv, cplx<R> v, const SlotPhase<R>& s, double position, PhaseSums<V>& sums, int i) {
  const R re = v.real(), im = v.imag();
  const R r2 = re * re + im * im + static_cast<R>(ops::kEulerEps);
  const R r = ::cuda::std::sqrt(r2);
  const R phi = ::cuda::std::atan2(im, re);
  const R angle = s.position_angle(position);
  R sn, cs;
  sin_cos(s.theta(phi, angle), &sn, &cs);
  const R u_re = gv.real() * cs + gv.imag() * sn;  // u = conj(G) e^{i theta}
  const R u_im = gv.real() * sn - gv.imag() * cs;
  const R d_r = u_re, d_theta = -r * u_im;
  const R d_phi = d_theta * s.delta;
  const R k_re = d_r / r, k_im = d_phi / r2;
  sums.delta[i] += static_cast<double>(d_theta) * phi;
  sums.bias[i] += d_theta;
  sums.beta[i] += static_cast<double>(d_theta * angle);
  return cplx<R>(k_re * re - k_im * im, k_re * im + k_im * re);
}

// One pass over (grad, z) on cmha_kernel's grid: dz, and each thread's sums of
// the parameter-gradient terms over its positions, which the block reduces
// over y in order into one partial per slot and chunk:
// partial[chunk][0 delta | 1 bias | 2 beta-part][slot].
template <class R>
__global__ void cmha_backward_kernel(const cplx<R>* grad, const cplx<R>* z, cplx<R>* dz, CmhaParamsDev<R> a, VectorRows<cplx<R>> rows,
                                     int64_t positions, int64_t per_chunk, double* partial) {
  constexpr int V = VectorRows<cplx<R>>::kWidth;
  PHASOR_EXTERN_SHARED(double, shared);  // [3][blockDim.y][blockDim.x][V]
  int first;
  const SlotPhase<R>* phases = block_phases(a, rows, first);
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  PhaseSums<V> sums;
  int slot = 0, width = 0;
  if (g < rows.groups()) {
    const int64_t begin = blockIdx.y * per_chunk, end = begin + per_chunk < positions ? begin + per_chunk : positions;
    rows.visit(g, [&](int first_slot, auto w) {
      constexpr int W = decltype(w)::value;
      slot = first_slot;
      width = W;
      SlotPhase<R> s[W];
      for (int i = 0; i < W; ++i) s[i] = phases[slot - first + i];
      for (int64_t pos = begin + threadIdx.y; pos < end; pos += blockDim.y) {
        const double position = static_cast<double>(a.offset + pos % a.n);
        const int64_t e = pos * rows.count + slot;
        const Vec<cplx<R>, W> gv = load_global_vec<W>(grad + e), v = load_global_vec<W>(z + e);
        Vec<cplx<R>, W> d;
        for (int i = 0; i < W; ++i) d.v[i] = cmha_grad(gv.v[i], v.v[i], s[i], position, sums, i);
        store_global_vec(dz + e, d);
      }
    });
  }
  // Reduce over threadIdx.y in order.
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  auto at = [&](int k, int y, int i) -> double& { return shared[((k * by + y) * bx + tx) * V + i]; };
  for (int i = 0; i < V; ++i) {
    at(0, ty, i) = sums.delta[i];
    at(1, ty, i) = sums.bias[i];
    at(2, ty, i) = sums.beta[i];
  }
  __syncthreads();
  if (ty != 0) return;
  const int64_t hp = rows.count;
  double* out = partial + blockIdx.y * 3 * hp;
  for (int i = 0; i < width; ++i)
    for (int k = 0; k < 3; ++k) {
      double t = 0;
      for (int y = 0; y < by; ++y) t += at(k, y, i);
      store_global(out + k * hp + slot + i, t);
    }
}

// ddelta and dphase_bias: each slot's partials over chunks, in order.
template <class R>
__global__ void cmha_finish_kernel(const double* partial, int64_t chunks, int64_t hp, R* ddelta, R* dbias) {
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= hp) return;
  double d = 0, b = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    d += load_global(partial + c * 3 * hp + slot);
    if (dbias) b += load_global(partial + c * 3 * hp + hp + slot);
  }
  store_global(ddelta + slot, static_cast<R>(d));
  if (dbias) store_global(dbias + slot, static_cast<R>(b));
}
// dbeta: one block per head reduces its pairs' beta parts over chunks.
template <class R>
__global__ void cmha_finish_beta_kernel(const double* partial, int64_t chunks, int64_t hp, int64_t p, R* dbeta) {
  const int64_t hi = blockIdx.x;
  double t = 0;
  for (int64_t k = threadIdx.x; k < chunks * p; k += blockDim.x) t += load_global(partial + (k / p) * 3 * hp + 2 * hp + hi * p + k % p);
  t = block_sum(t);
  if (threadIdx.x == 0) store_global(dbeta + hi, static_cast<R>(t));
}

template <class R>
CmhaParamsDev<R> device_params(const CmhaArgs& a) {
  return {static_cast<const R*>(a.delta), static_cast<const R*>(a.bias), static_cast<const R*>(a.beta), a.n, a.h, a.p, a.offset, a.rope_base,
          static_cast<const double*>(a.frequencies)};
}

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
  args.frequencies = p.frequencies.defined() ? static_cast<const double*>(p.frequencies.raw_data()) : nullptr;
  return args;
}

// ---------------------------------------------------------------- the launches

// z [B, N, H, P] complex times table [N, P] (conjugated if asked).
void launch_rotate(DType t, const void* z, const void* table, void* out, int64_t b, int64_t n, int64_t h, int64_t p, bool conj) {
  const int64_t hp = h * p;
  if (b * n * hp == 0) return;
  dispatch_cplx(t, "rotate", [&]<class C>() {
    const VectorRows<C> rows = vector_rows<C>(hp, {z, out});
    const int bx = row_block_x(rows.groups());
    const int by = static_cast<int>(std::clamp<int64_t>(256 / bx, 1, b));
    const size_t row_bytes = static_cast<size_t>(p) * sizeof(C);
    const bool cached = row_bytes <= 48 * 1024;  // the dynamic shared memory a kernel may take without opting in
    PHASOR_LAUNCH(row_grid(n, "rotate"), dim3(bx, by), cached ? row_bytes : 0, stream(), rotate_kernel<C>)(
        static_cast<const C*>(z), static_cast<const C*>(table), static_cast<C*>(out), rows, b, n, static_cast<int>(p), conj, cached);
    check_launch("rotate");
  });
}

void launch_cmha_rotate(DType t, const void* z, void* out, const CmhaArgs& a) {
  const int64_t positions = a.b * a.n, hp = a.h * a.p;
  if (positions * hp == 0) return;
  dispatch_cplx(t, "cmha_rotate", [&]<class C>() {
    using R = real_t<C>;
    const VectorRows<C> rows = vector_rows<C>(hp, {z, out});
    const CmhaGrid g = cmha_grid(rows.groups(), positions);
    PHASOR_LAUNCH(g.grid, g.block, 0, stream(), cmha_kernel<R>)(static_cast<const C*>(z), static_cast<C*>(out), device_params<R>(a), rows, positions,
                                                                g.per_chunk);
    check_launch("cmha_rotate");
  });
}

// One pass over (grad, z): dz, and the sums of ddelta, dphase_bias (if bias) and dbeta over
// batch and positions, reduced per block and then over blocks in fixed order.
void launch_cmha_rotate_backward(DType t, const void* grad, const void* z, void* dz, void* ddelta, void* dbias, void* dbeta,
                                 const CmhaArgs& a) {
  const int64_t hp = a.h * a.p, positions = a.b * a.n;
  if (hp == 0) return;
  dispatch_cplx(t, "cmha_rotate_backward", [&]<class C>() {
    using R = real_t<C>;
    const VectorRows<C> rows = vector_rows<C>(hp, {grad, z, dz});
    const CmhaGrid g = cmha_grid(rows.groups(), positions);
    const int64_t chunks = g.grid.y;
    Buffer partial(static_cast<size_t>(chunks * 3 * hp) * sizeof(double));
    const size_t shared = static_cast<size_t>(3 * kCmhaX * kCmhaY * VectorRows<C>::kWidth) * sizeof(double);
    PHASOR_LAUNCH(g.grid, g.block, shared, stream(), cmha_backward_kernel<R>)(static_cast<const C*>(grad), static_cast<const C*>(z),
                                                                              static_cast<C*>(dz), device_params<R>(a), rows, positions,
                                                                              g.per_chunk, partial.as<double>());
    check_launch("cmha_rotate_backward");
    PHASOR_LAUNCH(static_cast<unsigned>((hp + 127) / 128), 128, 0, stream(), cmha_finish_kernel<R>)(partial.as<double>(), chunks, hp,
                                                                                                     static_cast<R*>(ddelta), static_cast<R*>(dbias));
    check_launch("cmha_rotate_backward");
    PHASOR_LAUNCH(static_cast<unsigned>(a.h), 256, 0, stream(), cmha_finish_beta_kernel<R>)(partial.as<double>(), chunks, hp, a.p,
                                                                                            static_cast<R*>(dbeta));
    check_launch("cmha_rotate_backward");
  });
}

}  // namespace

// ---------------------------------------------------------------- the ops (cuda/kernels.h)

void rotate(const ops::RotateArgs& a) {
  const Tensor& z = a.z;
  launch_rotate(z.dtype(), z.raw_data(), a.table.raw_data(), a.out.raw_data(), z.size(0), z.size(1), z.size(2), z.size(3), a.conjugate_table);
}

void cmha_rotate(const ops::CmhaRotateArgs& a) { launch_cmha_rotate(a.z.dtype(), a.z.raw_data(), a.out.raw_data(), cmha_args(a.z, a.p)); }

void cmha_rotate_backward(const ops::CmhaRotateBackwardArgs& a) {
  launch_cmha_rotate_backward(a.z.dtype(), a.grad.raw_data(), a.z.raw_data(), a.out.dz.raw_data(), a.out.ddelta.raw_data(),
                              a.out.dphase_bias.defined() ? a.out.dphase_bias.raw_data() : nullptr, a.out.dbeta.raw_data(), cmha_args(a.z, a.p));
}

}  // namespace phasor::gpu
