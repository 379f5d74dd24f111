// Fused causal attention on the CPU (tensor/attention.h), FlashAttention-2's
// scheme. Nothing larger than a [64, 64] tile of scores is ever held.
//
// Forward: one parallel region over (batch, head, query tile). A task walks
// the key tiles up to its diagonal with an online softmax: a running maximum
// and sum per row, the output rescaled when the maximum grows.
// Backward: one parallel region over (batch, head). A task walks the key tiles;
// for each it recomputes the probabilities of every query tile that sees it
// from the saved log-sum-exps, accumulates that tile's dK and dV, and adds its
// share of dQ. Owning a whole (batch, head) lets dQ accumulate without atomics
// or per-thread copies, and keeps every result independent of the thread count.
//
// The tile products run on tile_product (tensor/cpu/tile_product.h), compiled
// for AVX-512, AVX2 and baseline x86-64 and picked at load time; it was
// measured against OpenBLAS sgemm on the same tiles (bench_core,
// BM_attention_tiles; docs/benchmarks.md).
//
// Inputs of element type In accumulate in T: In = T (float32, float64), or
// bfloat16 q, k, v accumulating in float32 (mixed precision, nn/precision.h).
// A bfloat16 tile is widened to float32 as it is packed or read, once per
// tile, and every product, the softmax and the outputs are float32: the
// results are float32 attention's on the rounded inputs, to the summation order.
// Where the CPU has AVX512-BF16 the scores S = Q K^T of bfloat16 inputs run on
// it instead (tensor/cpu/scores_bf16.h: exact products, float32 sums, 2.4x the
// widened tile's speed); the other products have a float32 operand (P, dO, dS).
// CUDA twin: cuda/attention.cu.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/bfloat16.h"
#include "tensor/cpu/backend.h"
#include "tensor/cpu/scores_bf16.h"
#include "tensor/cpu/tile_product.h"
#include "tensor/fast_math.h"

namespace phasor::cpu {

namespace {

constexpr int64_t kQueryTile = 64;  // query rows per tile
constexpr int64_t kKeyTile = 64;    // keys per tile

// Row n of one (batch, head) of a [B, N, H, d] tensor with packed heads.
template <class T>
struct HeadRows {
  T* base;
  int64_t stride;
  T* row(int64_t n) const { return base + n * stride; }
};
template <class T>
HeadRows<T> head_rows(const Tensor& t, int64_t b, int64_t h) {
  using Plain = std::remove_const_t<T>;
  return {const_cast<Plain*>(t.data<Plain>()) + b * t.stride(0) + h * t.size(3), t.stride(1)};
}

// One call's shapes and constants: d is the width of q and k, dv that of v
// and the output (pope's rotated queries and keys are twice v's width).
template <class T>
struct Problem {
  int64_t heads, nq, nk, d, dv, offset;
  T scale;
  const T* slopes;  // null: no ALiBi bias
  bool pairs;       // bfloat16 inputs: the scores on AVX512-BF16 (scores_bf16)
  const T* distance_bias = nullptr;  // [H, bias_bins]: null, or the table of a bias per distance
  int64_t bias_bins = 0;             // R + 1: distance d reads bin min(d, R)
  int64_t visible(int64_t i, int64_t j0, int64_t cols) const {  // keys of tile [j0, j0+cols) query i sees
    return std::clamp<int64_t>(offset + i + 1 - j0, 0, cols);
  }
};

// Query i's raw scores q_i . k against the key tile at j0, in place: scaled,
// ALiBi-biased, with head h's distance bias (table: its row, or null), and
// -inf where the key is past the query.
template <class T>
[[gnu::always_inline]] inline void bias_and_mask(const Problem<T>& pb, T slope, const T* table, int64_t i, int64_t j0, int64_t cols, T* s) {
  const int64_t visible = pb.visible(i, j0, cols);
  const int64_t distance0 = pb.offset + i - j0;  // query position minus key position, at key j0
  constexpr T kMasked = -std::numeric_limits<T>::infinity();
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    const T biased = pb.scale * s[c] - slope * static_cast<T>(distance0 - c);
    s[c] = c < visible ? biased : kMasked;
  }
  if (table)
    for (int64_t c = 0; c < visible; ++c) s[c] += table[std::min(distance0 - c, pb.bias_bins - 1)];
}

// Scratch of one thread, forward: a packed key tile, one tile of scores, and
// the query tile's running output, maxima and sums.
// `widened`: room for a query tile and a key (value) tile widened to T, used
// only when the inputs are narrower than T (wide_q, wide_kv); `pairs`: for a
// key tile packed for scores_bf16 (key_pairs). The backward's likewise.
template <class T>
struct ForwardScratch {
  std::vector<T> kt, s, o, row_max, row_sum, wide_q, wide_kv;
  std::vector<uint16_t> key_pairs;
  ForwardScratch(int64_t d, int64_t dv, bool widened, bool pairs)
      : kt(d * kKeyTile), s(kQueryTile * kKeyTile), o(kQueryTile * dv), row_max(kQueryTile), row_sum(kQueryTile),
        wide_q(widened ? kQueryTile * d : 0), wide_kv(widened ? kKeyTile * std::max(d, dv) : 0),
        key_pairs(pairs ? (d + 1) / 2 * 2 * kKeyTile : 0) {}
};
// Backward: packed key and value tiles, the tile's P (then dS) and dP, the
// key tile's dK and dV, and D_i for every query row of the head.
template <class T>
struct BackwardScratch {
  std::vector<T> kt, vt, s, dp, dk, dv, delta, wide_q, wide_kv;
  std::vector<uint16_t> key_pairs;
  BackwardScratch(int64_t d, int64_t dv_width, int64_t nq, bool widened, bool pairs)
      : kt(d * kKeyTile), vt(dv_width * kKeyTile), s(kQueryTile * kKeyTile), dp(kQueryTile * kKeyTile), dk(kKeyTile * d),
        dv(kKeyTile * dv_width), delta(nq), wide_q(widened ? kQueryTile * d : 0), wide_kv(widened ? kKeyTile * d : 0),
        key_pairs(pairs ? (d + 1) / 2 * 2 * kKeyTile : 0) {}
};

// An input element as the accumulation type T (bfloat16 -> float32 is exact).
template <class T, class In>
[[gnu::always_inline]] inline T widen(In x) {
  return static_cast<T>(x);
}

// Rows r0..r0+count-1 of `rows` as T: in place when In is T, else widened
// into `scratch` ([count, d]).
template <class T, class In>
[[gnu::always_inline]] inline HeadRows<const T> rows_as(const HeadRows<const In>& rows, int64_t r0, int64_t count, int64_t d, T* scratch) {
  if constexpr (std::is_same_v<In, T>) {
    return {rows.row(r0), rows.stride};
  } else {
    for (int64_t r = 0; r < count; ++r) {
      const In* src = rows.row(r0 + r);
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) scratch[r * d + e] = widen<T>(src[e]);
    }
    return {scratch, d};
  }
}

// Keys j0..j0+cols-1 of `rows`, transposed to [d, kKeyTile] with zero padding.
template <class T, class In>
[[gnu::always_inline]] inline void pack_transposed(const HeadRows<const In>& rows, int64_t j0, int64_t cols, int64_t d, T* out) {
  for (int64_t c = 0; c < cols; ++c) {
    const In* src = rows.row(j0 + c);
    for (int64_t e = 0; e < d; ++e) out[e * kKeyTile + c] = widen<T>(src[e]);
  }
  for (int64_t e = 0; e < d; ++e)
    for (int64_t c = cols; c < kKeyTile; ++c) out[e * kKeyTile + c] = T(0);
}

static_assert(kKeyTile == kScoreKeys, "scores_bf16 fills tiles of kKeyTile keys");

// The key tile at j0 packed for the scores: in pairs for scores_bf16 when the
// problem says so, else transposed to [d, kKeyTile] as T.
template <class T, class In>
[[gnu::always_inline]] inline void pack_keys(const Problem<T>& pb, const HeadRows<const In>& k, int64_t j0, int64_t cols, T* kt,
                                             uint16_t* key_pairs) {
  if constexpr (std::is_same_v<In, bf16>) {
    if (pb.pairs) return pack_key_pairs(k.row(j0), k.stride, cols, pb.d, key_pairs);
  }
  pack_transposed(k, j0, cols, pb.d, kt);
}

// S = Q K^T [rows, kKeyTile] of the query tile at i0 against the keys pack_keys
// packed: from q's own bfloat16 rows on AVX512-BF16, else from q_wide (q as T, row 0 = query i0).
template <class T, class In>
[[gnu::always_inline]] inline void tile_scores(const Problem<T>& pb, const HeadRows<const In>& q, const HeadRows<const T>& q_wide, int64_t i0,
                                               int64_t rows, const T* kt, const uint16_t* key_pairs, T* s) {
  if constexpr (std::is_same_v<In, bf16>) {
    if (pb.pairs) return scores_bf16(q.row(i0), q.stride, rows, pb.d, key_pairs, s);
  }
  tile_product<T, false, false>(rows, kKeyTile, pb.d, q_wide.row(0), q_wide.stride, kt, kKeyTile, s, kKeyTile);
}

// ---------------------------------------------------------------- forward

template <class T, class In>
[[gnu::always_inline]] inline void forward_tile_impl(const Problem<T>& pb, const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
                                                     const ops::AttentionResult& res, int64_t b, int64_t h, int64_t i0, ForwardScratch<T>& w) {
  const int64_t d = pb.d, dv = pb.dv, rows = std::min(kQueryTile, pb.nq - i0);
  const HeadRows<const In> k = head_rows<const In>(k_t, b, h), v = head_rows<const In>(v_t, b, h);
  const HeadRows<const In> q_in = head_rows<const In>(q_t, b, h);
  const HeadRows<const T> q = pb.pairs ? HeadRows<const T>{} : rows_as(q_in, i0, rows, d, w.wide_q.data());  // row 0 is query i0
  const T slope = pb.slopes ? pb.slopes[h] : T(0);
  const T* table = pb.distance_bias ? pb.distance_bias + h * pb.bias_bins : nullptr;
  T *o = w.o.data(), *s = w.s.data(), *row_max = w.row_max.data(), *row_sum = w.row_sum.data();
  std::fill_n(o, rows * dv, T(0));
  std::fill_n(row_max, rows, -std::numeric_limits<T>::infinity());
  std::fill_n(row_sum, rows, T(0));
  const int64_t key_end = std::min(pb.nk, pb.offset + i0 + rows);  // keys past it are masked for every row
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, key_end - j0);
    pack_keys(pb, k, j0, cols, w.kt.data(), w.key_pairs.data());
    tile_scores(pb, q_in, q, i0, rows, w.kt.data(), w.key_pairs.data(), s);
    for (int64_t r = 0; r < rows; ++r) {
      T* sr = s + r * kKeyTile;
      bias_and_mask(pb, slope, table, i0 + r, j0, cols, sr);
      T tile_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : tile_max)
      for (int64_t c = 0; c < cols; ++c) tile_max = std::max(tile_max, sr[c]);
      const T new_max = std::max(row_max[r], tile_max);  // finite: key 0 is in the first tile for every row
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < cols; ++c) {
        sr[c] = fastmath::exp(sr[c] - new_max);
        sum += sr[c];
      }
      const T rescale = fastmath::exp(row_max[r] - new_max);  // 0 on the first tile (row_max = -inf)
      row_sum[r] = row_sum[r] * rescale + sum;
      row_max[r] = new_max;
      if (rescale != T(1)) {
#pragma omp simd
        for (int64_t e = 0; e < dv; ++e) o[r * dv + e] *= rescale;
      }
    }
    const HeadRows<const T> vj = rows_as(v, j0, cols, dv, w.wide_kv.data());  // row 0 is key j0
    tile_product<T, false, true>(rows, dv, cols, s, kKeyTile, vj.row(0), vj.stride, o, dv);
  }
  T* out = res.out.data<T>();
  T* lse = res.logsumexp.data<T>() + (b * pb.heads + h) * pb.nq + i0;
  for (int64_t r = 0; r < rows; ++r) {
    T* dst = out + ((b * pb.nq + i0 + r) * pb.heads + h) * dv;
    const T inv = T(1) / row_sum[r];
#pragma omp simd
    for (int64_t e = 0; e < dv; ++e) dst[e] = o[r * dv + e] * inv;
    lse[r] = row_max[r] + std::log(row_sum[r]);
  }
}

// One function per (T, In) pair, so that PHASOR_SIMD_CLONES can mark the float32 ones.
template <class T, class In>
void forward_tile(const Problem<T>& pb, const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionResult& res, int64_t b,
                  int64_t h, int64_t i0, ForwardScratch<T>& w);
template <>
PHASOR_SIMD_CLONES void forward_tile<float, float>(const Problem<float>& pb, const Tensor& q, const Tensor& k, const Tensor& v,
                                                   const ops::AttentionResult& res, int64_t b, int64_t h, int64_t i0, ForwardScratch<float>& w) {
  forward_tile_impl<float, float>(pb, q, k, v, res, b, h, i0, w);
}
template <>
PHASOR_SIMD_CLONES void forward_tile<float, bf16>(const Problem<float>& pb, const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const ops::AttentionResult& res, int64_t b, int64_t h, int64_t i0, ForwardScratch<float>& w) {
  forward_tile_impl<float, bf16>(pb, q, k, v, res, b, h, i0, w);
}
template <>
void forward_tile<double, double>(const Problem<double>& pb, const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionResult& res,
                                  int64_t b, int64_t h, int64_t i0, ForwardScratch<double>& w) {
  forward_tile_impl<double, double>(pb, q, k, v, res, b, h, i0, w);
}

// ---------------------------------------------------------------- backward

struct BackwardTensors {
  const Tensor &grad, &q, &k, &v, &out, &lse;
  const ops::AttentionGrads& grads;  // ddistance_bias_rows [B, H, bins] (zeros) with a distance bias
};

template <class T, class In>
[[gnu::always_inline]] inline void backward_head_impl(const Problem<T>& pb, const BackwardTensors& t, int64_t b, int64_t h, BackwardScratch<T>& w) {
  const int64_t d = pb.d, dv_width = pb.dv, H = pb.heads;
  const HeadRows<const In> q_in = head_rows<const In>(t.q, b, h), k_in = head_rows<const In>(t.k, b, h), v_in = head_rows<const In>(t.v, b, h);
  const HeadRows<const T> dout = head_rows<const T>(t.grad, b, h), out = head_rows<const T>(t.out, b, h);
  const HeadRows<T> dq = head_rows<T>(t.grads.dq, b, h), dk = head_rows<T>(t.grads.dk, b, h), dv = head_rows<T>(t.grads.dv, b, h);
  const T* lse = t.lse.data<T>() + (b * H + h) * pb.nq;
  const T slope = pb.slopes ? pb.slopes[h] : T(0);
  const T* table = pb.distance_bias ? pb.distance_bias + h * pb.bias_bins : nullptr;
  // This (batch, head)'s row of the distance bias's gradient: the sum of dS over each bin's scores.
  const int64_t bins = table ? t.grads.ddistance_bias_rows.size(2) : 0;
  T* dbias = table ? t.grads.ddistance_bias_rows.data<T>() + (b * H + h) * bins : nullptr;
  T *s = w.s.data(), *dp = w.dp.data(), *delta = w.delta.data(), *dk_acc = w.dk.data(), *dv_acc = w.dv.data();

  // D_i = dO_i . O_i: the softmax backward's row term, once per row.
  for (int64_t i = 0; i < pb.nq; ++i) {
    const T *g = dout.row(i), *o = out.row(i);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t e = 0; e < dv_width; ++e) dot += g[e] * o[e];
    delta[i] = dot;
    std::fill_n(dq.row(i), d, T(0));
  }
  for (int64_t j0 = 0; j0 < pb.nk; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, pb.nk - j0);
    std::fill_n(dk_acc, cols * d, T(0));
    std::fill_n(dv_acc, cols * dv_width, T(0));
    pack_keys(pb, k_in, j0, cols, w.kt.data(), w.key_pairs.data());
    pack_transposed(v_in, j0, cols, dv_width, w.vt.data());
    const HeadRows<const T> k = rows_as(k_in, j0, cols, d, w.wide_kv.data());  // row 0 is key j0
    // The queries that see this tile (none: its keys come after every query, and get no gradient).
    for (int64_t i0 = std::max<int64_t>(0, j0 - pb.offset); i0 < pb.nq; i0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, pb.nq - i0);
      const HeadRows<const T> q = rows_as(q_in, i0, rows, d, w.wide_q.data());  // row 0 is query i0
      // P = exp(score - lse), recomputed.
      tile_scores(pb, q_in, q, i0, rows, w.kt.data(), w.key_pairs.data(), s);
      for (int64_t r = 0; r < rows; ++r) {
        T* sr = s + r * kKeyTile;
        bias_and_mask(pb, slope, table, i0 + r, j0, cols, sr);
        const T l = lse[i0 + r];
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) sr[c] = fastmath::exp(sr[c] - l);
      }
      tile_product<T, true, true>(cols, dv_width, rows, s, kKeyTile, dout.row(i0), dout.stride, dv_acc, dv_width);  // dV += P^T dO
      tile_product<T, false, false>(rows, kKeyTile, dv_width, dout.row(i0), dout.stride, w.vt.data(), kKeyTile, dp, kKeyTile);  // dP = dO V^T
      for (int64_t r = 0; r < rows; ++r) {  // dS = scale P (dP - D), in place of P
        T *sr = s + r * kKeyTile, *dpr = dp + r * kKeyTile;
        const T di = delta[i0 + r];
        if (dbias) {  // d loss / d bias: P (dP - D), unscaled, into the bin of each visible key's distance
          const int64_t visible = pb.visible(i0 + r, j0, cols), distance0 = pb.offset + i0 + r - j0;
          for (int64_t c = 0; c < visible; ++c) dbias[std::min(distance0 - c, bins - 1)] += sr[c] * (dpr[c] - di);
        }
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) sr[c] = pb.scale * sr[c] * (dpr[c] - di);
      }
      tile_product<T, false, true>(rows, d, cols, s, kKeyTile, k.row(0), k.stride, dq.row(i0), dq.stride);  // dQ += dS K
      tile_product<T, true, true>(cols, d, rows, s, kKeyTile, q.row(0), q.stride, dk_acc, d);              // dK += dS^T Q
    }
    for (int64_t c = 0; c < cols; ++c) {
      std::copy_n(dk_acc + c * d, d, dk.row(j0 + c));
      std::copy_n(dv_acc + c * dv_width, dv_width, dv.row(j0 + c));
    }
  }
}

template <class T, class In>
void backward_head(const Problem<T>& pb, const BackwardTensors& t, int64_t b, int64_t h, BackwardScratch<T>& w);
template <>
PHASOR_SIMD_CLONES void backward_head<float, float>(const Problem<float>& pb, const BackwardTensors& t, int64_t b, int64_t h,
                                                    BackwardScratch<float>& w) {
  backward_head_impl<float, float>(pb, t, b, h, w);
}
template <>
PHASOR_SIMD_CLONES void backward_head<float, bf16>(const Problem<float>& pb, const BackwardTensors& t, int64_t b, int64_t h,
                                                   BackwardScratch<float>& w) {
  backward_head_impl<float, bf16>(pb, t, b, h, w);
}
template <>
void backward_head<double, double>(const Problem<double>& pb, const BackwardTensors& t, int64_t b, int64_t h, BackwardScratch<double>& w) {
  backward_head_impl<double, double>(pb, t, b, h, w);
}

// f.template operator()<T, In>() for inputs of dtype `t`: bfloat16 inputs accumulate in float32, the others in their own dtype.
template <class F>
void dispatch_inputs(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f.template operator()<float, bf16>();
  dispatch_floating(t, op, [&]<class T>() { f.template operator()<T, T>(); });
}

template <class T>
Problem<T> problem(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& p) {
  return {q.size(2),         q.size(1),
          k.size(1),         q.size(3),
          v.size(3),         p.offset,
          static_cast<T>(p.scale),
          p.slopes.defined() ? p.slopes.data<T>() : nullptr,
          q.dtype() == DType::BFloat16 && use_scores_bf16(),
          p.distance_bias.defined() ? p.distance_bias.data<T>() : nullptr,
          p.distance_bias.defined() ? p.distance_bias.size(1) : 0};
}

}  // namespace

void CpuBackend::attention_forward(const ops::AttentionForwardArgs& args) {
  const ops::AttentionResult& out = args.out;
  const Tensor &q = args.q, &k = args.k, &v = args.v;
  const ops::AttentionParams& p = args.p;
  const int64_t batch = q.size(0), heads = q.size(2), tiles = (q.size(1) + kQueryTile - 1) / kQueryTile;
  dispatch_inputs(q.dtype(), "causal_attention", [&]<class T, class In>() {
    const Problem<T> pb = problem<T>(q, k, v, p);
    const int64_t tasks = batch * heads * tiles;
#pragma omp parallel if (tasks > 1)
    {
      ForwardScratch<T> w(pb.d, pb.dv, !std::is_same_v<T, In>, pb.pairs);
      // Later query tiles see more keys: hand tasks out one at a time.
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task)
        forward_tile<T, In>(pb, q, k, v, out, task / (heads * tiles), task / tiles % heads, task % tiles * kQueryTile, w);
    }
  });
}

void CpuBackend::attention_backward(const ops::AttentionBackwardArgs& args) {
  const ops::AttentionGrads& out = args.out;
  const Tensor &grad = args.grad, &q = args.q, &k = args.k, &v = args.v;
  const ops::AttentionResult& fwd = args.forward;
  const ops::AttentionParams& p = args.p;
  const int64_t batch = q.size(0), heads = q.size(2);
  const BackwardTensors t{grad, q, k, v, fwd.out, fwd.logsumexp, out};
  dispatch_inputs(q.dtype(), "causal_attention_backward", [&]<class T, class In>() {
    const Problem<T> pb = problem<T>(q, k, v, p);
#pragma omp parallel if (batch * heads > 1)
    {
      BackwardScratch<T> w(pb.d, pb.dv, pb.nq, !std::is_same_v<T, In>, pb.pairs);
#pragma omp for schedule(dynamic, 1)
      for (int64_t bh = 0; bh < batch * heads; ++bh) backward_head<T, In>(pb, t, bh / heads, bh % heads, w);
    }
  });
}

}  // namespace phasor::cpu
