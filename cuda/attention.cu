// Fused causal attention on CUDA, FlashAttention-2's scheme (tensor/attention.h
// states the maths; the CPU twin is tensor/cpu/attention.cpp). No [Nq, Nk]
// matrix is ever stored: scores live one tile at a time in registers and
// shared memory.
//
// Forward: one block per (query tile, batch, head). The query tile stays in
// shared memory; the key and value tiles up to the causal diagonal pass through
// it (tiles wholly above the diagonal are never loaded); each row keeps a
// running max m, a running sum l and an unnormalised output, rescaled by
// exp(m_old - m_new) when the max grows (the online softmax). It writes out and
// logsumexp = m + log l.
//
// Backward: D = rowsum(dO * O) first (one warp per row), then two kernels that
// each recompute P = exp(score - logsumexp) tile by tile: one block per (key
// tile, batch, head) accumulating dV = P^T dO and dK = scale dS^T Q over the
// query tiles at or below the diagonal, and one block per (query tile, batch,
// head) accumulating dQ = scale dS K over the key tiles; dS = P (dP - D) with
// dP = dO V^T. Every output element is written by exactly one thread, summed
// in a fixed order: no atomics, so runs repeat bit for bit.
//
// The three tiled kernels run one tile loop (for_each_tile: load a tile,
// write its P or dS to shared memory, accumulate, with the block's three
// barriers between) and its two products (tile_products for the scores,
// accumulate_tile for the outputs); each kernel supplies its own loads,
// masking and softmax.
//
// Arithmetic: plain FMA on the CUDA cores in the operand dtype (float32 or
// float64), exp/log at full precision (expf, not __expf); no tensor cores,
// TF32 included. Inputs q, k, v of element type In may be bfloat16 (mixed
// precision, nn/precision.h): they are widened to float32 as they are loaded,
// and everything else is float32, as on the CPU. Blocks are 256 threads seen as 16 x 16 (ty, tx): a thread owns
// rows ty + 16 i of its tile and keys (or head columns) tx + 16 j, so the 16
// threads sharing a row are 16 consecutive lanes of one warp and reduce with
// shuffles. The head width d is padded to DP in {16, 32, 64, 96, 128} with
// zeros in shared memory, so every d <= 128 takes the tiled kernels (with a
// value width dv other than the query/key width d, DP pads the wider of the
// two, and the narrower is zeros past its end); wider heads
// (or a GPU with too little shared memory) take simple kernels (one block per
// row, same maths, no reuse across rows), correct but slow.
#include <algorithm>

#include "cuda/common.cuh"
#include "tensor/bfloat16.h"

namespace phasor::gpu {

namespace {

constexpr int kAttnThreads = 256;    // the tiled kernels: 16 x 16
constexpr int kSimpleThreads = 128;  // the fallback kernels

// ---------------------------------------------------------------- device helpers

__device__ inline float ex(float x) { return expf(x); }
__device__ inline double ex(double x) { return exp(x); }
__device__ inline float lg(float x) { return logf(x); }
__device__ inline double lg(double x) { return log(x); }

template <class X>
__host__ __device__ inline X smaller(X a, X b) {
  return a < b ? a : b;
}

// An operand [B, N, H, d] with packed heads.
template <class T>
struct Rows {
  const T* p;
  int64_t sb, sn;  // batch and row strides, in elements
  __device__ const T* at(int64_t b, int64_t n, int64_t h, int64_t d) const { return p + b * sb + n * sn + h * d; }
};

// An input element in the accumulation type T (bfloat16 -> float32 is exact).
template <class T, class In>
__host__ __device__ inline T widen(In x) {
  return static_cast<T>(x);
}

// T: the accumulation and results' type; In: the element type of q, k, v.
template <class T, class In = T>
struct Attn {
  Rows<In> q, k, v;
  Rows<T> g, o;         // backward: dO and the forward's output
  const T* slopes;      // [H] or null
  const T* lse;         // backward: [B, H, Nq]
  const T* delta;       // backward: D, [B, H, Nq]
  T* out;               // forward: [B, Nq, H, dv]
  T* lse_out;           // forward: [B, H, Nq]
  T *dq, *dk, *dv;      // backward, contiguous
  int64_t b, nq, nk, h, offset;
  int d, v_width;  // the width of q and k, and of v, dO, the output and dV
  T scale;
  const T* bias;       // [H, bias_bins] or null: a bias per head and distance, distance d reading bin min(d, bias_bins - 1)
  int64_t bias_bins;
  T* dbias_rows;       // backward, with a bias: [B, H, dbias_bins], this call's rows of its gradient

  // Head h's bias at `distance` >= 0 (0 without a table).
  __device__ T distance_bias(int64_t h_, int64_t distance) const {
    return bias ? bias[h_ * bias_bins + (distance < bias_bins - 1 ? distance : bias_bins - 1)] : T(0);
  }
};

// 16 bytes of T: shared-memory reads of 4 floats or 2 doubles in one instruction.
template <class T>
struct alignas(16) Pack {
  static constexpr int n = 16 / sizeof(T);
  T v[n];
};
template <class T>
__device__ inline Pack<T> ld(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}

// Reductions over the 16 lanes sharing a row (tx = lane & 15).
template <class T>
__device__ inline T max16(T v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
template <class T>
__device__ inline T sum16(T v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// dst[r * LD + e] = src row r, element e, for r < ROWS and e < DP: zeros past the
// `rows` valid rows and past the head width d (so padded keys and columns add 0).
// src's elements are widened to T.
template <class T, int ROWS, int DP, int LD, class S>
__device__ inline void load_tile(T* dst, const S* src, int64_t row_stride, int64_t rows, int d) {
  for (int idx = threadIdx.x; idx < ROWS * DP; idx += kAttnThreads) {
    const int r = idx / DP, e = idx - r * DP;
    dst[r * LD + e] = r < rows && e < d ? widen<T>(src[r * row_stride + e]) : T(0);
  }
}

template <class T>
__device__ inline T neg_inf() {
  return -::cuda::std::numeric_limits<T>::infinity();
}

// The score-shaped products of a tile over shared tiles of row pitch LD and
// padded width DP, for this thread's rows r_i = ty + 16 i and columns
// c_j = tx + 16 j: s[k][i][j] = a[k][r_i] . b[k][c_j], for K = 1 product (the
// forward's S = Q K^T) or 2 sharing the loop (the backward's S and dP = dO V^T:
// the dK/dV kernel passes (K, V) as rows and (Q, dO) as columns, the dQ kernel
// the other way round).
template <class T, int K, int TI, int TJ, int DP, int LD>
__device__ inline void tile_products(const T* const (&a)[K], const T* const (&b)[K], int ty, int tx, T (&s)[K][TI][TJ]) {
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int i = 0; i < TI; ++i)
#pragma unroll
      for (int j = 0; j < TJ; ++j) s[k][i][j] = T(0);
#pragma unroll
  for (int e = 0; e < DP; e += Pack<T>::n) {
    Pack<T> ra[K][TI], cb[K][TJ];
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int i = 0; i < TI; ++i) ra[k][i] = ld(a[k] + (ty + 16 * i) * LD + e);
#pragma unroll
      for (int j = 0; j < TJ; ++j) cb[k][j] = ld(b[k] + (tx + 16 * j) * LD + e);
    }
#pragma unroll
    for (int u = 0; u < Pack<T>::n; ++u)
#pragma unroll
      for (int i = 0; i < TI; ++i)
#pragma unroll
        for (int j = 0; j < TJ; ++j)
#pragma unroll
          for (int k = 0; k < K; ++k) s[k][i][j] += ra[k][i].v[u] * cb[k][j].v[u];
  }
}

// The tile's contribution to a thread's outputs: acc[k][i][j] += sum_c
// p[k][r_i][c] x[k][c][col_j] over the BC columns of the shared tiles p[k]
// (row pitch LP: P or dS) and rows of x[k] (row pitch LD: V, K, dO or Q), for
// rows r_i = ty + 16 i and head columns col_j = tx + 16 j; K products share the loop.
template <class T, int K, int TI, int TD, int BC, int LD, int LP>
__device__ inline void accumulate_tile(const T* const (&p)[K], const T* const (&x)[K], int ty, int tx, T (&acc)[K][TI][TD]) {
#pragma unroll 2
  for (int c = 0; c < BC; c += Pack<T>::n) {
    Pack<T> pa[K][TI];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < TI; ++i) pa[k][i] = ld(p[k] + (ty + 16 * i) * LP + c);
#pragma unroll
    for (int u = 0; u < Pack<T>::n; ++u) {
      T xv[K][TD];
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < TD; ++j) xv[k][j] = x[k][(c + u) * LD + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TI; ++i)
#pragma unroll
        for (int j = 0; j < TD; ++j)
#pragma unroll
          for (int k = 0; k < K; ++k) acc[k][i][j] += pa[k][i].v[u] * xv[k][j];
    }
  }
}

// The tile loop of the three tiled kernels, their barriers in one place: for
// each tile start t0 = begin, begin + STEP, ... below end,
//   load(t0)     puts the tile into shared memory, once the previous tile's readers are done;
//   scores(t0)   writes each thread's share of the tile's P (and dS) to shared memory, once the loads are visible;
//   accumulate() adds the tile to each thread's outputs, once P (dS) is whole.
// The forward and dQ kernels walk the key tiles, the dK/dV kernel the query tiles.
template <int STEP, class Load, class Scores, class Accumulate>
__device__ inline void for_each_tile(int64_t begin, int64_t end, Load&& load, Scores&& scores, Accumulate&& accumulate) {
  for (int64_t t0 = begin; t0 < end; t0 += STEP) {
    __syncthreads();  // the previous tile's readers of shared memory are done
    load(t0);
    __syncthreads();  // the tile is loaded (the first time, also what the kernel loaded before the loop)
    scores(t0);
    __syncthreads();  // P (dS) is written
    accumulate();
  }
}

// ---------------------------------------------------------------- tile shapes
//
// Rows of every [rows][DP] tile are LD = DP + 16 bytes apart: 16-byte aligned
// for Pack reads, and 8 consecutive rows fall on distinct banks. Sizes keep
// each kernel within the 163 KiB of shared memory an A100 block may opt into
// (227 KiB on H100/H200) and under 255 registers a thread.

template <class T, int DP>
struct FwdTile {
  static constexpr int VEC = Pack<T>::n;
  static constexpr int TM = sizeof(T) == 4 ? 8 : 4;  // query rows a thread: ty + 16 i
  static constexpr int TN = DP >= 96 ? 2 : 4;        // keys a thread in the score tile: tx + 16 j
  static constexpr int TD = DP / 16;                 // output columns a thread: tx + 16 j
  static constexpr int BQ = 16 * TM, BK = 16 * TN;
  static constexpr int LD = DP + VEC, LP = BK + VEC;
  // q [BQ][LD], k and v [BK][LD], p [BQ][LP]
  static constexpr size_t smem = sizeof(T) * (BQ * LD + 2 * BK * LD + BQ * LP);
};

template <class T, int DP>
struct DkvTile {
  static constexpr int VEC = Pack<T>::n;
  static constexpr int TK = sizeof(T) == 4 || DP < 96 ? 4 : 2;            // keys a thread: ty + 16 i
  static constexpr int TQ = sizeof(T) == 4 ? (DP >= 96 ? 2 : 4) : 2;      // queries a thread in the score tile: tx + 16 j
  static constexpr int TD = DP / 16;                                      // dK, dV columns a thread: tx + 16 j
  static constexpr int BK = 16 * TK, BQ = 16 * TQ;
  static constexpr int LD = DP + VEC, LP = BQ + VEC;
  // k, v [BK][LD]; q, dO [BQ][LD]; p, dS [BK][LP]; lse, D [BQ]
  static constexpr size_t smem = sizeof(T) * (2 * BK * LD + 2 * BQ * LD + 2 * BK * LP + 2 * BQ);
};

template <class T, int DP>
struct DqTile {
  static constexpr int VEC = Pack<T>::n;
  static constexpr int TM = sizeof(T) == 4 || DP < 96 ? 4 : 2;            // query rows a thread: ty + 16 i
  static constexpr int TN = sizeof(T) == 4 ? (DP >= 96 ? 2 : 4) : 2;      // keys a thread in the score tile: tx + 16 j
  static constexpr int TD = DP / 16;                                      // dQ columns a thread: tx + 16 j
  static constexpr int BQ = 16 * TM, BK = 16 * TN;
  static constexpr int LD = DP + VEC, LP = BK + VEC;
  // q, dO [BQ][LD]; k, v [BK][LD]; dS [BQ][LP]
  static constexpr size_t smem = sizeof(T) * (2 * BQ * LD + 2 * BK * LD + BQ * LP);
};

// ---------------------------------------------------------------- forward

template <class T, int DP, class In>
__global__ void __launch_bounds__(kAttnThreads) attention_forward_kernel(const Attn<T, In> a, int64_t tiles) {
  using C = FwdTile<T, DP>;
  constexpr int TM = C::TM, TN = C::TN, TD = C::TD, LD = C::LD, LP = C::LP, BQ = C::BQ, BK = C::BK;
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  T* qs = reinterpret_cast<T*>(attn_smem);
  T* ks = qs + BQ * LD;
  T* vs = ks + BK * LD;
  T* ps = vs + BK * LD;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t heads = a.b * a.h;
  const int64_t tile = tiles - 1 - static_cast<int64_t>(blockIdx.x) / heads;  // the last (longest) query tiles first
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % heads, b = bh / a.h, h = bh % a.h;
  const int64_t q0 = tile * BQ, rows = smaller<int64_t>(BQ, a.nq - q0);
  const int64_t pos0 = a.offset + q0;                 // position of the tile's first row
  const int64_t n_end = smaller(a.nk, pos0 + rows);   // the keys any valid row sees: [0, n_end)
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  const In* kbase = a.k.at(b, 0, h, a.d);
  const In* vbase = a.v.at(b, 0, h, a.v_width);
  load_tile<T, BQ, DP, LD>(qs, a.q.at(b, q0, h, a.d), a.q.sn, rows, a.d);

  T m[TM], l[TM], o[1][TM][TD];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    m[i] = neg_inf<T>();
    l[i] = T(0);  // this thread's share of the row sum (its keys), summed over the 16 lanes at the end
#pragma unroll
    for (int j = 0; j < TD; ++j) o[0][i][j] = T(0);
  }

  // Tile 0 comes first and holds key 0, which every row (padding rows past Nq
  // too) sees: each m is finite from then on, so no exp(-inf - -inf).
  const auto load = [&](int64_t k0) {
    load_tile<T, BK, DP, LD>(ks, kbase + k0 * a.k.sn, a.k.sn, a.nk - k0, a.d);
    load_tile<T, BK, DP, LD>(vs, vbase + k0 * a.v.sn, a.v.sn, a.nk - k0, a.v_width);
  };
  const auto scores = [&](int64_t k0) {
    T s[1][TM][TN];
    tile_products<T, 1, TM, TN, DP, LD>({qs}, {ks}, ty, tx, s);
    // Every key of the tile exists and is visible to the tile's first row (so to all): no mask.
    const bool full = k0 + BK <= a.nk && k0 + BK - 1 <= pos0;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int64_t pos = pos0 + ty + 16 * i;
      T mx = m[i];
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int64_t n = k0 + tx + 16 * j;
        T x = scale * s[0][i][j] - slope * static_cast<T>(pos - n);
        if (a.bias && n <= pos) x += a.distance_bias(h, pos - n);
        if (!full && (n > pos || n >= a.nk)) x = neg_inf<T>();
        s[0][i][j] = x;
        mx = x > mx ? x : mx;
      }
      mx = max16(mx);
      const T alpha = ex(m[i] - mx);  // 0 on the first tile (m = -inf)
      m[i] = mx;
      T sum = T(0);
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const T p = ex(s[0][i][j] - mx);
        s[0][i][j] = p;
        sum += p;
      }
      l[i] = l[i] * alpha + sum;
#pragma unroll
      for (int j = 0; j < TD; ++j) o[0][i][j] *= alpha;
#pragma unroll
      for (int j = 0; j < TN; ++j) ps[(ty + 16 * i) * LP + tx + 16 * j] = s[0][i][j];
    }
  };
  // o += P V over the tile (rows of V past Nk are zeros, and their P is 0).
  const auto accumulate = [&] { accumulate_tile<T, 1, TM, TD, BK, LD, LP>({ps}, {vs}, ty, tx, o); };
  for_each_tile<BK>(0, n_end, load, scores, accumulate);

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const T total = sum16(l[i]);
    const int64_t qi = q0 + ty + 16 * i;
    if (qi < a.nq) {
      const T inv = T(1) / total;
      T* out = a.out + ((b * a.nq + qi) * a.h + h) * a.v_width;
#pragma unroll
      for (int j = 0; j < TD; ++j) {
        const int e = tx + 16 * j;
        if (e < a.v_width) out[e] = o[0][i][j] * inv;
      }
      if (tx == 0) a.lse_out[bh * a.nq + qi] = m[i] + lg(total);
    }
  }
}

// ---------------------------------------------------------------- backward

// D[b, h, i] = sum_e dO[b, i, h, e] O[b, i, h, e]: one warp per row.
template <class T, class In>
__global__ void attention_delta_kernel(const Attn<T, In> a, T* delta) {
  const int64_t rows = a.b * a.nq * a.h;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;  // the whole warp
  const int lane = threadIdx.x & 31;
  const int64_t h = row % a.h, qi = (row / a.h) % a.nq, b = row / (a.h * a.nq);
  const T *g = a.g.at(b, qi, h, a.v_width), *o = a.o.at(b, qi, h, a.v_width);
  acc_t<T> s = 0;
  for (int e = lane; e < a.v_width; e += 32) s += static_cast<acc_t<T>>(g[e]) * o[e];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) delta[(b * a.h + h) * a.nq + qi] = static_cast<T>(s);
}

// dK and dV of one key tile: a sum over the query tiles at or below the diagonal.
template <class T, int DP, class In>
__global__ void __launch_bounds__(kAttnThreads) attention_dkdv_kernel(const Attn<T, In> a) {
  using C = DkvTile<T, DP>;
  constexpr int TK = C::TK, TQ = C::TQ, TD = C::TD, LD = C::LD, LP = C::LP, BQ = C::BQ, BK = C::BK;
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  T* ks = reinterpret_cast<T*>(attn_smem);
  T* vs = ks + BK * LD;
  T* qs = vs + BK * LD;
  T* gs = qs + BQ * LD;
  T* ps = gs + BQ * LD;
  T* dss = ps + BK * LP;
  T* lse_s = dss + BK * LP;
  T* del_s = lse_s + BQ;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t heads = a.b * a.h;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) / heads;  // the first key tiles (seen by the most queries) first
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % heads, b = bh / a.h, h = bh % a.h;
  const int64_t k0 = tile * BK;
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  load_tile<T, BK, DP, LD>(ks, a.k.at(b, k0, h, a.d), a.k.sn, a.nk - k0, a.d);
  load_tile<T, BK, DP, LD>(vs, a.v.at(b, k0, h, a.v_width), a.v.sn, a.nk - k0, a.v_width);

  T acc[2][TK][TD];  // dV, dK (scaled at the end)
#pragma unroll
  for (int i = 0; i < TK; ++i)
#pragma unroll
    for (int j = 0; j < TD; ++j) acc[0][i][j] = acc[1][i][j] = T(0);

  const auto load = [&](int64_t q0) {
    const int64_t rows = a.nq - q0;
    load_tile<T, BQ, DP, LD>(qs, a.q.at(b, q0, h, a.d), a.q.sn, rows, a.d);
    load_tile<T, BQ, DP, LD>(gs, a.g.at(b, q0, h, a.v_width), a.g.sn, rows, a.v_width);
    for (int r = threadIdx.x; r < BQ; r += kAttnThreads) {
      lse_s[r] = r < rows ? a.lse[bh * a.nq + q0 + r] : T(0);
      del_s[r] = r < rows ? a.delta[bh * a.nq + q0 + r] : T(0);
    }
  };
  const auto scores = [&](int64_t q0) {
    // Scores S = K Q^T and dP = V dO^T, keys ty + 16 i by queries tx + 16 j.
    T sdp[2][TK][TQ];
    tile_products<T, 2, TK, TQ, DP, LD>({ks, vs}, {qs, gs}, ty, tx, sdp);
#pragma unroll
    for (int i = 0; i < TK; ++i)
#pragma unroll
      for (int j = 0; j < TQ; ++j) {
        const int c = ty + 16 * i, r = tx + 16 * j;
        const int64_t n = k0 + c, qi = q0 + r, pos = a.offset + qi;
        T p = T(0);
        if (qi < a.nq && n < a.nk && n <= pos)
          p = ex(scale * sdp[0][i][j] - slope * static_cast<T>(pos - n) + a.distance_bias(h, pos - n) - lse_s[r]);
        ps[c * LP + r] = p;
        dss[c * LP + r] = p * (sdp[1][i][j] - del_s[r]);
      }
  };
  // dV += P dO, dK += dS Q (scaled at the end), over the tile's queries.
  const auto accumulate = [&] { accumulate_tile<T, 2, TK, TD, BQ, LD, LP>({ps, dss}, {gs, qs}, ty, tx, acc); };
  // Query i sees key k0 when offset + i >= k0.
  const int64_t first = k0 - a.offset > 0 ? k0 - a.offset : 0;
  for_each_tile<BQ>(first / BQ * BQ, a.nq, load, scores, accumulate);

#pragma unroll
  for (int i = 0; i < TK; ++i) {
    const int64_t n = k0 + ty + 16 * i;
    if (n >= a.nk) continue;
    const int64_t row = (b * a.nk + n) * a.h + h;
#pragma unroll
    for (int j = 0; j < TD; ++j) {
      const int e = tx + 16 * j;
      if (e < a.d) a.dk[row * a.d + e] = acc[1][i][j] * scale;
      if (e < a.v_width) a.dv[row * a.v_width + e] = acc[0][i][j];
    }
  }
}

// dQ of one query tile: a sum over the key tiles up to the diagonal.
template <class T, int DP, class In>
__global__ void __launch_bounds__(kAttnThreads) attention_dq_kernel(const Attn<T, In> a, int64_t tiles) {
  using C = DqTile<T, DP>;
  constexpr int TM = C::TM, TN = C::TN, TD = C::TD, LD = C::LD, LP = C::LP, BQ = C::BQ, BK = C::BK;
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  T* qs = reinterpret_cast<T*>(attn_smem);
  T* gs = qs + BQ * LD;
  T* ks = gs + BQ * LD;
  T* vs = ks + BK * LD;
  T* dss = vs + BK * LD;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t heads = a.b * a.h;
  const int64_t tile = tiles - 1 - static_cast<int64_t>(blockIdx.x) / heads;  // the last (longest) query tiles first
  const int64_t bh = static_cast<int64_t>(blockIdx.x) % heads, b = bh / a.h, h = bh % a.h;
  const int64_t q0 = tile * BQ, rows = smaller<int64_t>(BQ, a.nq - q0);
  const int64_t pos0 = a.offset + q0;
  const int64_t n_end = smaller(a.nk, pos0 + rows);
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  const In* kbase = a.k.at(b, 0, h, a.d);
  const In* vbase = a.v.at(b, 0, h, a.v_width);
  load_tile<T, BQ, DP, LD>(qs, a.q.at(b, q0, h, a.d), a.q.sn, rows, a.d);
  load_tile<T, BQ, DP, LD>(gs, a.g.at(b, q0, h, a.v_width), a.g.sn, rows, a.v_width);
  T lse_r[TM], del_r[TM], dq[1][TM][TD];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = ty + 16 * i;
    lse_r[i] = r < rows ? a.lse[bh * a.nq + q0 + r] : T(0);
    del_r[i] = r < rows ? a.delta[bh * a.nq + q0 + r] : T(0);
#pragma unroll
    for (int j = 0; j < TD; ++j) dq[0][i][j] = T(0);
  }

  const auto load = [&](int64_t k0) {
    load_tile<T, BK, DP, LD>(ks, kbase + k0 * a.k.sn, a.k.sn, a.nk - k0, a.d);
    load_tile<T, BK, DP, LD>(vs, vbase + k0 * a.v.sn, a.v.sn, a.nk - k0, a.v_width);
  };
  const auto scores = [&](int64_t k0) {
    // Scores S = Q K^T and dP = dO V^T, queries ty + 16 i by keys tx + 16 j.
    T sdp[2][TM][TN];
    tile_products<T, 2, TM, TN, DP, LD>({qs, gs}, {ks, vs}, ty, tx, sdp);
    const bool full = k0 + BK <= a.nk && k0 + BK - 1 <= pos0;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int r = ty + 16 * i, c = tx + 16 * j;
        const int64_t n = k0 + c, pos = pos0 + r;
        T p = T(0);
        if (r < rows && (full || (n <= pos && n < a.nk)))
          p = ex(scale * sdp[0][i][j] - slope * static_cast<T>(pos - n) + a.distance_bias(h, pos - n) - lse_r[i]);
        dss[r * LP + c] = p * (sdp[1][i][j] - del_r[i]);
      }
  };
  // dQ += dS K (scaled at the end), over the tile's keys.
  const auto accumulate = [&] { accumulate_tile<T, 1, TM, TD, BK, LD, LP>({dss}, {ks}, ty, tx, dq); };
  for_each_tile<BK>(0, n_end, load, scores, accumulate);

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t qi = q0 + ty + 16 * i;
    if (qi >= a.nq) continue;
    T* out = a.dq + ((b * a.nq + qi) * a.h + h) * a.d;
#pragma unroll
    for (int j = 0; j < TD; ++j) {
      const int e = tx + 16 * j;
      if (e < a.d) out[e] = dq[0][i][j] * scale;
    }
  }
}

// ---------------------------------------------------------------- fallback: one block per row, any d
//
// The same maths with a thread per key (forward, dQ) or per query (dK, dV) of a
// 128-wide chunk, and the head width walked by the threads in turn; per-row
// vectors live in dynamic shared memory. No reuse of K and V across rows.

template <class T, class In>
__global__ void attention_forward_simple_kernel(const Attn<T, In> a) {
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  const int w = a.d > a.v_width ? a.d : a.v_width;      // each vector's room
  T* qrow = reinterpret_cast<T*>(attn_smem);  // [d]
  T* acc = qrow + w;                           // [dv]
  T* ps = acc + w;                             // [kSimpleThreads]
  const int t = threadIdx.x;
  const int64_t qi = static_cast<int64_t>(blockIdx.x) % a.nq, bh = static_cast<int64_t>(blockIdx.x) / a.nq, b = bh / a.h, h = bh % a.h;
  const In* q = a.q.at(b, qi, h, a.d);
  for (int e = t; e < a.d; e += kSimpleThreads) qrow[e] = widen<T>(q[e]);
  for (int e = t; e < a.v_width; e += kSimpleThreads) acc[e] = T(0);
  __syncthreads();
  const int64_t pos = a.offset + qi, n_end = smaller(a.nk, pos + 1);
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  T m = neg_inf<T>(), l = T(0);
  for (int64_t k0 = 0; k0 < n_end; k0 += kSimpleThreads) {
    const int64_t n = k0 + t;
    T x = neg_inf<T>();
    if (n < n_end) {
      const In* kr = a.k.at(b, n, h, a.d);
      T dot = T(0);
      for (int e = 0; e < a.d; ++e) dot += qrow[e] * widen<T>(kr[e]);
      x = scale * dot - slope * static_cast<T>(pos - n) + a.distance_bias(h, pos - n);
    }
    const T tile_max = block_reduce(x, MaxOp{}, neg_inf<T>());
    const T mx = tile_max > m ? tile_max : m;
    const T alpha = ex(m - mx);
    const T p = n < n_end ? ex(x - mx) : T(0);
    ps[t] = p;
    l = l * alpha + block_sum(p);  // its barriers publish ps; the next chunk's block_reduce waits for its readers
    m = mx;
    const int count = static_cast<int>(smaller<int64_t>(kSimpleThreads, n_end - k0));
    for (int e = t; e < a.v_width; e += kSimpleThreads) {
      T sum = acc[e] * alpha;
      for (int c = 0; c < count; ++c) sum += ps[c] * widen<T>(a.v.at(b, k0 + c, h, a.v_width)[e]);
      acc[e] = sum;
    }
  }
  T* out = a.out + ((b * a.nq + qi) * a.h + h) * a.v_width;
  for (int e = t; e < a.v_width; e += kSimpleThreads) out[e] = acc[e] / l;
  if (t == 0) a.lse_out[bh * a.nq + qi] = m + lg(l);
}

template <class T, class In>
__global__ void attention_dq_simple_kernel(const Attn<T, In> a) {
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  const int w = a.d > a.v_width ? a.d : a.v_width;      // each vector's room
  T* qrow = reinterpret_cast<T*>(attn_smem);  // [d]
  T* grow = qrow + w;                          // [dv]
  T* acc = grow + w;                           // [d]
  T* ds = acc + w;                             // [kSimpleThreads]
  const int t = threadIdx.x;
  const int64_t qi = static_cast<int64_t>(blockIdx.x) % a.nq, bh = static_cast<int64_t>(blockIdx.x) / a.nq, b = bh / a.h, h = bh % a.h;
  const In* q = a.q.at(b, qi, h, a.d);
  const T* g = a.g.at(b, qi, h, a.v_width);
  for (int e = t; e < a.d; e += kSimpleThreads) {
    qrow[e] = widen<T>(q[e]);
    acc[e] = T(0);
  }
  for (int e = t; e < a.v_width; e += kSimpleThreads) grow[e] = g[e];
  __syncthreads();
  const int64_t pos = a.offset + qi, n_end = smaller(a.nk, pos + 1);
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  const T lse = a.lse[bh * a.nq + qi], del = a.delta[bh * a.nq + qi];
  for (int64_t k0 = 0; k0 < n_end; k0 += kSimpleThreads) {
    const int64_t n = k0 + t;
    T d_s = T(0);
    if (n < n_end) {
      const In *kr = a.k.at(b, n, h, a.d), *vr = a.v.at(b, n, h, a.v_width);
      T s = T(0), dp = T(0);
      for (int e = 0; e < a.d; ++e) s += qrow[e] * widen<T>(kr[e]);
      for (int e = 0; e < a.v_width; ++e) dp += grow[e] * widen<T>(vr[e]);
      d_s = ex(scale * s - slope * static_cast<T>(pos - n) + a.distance_bias(h, pos - n) - lse) * (dp - del);
    }
    ds[t] = d_s;
    __syncthreads();
    const int count = static_cast<int>(smaller<int64_t>(kSimpleThreads, n_end - k0));
    for (int e = t; e < a.d; e += kSimpleThreads) {
      T sum = acc[e];
      for (int c = 0; c < count; ++c) sum += ds[c] * widen<T>(a.k.at(b, k0 + c, h, a.d)[e]);
      acc[e] = sum;
    }
    __syncthreads();
  }
  T* out = a.dq + ((b * a.nq + qi) * a.h + h) * a.d;
  for (int e = t; e < a.d; e += kSimpleThreads) out[e] = acc[e] * scale;
}

template <class T, class In>
__global__ void attention_dkdv_simple_kernel(const Attn<T, In> a) {
  PHASOR_EXTERN_SHARED(unsigned char, attn_smem);
  const int w = a.d > a.v_width ? a.d : a.v_width;      // each vector's room
  T* krow = reinterpret_cast<T*>(attn_smem);  // [d]
  T* vrow = krow + w;                          // [dv]
  T* acck = vrow + w;                          // [d]
  T* accv = acck + w;                          // [dv]
  T* ps = accv + w;                            // [kSimpleThreads]
  T* ds = ps + kSimpleThreads;                 // [kSimpleThreads]
  const int t = threadIdx.x;
  const int64_t n = static_cast<int64_t>(blockIdx.x) % a.nk, bh = static_cast<int64_t>(blockIdx.x) / a.nk, b = bh / a.h, h = bh % a.h;
  const In *k = a.k.at(b, n, h, a.d), *v = a.v.at(b, n, h, a.v_width);
  for (int e = t; e < a.d; e += kSimpleThreads) {
    krow[e] = widen<T>(k[e]);
    acck[e] = T(0);
  }
  for (int e = t; e < a.v_width; e += kSimpleThreads) {
    vrow[e] = widen<T>(v[e]);
    accv[e] = T(0);
  }
  __syncthreads();
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  const int64_t first = n - a.offset > 0 ? n - a.offset : 0;  // the first query that sees key n
  for (int64_t i0 = first; i0 < a.nq; i0 += kSimpleThreads) {
    const int64_t qi = i0 + t;
    T p = T(0), d_s = T(0);
    if (qi < a.nq) {
      const In* qr = a.q.at(b, qi, h, a.d);
      const T* gr = a.g.at(b, qi, h, a.v_width);
      T s = T(0), dp = T(0);
      for (int e = 0; e < a.d; ++e) s += widen<T>(qr[e]) * krow[e];
      for (int e = 0; e < a.v_width; ++e) dp += gr[e] * vrow[e];
      p = ex(scale * s - slope * static_cast<T>(a.offset + qi - n) + a.distance_bias(h, a.offset + qi - n) - a.lse[bh * a.nq + qi]);
      d_s = p * (dp - a.delta[bh * a.nq + qi]);
    }
    ps[t] = p;
    ds[t] = d_s;
    __syncthreads();
    const int count = static_cast<int>(smaller<int64_t>(kSimpleThreads, a.nq - i0));
    for (int e = t; e < a.d; e += kSimpleThreads) {
      T sk = acck[e];
      for (int c = 0; c < count; ++c) sk += ds[c] * widen<T>(a.q.at(b, i0 + c, h, a.d)[e]);
      acck[e] = sk;
    }
    for (int e = t; e < a.v_width; e += kSimpleThreads) {
      T sv = accv[e];
      for (int c = 0; c < count; ++c) sv += ps[c] * a.g.at(b, i0 + c, h, a.v_width)[e];
      accv[e] = sv;
    }
    __syncthreads();
  }
  const int64_t row = (b * a.nk + n) * a.h + h;
  for (int e = t; e < a.d; e += kSimpleThreads) a.dk[row * a.d + e] = acck[e] * scale;
  for (int e = t; e < a.v_width; e += kSimpleThreads) a.dv[row * a.v_width + e] = accv[e];
}

// d loss / d distance_bias: one block per (batch, head, bin), the sum of
// P (dP - D) over the scores whose distance falls in the bin (exactly `bin`
// below the table's last bin; `bin` or more in it), recomputed from q, k, v,
// dO, the log-sum-exps and D, each thread's queries in turn and the block's
// sum in a fixed order: deterministic, no atomics. A row of work a score,
// like the fallback kernels: correct, not fast.
template <class T, class In>
__global__ void attention_bias_grad_kernel(const Attn<T, In> a, int64_t bins) {
  const int64_t bin = static_cast<int64_t>(blockIdx.x) % bins, bh = static_cast<int64_t>(blockIdx.x) / bins, b = bh / a.h, h = bh % a.h;
  const T scale = a.scale, slope = a.slopes ? a.slopes[h] : T(0);
  const bool last = bin == a.bias_bins - 1;
  T total = T(0);
  for (int64_t qi = threadIdx.x; qi < a.nq; qi += blockDim.x) {
    const int64_t pos = a.offset + qi;
    const int64_t n_hi = smaller(pos - bin, a.nk - 1), n_lo = last ? 0 : pos - bin;
    if (pos - bin < 0) continue;
    const In* q = a.q.at(b, qi, h, a.d);
    const T* g = a.g.at(b, qi, h, a.v_width);
    const T lse = a.lse[bh * a.nq + qi], del = a.delta[bh * a.nq + qi];
    for (int64_t n = n_lo; n <= n_hi; ++n) {
      const In *kr = a.k.at(b, n, h, a.d), *vr = a.v.at(b, n, h, a.v_width);
      T sc = T(0), dp = T(0);
      for (int e = 0; e < a.d; ++e) sc += widen<T>(q[e]) * widen<T>(kr[e]);
      for (int e = 0; e < a.v_width; ++e) dp += g[e] * widen<T>(vr[e]);
      total += ex(scale * sc - slope * static_cast<T>(pos - n) + a.distance_bias(h, pos - n) - lse) * (dp - del);
    }
  }
  total = block_sum(total);
  if (threadIdx.x == 0) a.dbias_rows[bh * bins + bin] = total;
}

// ---------------------------------------------------------------- launch

// The most dynamic shared memory a block may opt into on this GPU.
int shared_optin() {
  static const int bytes = [] {
    int device = 0, v = 0;
    PHASOR_CUDA_CHECK(cudaGetDevice(&device));
    PHASOR_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return v;
  }();
  return bytes;
}

// Lets `kernel` use `bytes` of dynamic shared memory; false when this GPU has less.
template <class K>
bool allow_shared(K* kernel, size_t bytes) {
  if (bytes > static_cast<size_t>(shared_optin())) return false;
  if (bytes <= 48 * 1024) return true;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) == cudaSuccess) return true;
  cudaGetLastError();  // not sticky: clear it so the next launch check does not report it
  return false;
}

unsigned blocks_of(int64_t n, const char* what) {
  if (n > 0x7fffffff) fail("causal_attention: ", n, " blocks for the ", what, " kernel exceed CUDA's grid limit (reduce batch * heads * positions)");
  return static_cast<unsigned>(n);
}

// f.template operator()<DP>() with the padded head width of d; false when d > 128.
template <class F>
bool with_width(int64_t d, F&& f) {
  if (d <= 16) return f.template operator()<16>();
  if (d <= 32) return f.template operator()<32>();
  if (d <= 64) return f.template operator()<64>();
  if (d <= 96) return f.template operator()<96>();
  if (d <= 128) return f.template operator()<128>();
  return false;
}

template <class T, class In, int DP>
bool forward_tiled(const Attn<T, In>& a) {
  using C = FwdTile<T, DP>;
  static const bool fits = allow_shared(attention_forward_kernel<T, DP, In>, C::smem);
  if (!fits) return false;
  const int64_t tiles = (a.nq + C::BQ - 1) / C::BQ;
  PHASOR_LAUNCH(blocks_of(tiles * a.b * a.h, "forward"), kAttnThreads, C::smem, stream(), attention_forward_kernel<T, DP, In>)(a, tiles);
  check_launch("attention_forward");
  return true;
}

template <class T, class In, int DP>
bool dkdv_tiled(const Attn<T, In>& a) {
  using C = DkvTile<T, DP>;
  static const bool fits = allow_shared(attention_dkdv_kernel<T, DP, In>, C::smem);
  if (!fits) return false;
  const int64_t tiles = (a.nk + C::BK - 1) / C::BK;
  PHASOR_LAUNCH(blocks_of(tiles * a.b * a.h, "dk/dv"), kAttnThreads, C::smem, stream(), attention_dkdv_kernel<T, DP, In>)(a);
  check_launch("attention_backward (dk, dv)");
  return true;
}

template <class T, class In, int DP>
bool dq_tiled(const Attn<T, In>& a) {
  using C = DqTile<T, DP>;
  static const bool fits = allow_shared(attention_dq_kernel<T, DP, In>, C::smem);
  if (!fits) return false;
  const int64_t tiles = (a.nq + C::BQ - 1) / C::BQ;
  PHASOR_LAUNCH(blocks_of(tiles * a.b * a.h, "dq"), kAttnThreads, C::smem, stream(), attention_dq_kernel<T, DP, In>)(a, tiles);
  check_launch("attention_backward (dq)");
  return true;
}

// The fallback kernels' shared memory: `rows` vectors of d and `chunks` of kSimpleThreads.
template <class T, class K>
size_t simple_shared(K* kernel, int64_t d, int rows, int chunks) {
  const size_t bytes = sizeof(T) * (static_cast<size_t>(rows) * static_cast<size_t>(d) + static_cast<size_t>(chunks) * kSimpleThreads);
  if (!allow_shared(kernel, bytes))
    fail("causal_attention: head width ", d, " needs ", bytes, " bytes of shared memory a block on cuda, more than this GPU's ", shared_optin());
  return bytes;
}

template <class T, class In>
Attn<T, In> device_args(const AttentionArgs& x) {
  Attn<T, In> a{};
  a.q = {static_cast<const In*>(x.q.data), x.q.batch_stride, x.q.row_stride};
  a.k = {static_cast<const In*>(x.k.data), x.k.batch_stride, x.k.row_stride};
  a.v = {static_cast<const In*>(x.v.data), x.v.batch_stride, x.v.row_stride};
  a.slopes = static_cast<const T*>(x.slopes);
  a.b = x.b;
  a.nq = x.nq;
  a.nk = x.nk;
  a.h = x.h;
  a.offset = x.offset;
  a.d = static_cast<int>(x.d);
  a.v_width = static_cast<int>(x.dv);
  a.scale = static_cast<T>(x.scale);
  a.bias = static_cast<const T*>(x.distance_bias);
  a.bias_bins = x.bias_bins;
  return a;
}

// f.template operator()<T, In>() for inputs of dtype `t`: bfloat16 inputs accumulate in float32, the others in their own dtype.
template <class F>
void dispatch_inputs(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f.template operator()<float, bf16>();
  dispatch_real(t, op, [&]<class T>() { f.template operator()<T, T>(); });
}

}  // namespace

// out [B, Nq, H, dv] and logsumexp [B, H, Nq], contiguous.
void launch_attention_forward(DType t, const AttentionArgs& args, void* out, void* logsumexp) {
  if (args.b * args.h * args.nq == 0) return;
  dispatch_inputs(t, "causal_attention", [&]<class T, class In>() {
    Attn<T, In> a = device_args<T, In>(args);
    a.out = static_cast<T*>(out);
    a.lse_out = static_cast<T*>(logsumexp);
    if (with_width(std::max(args.d, args.dv), [&]<int DP>() { return forward_tiled<T, In, DP>(a); })) return;
    const size_t shared = simple_shared<T>(attention_forward_simple_kernel<T, In>, std::max(args.d, args.dv), 2, 1);
    PHASOR_LAUNCH(blocks_of(args.b * args.h * args.nq, "forward"), kSimpleThreads, shared, stream(), attention_forward_simple_kernel<T, In>)(a);
    check_launch("attention_forward (any head width)");
  });
}

// grad (d loss / d out) and out: the forward's output, [B, Nq, H, d] as q; logsumexp [B, H, Nq]
// contiguous; dq, dk, dv contiguous, shaped like q, k, v. Deterministic: no atomics.
void launch_attention_backward(DType t, const AttentionArgs& args, const AttentionOperand& grad, const AttentionOperand& out,
                               const void* logsumexp, void* dq, void* dk, void* dv, void* dbias_rows, int64_t dbias_bins) {
  if (args.b * args.h == 0 || args.nk == 0) return;  // nothing to write (nq == 0 still zeroes dk and dv below)
  dispatch_inputs(t, "causal_attention_backward", [&]<class T, class In>() {
    Attn<T, In> a = device_args<T, In>(args);
    a.g = {static_cast<const T*>(grad.data), grad.batch_stride, grad.row_stride};
    a.o = {static_cast<const T*>(out.data), out.batch_stride, out.row_stride};
    a.lse = static_cast<const T*>(logsumexp);
    a.dq = static_cast<T*>(dq);
    a.dk = static_cast<T*>(dk);
    a.dv = static_cast<T*>(dv);
    a.dbias_rows = static_cast<T*>(dbias_rows);
    const int64_t rows = args.b * args.nq * args.h;
    Buffer delta(static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(T));
    a.delta = delta.as<T>();
    if (rows > 0) {
      constexpr int warps = kThreads / 32;
      PHASOR_LAUNCH(blocks_of((rows + warps - 1) / warps, "delta"), kThreads, 0, stream(), attention_delta_kernel<T, In>)(a, delta.as<T>());
      check_launch("attention_backward (delta)");
    }
    // dK, dV for every key (zeros for keys no query sees, all of them when Nq = 0).
    if (!with_width(std::max(args.d, args.dv), [&]<int DP>() { return dkdv_tiled<T, In, DP>(a); })) {
      const size_t shared = simple_shared<T>(attention_dkdv_simple_kernel<T, In>, std::max(args.d, args.dv), 4, 2);
      PHASOR_LAUNCH(blocks_of(args.b * args.h * args.nk, "dk/dv"), kSimpleThreads, shared, stream(), attention_dkdv_simple_kernel<T, In>)(a);
      check_launch("attention_backward (dk, dv, any head width)");
    }
    if (rows == 0) return;
    if (a.bias) {  // needs D (above); its rows were zeroed by the front-end
      PHASOR_LAUNCH(blocks_of(args.b * args.h * dbias_bins, "distance bias"), kSimpleThreads, 0, stream(), attention_bias_grad_kernel<T, In>)(a, dbias_bins);
      check_launch("attention_backward (distance bias)");
    }
    if (!with_width(std::max(args.d, args.dv), [&]<int DP>() { return dq_tiled<T, In, DP>(a); })) {
      const size_t shared = simple_shared<T>(attention_dq_simple_kernel<T, In>, std::max(args.d, args.dv), 3, 1);
      PHASOR_LAUNCH(blocks_of(rows, "dq"), kSimpleThreads, shared, stream(), attention_dq_simple_kernel<T, In>)(a);
      check_launch("attention_backward (dq, any head width)");
    }
  });
}

// ---------------------------------------------------------------- the ops (cuda/kernels.h)

namespace {
// A [B, N, H, d] operand with packed heads (the front-end made them so): its batch and row strides.
AttentionOperand attention_operand(const Tensor& t) { return {t.raw_data(), t.stride(0), t.stride(1)}; }

AttentionArgs attention_args(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& p) {
  AttentionArgs a;
  a.q = attention_operand(q);
  a.k = attention_operand(k);
  a.v = attention_operand(v);
  a.slopes = data_or_null(p.slopes);
  a.distance_bias = data_or_null(p.distance_bias);
  a.bias_bins = p.distance_bias.defined() ? p.distance_bias.size(1) : 0;
  a.b = q.size(0);
  a.nq = q.size(1);
  a.nk = k.size(1);
  a.h = q.size(2);
  a.d = q.size(3);
  a.dv = v.size(3);
  a.offset = p.offset;
  a.scale = p.scale;
  return a;
}
}  // namespace

void attention_forward(const ops::AttentionForwardArgs& a) {
  launch_attention_forward(a.q.dtype(), attention_args(a.q, a.k, a.v, a.p), a.out.out.raw_data(), a.out.logsumexp.raw_data());
}

void attention_backward(const ops::AttentionBackwardArgs& a) {
  launch_attention_backward(a.q.dtype(), attention_args(a.q, a.k, a.v, a.p), attention_operand(a.grad), attention_operand(a.forward.out),
                            a.forward.logsumexp.raw_data(), a.out.dq.raw_data(), a.out.dk.raw_data(), a.out.dv.raw_data(),
                            a.out.ddistance_bias_rows.defined() ? a.out.ddistance_bias_rows.raw_data() : nullptr,
                            a.out.ddistance_bias_rows.defined() ? a.out.ddistance_bias_rows.size(2) : 0);
}

}  // namespace phasor::gpu
