// The fused causal attention (tensor/attention.h, autograd/fused.h) against
// the materialised path it replaces (scores, attention_softmax, a GEMM): the
// op alone, through every position variant of the model, in float64 gradcheck,
// and its memory.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "models/transformer.h"
#include "phasor.h"
#include "tensor/cpu/scores_bf16.h"
#include "tensor/storage.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

// max |got - want| / max |want|: the error relative to the tensor's scale
// (an element-wise relative error is meaningless on entries near zero).
double relative_error(const Tensor& got, const Tensor& want) {
  const double scale = max_abs(want);
  return scale > 0 ? max_abs_diff(got, want) / scale : max_abs(got);
}

struct Shape {
  int64_t b, nq, h, d, offset;
  bool alibi;
};

// q, k, v leaves of `shape` (Nk = offset + Nq: a KV-cache chunk when offset > 0).
std::vector<Tensor> inputs(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  const int64_t nk = s.offset + s.nq;
  return {leaf(g, {s.b, s.nq, s.h, s.d}, dt), leaf(g, {s.b, nk, s.h, s.d}, dt), leaf(g, {s.b, nk, s.h, s.d}, dt)};
}

Tensor slopes_for(const Shape& s, DType dt) {
  if (!s.alibi) return Tensor();
  const std::vector<double> sl = alibi_slopes(s.h);
  return ops::to(from_vector(sl), dt);
}

std::string describe(const Shape& s) {
  return "B " + std::to_string(s.b) + " Nq " + std::to_string(s.nq) + " H " + std::to_string(s.h) + " d " + std::to_string(s.d) + " offset " +
         std::to_string(s.offset) + (s.alibi ? " alibi" : "");
}

}  // namespace

TEST_CASE("fused causal attention matches the materialised path: output and the gradients of q, k, v") {
  // N not a multiple of the 64-row tile, N = 1, offsets > 0, head widths 16/32/64, ALiBi on and off.
  const std::vector<Shape> shapes = {{1, 1, 1, 16, 0, false},  {2, 5, 3, 16, 0, true},    {1, 63, 2, 32, 0, false}, {1, 64, 2, 32, 0, true},
                                     {2, 65, 2, 32, 0, false}, {1, 130, 4, 64, 0, true},  {1, 200, 2, 16, 0, false}, {2, 7, 2, 32, 9, true},
                                     {1, 1, 3, 64, 70, false}, {1, 70, 2, 32, 100, true}, {1, 3, 1, 20, 2, false}};
  uint64_t seed = 1;
  for (const Shape& shape : shapes) {
    CAPTURE(describe(shape));
    const double scale = 1.0 / std::sqrt(static_cast<double>(shape.d));
    const Tensor slopes = slopes_for(shape, DType::Float32);
    const std::vector<Tensor> fin = inputs(shape, DType::Float32, seed), rin = inputs(shape, DType::Float32, seed++);
    const Tensor fused = causal_attention(fin[0], fin[1], fin[2], scale, shape.offset, slopes);
    const Tensor ref = materialized_attention(rin[0], rin[1], rin[2], scale, shape.offset, slopes);
    CHECK(relative_error(fused, ref) < 1e-5);
    Generator g(seed + 100);
    const Tensor weights = randn(fused.shape(), DType::Float32, &g);
    sum(fused * weights).backward();
    sum(ref * weights).backward();
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);  // q, k, v
      CHECK(relative_error(fin[i].grad(), rin[i].grad()) < 1e-5);
    }
  }
}

TEST_CASE("fused causal attention with bfloat16 inputs accumulates in float32: it is float32 attention on the rounded inputs") {
  // Both ways to form the scores: AVX512-BF16 pairs (where the CPU has it) and tiles widened to float32.
  if (!cpu::use_scores_bf16()) MESSAGE("this CPU has no AVX512-BF16: only the widened scores were checked");
  for (const bool widened : {false, true}) {
  std::optional<cpu::WidenedScores> force;
  if (widened) force.emplace();
  CAPTURE(widened);
  // Across the 64-row tiles, with a query offset and ALiBi; head width 21 is odd (a last half pair) and no multiple of a vector.
  uint64_t seed = 40;
  for (const Shape& shape : {Shape{2, 65, 2, 32, 0, true}, Shape{1, 70, 2, 32, 100, true}, Shape{1, 3, 1, 21, 2, false}}) {
    CAPTURE(describe(shape));
    const double scale = 1.0 / std::sqrt(static_cast<double>(shape.d));
    const Tensor slopes = slopes_for(shape, DType::Float32);
    const std::vector<Tensor> in = inputs(shape, DType::Float32, seed), plain = inputs(shape, DType::Float32, seed++);  // equal leaves
    std::vector<Tensor> rounded;  // float32 leaves: the inputs rounded to bfloat16
    for (const Tensor& t : in) {
      rounded.push_back(ops::to(ops::to(t, DType::BFloat16), DType::Float32).requires_grad_());
      REQUIRE(max_abs_diff(rounded.back(), t) > 0);  // the rounding is seen
    }
    const Tensor mixed = causal_attention_in(DType::BFloat16, in[0], in[1], in[2], scale, shape.offset, slopes);
    const Tensor on_rounded = causal_attention(rounded[0], rounded[1], rounded[2], scale, shape.offset, slopes);
    const Tensor unrounded = causal_attention(plain[0], plain[1], plain[2], scale, shape.offset, slopes);
    REQUIRE(mixed.dtype() == DType::Float32);
    CHECK(relative_error(mixed, on_rounded) < 1e-6);
    // bfloat16's rounding (2^-9 relative) of q and k moves each score by up to 2^-8 of |q| |k|, and the softmax
    // weights with it: 2^-7 of the scale (4.6e-3 measured at d 21).
    CHECK(relative_error(mixed, unrounded) < std::ldexp(1.0, -7));
    Generator g(seed + 100);
    const Tensor weights = randn(mixed.shape(), DType::Float32, &g);
    sum(mixed * weights).backward();
    sum(on_rounded * weights).backward();
    sum(unrounded * weights).backward();
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);  // q, k, v
      REQUIRE(in[i].grad().dtype() == DType::Float32);
      CHECK(relative_error(in[i].grad(), rounded[i].grad()) < 1e-6);
      // As the output's; dS = P (dP - D) subtracts close terms on dq and dk (5e-3 measured).
      CHECK(relative_error(in[i].grad(), plain[i].grad()) < std::ldexp(1.0, -7));
    }
  }
  }
}

TEST_CASE("the raw fused attention takes bfloat16 q, k, v and returns float32 results; mixed dtypes are refused") {
  Generator g(9);
  const Tensor q = ops::to(randn({1, 5, 2, 8}, DType::Float32, &g), DType::BFloat16);
  const Tensor k = ops::to(randn({1, 5, 2, 8}, DType::Float32, &g), DType::BFloat16), v = ops::to(randn({1, 5, 2, 8}, DType::Float32, &g), DType::BFloat16);
  const ops::AttentionParams p{0.5, 0, Tensor()};
  const ops::AttentionResult r = ops::causal_attention(q, k, v, p);
  CHECK(r.out.dtype() == DType::Float32);
  CHECK(r.logsumexp.dtype() == DType::Float32);
  const ops::AttentionGrads d = ops::causal_attention_backward(ones(r.out.shape()), q, k, v, r, p);
  CHECK((d.dq.dtype() == DType::Float32 && d.dk.dtype() == DType::Float32 && d.dv.dtype() == DType::Float32));
  CHECK_THROWS_WITH_AS(ops::causal_attention(q, ops::to(k, DType::Float32), v, p), doctest::Contains("must share one real floating dtype"),
                       Error);
}

TEST_CASE("fused causal attention passes gradcheck (and gradgradcheck) in float64, across tile boundaries and with a query offset") {
  for (const Shape& shape : {Shape{2, 5, 2, 3, 0, true}, Shape{1, 4, 1, 2, 3, false}, Shape{1, 70, 1, 2, 0, true}, Shape{1, 66, 1, 2, 5, false}}) {
    CAPTURE(describe(shape));
    const Tensor slopes = slopes_for(shape, DType::Float64);
    // The second order (the materialised path's, under create_graph) on the small shapes only: it costs seconds at 70 queries.
    check_grad("causal_attention " + describe(shape),
               [&](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], 0.6, shape.offset, slopes); },
               inputs(shape, DType::Float64, 7), {}, /*second_order=*/shape.nq <= 8);
  }
}

TEST_CASE("fused causal attention reads a KV cache's strided view in place") {
  Generator g(5);
  const Tensor cache_k = randn({2, 96, 3, 16}, DType::Float32, &g), cache_v = randn({2, 96, 3, 16}, DType::Float32, &g);
  const Tensor q = randn({2, 4, 3, 16}, DType::Float32, &g);
  const Tensor k = ops::narrow(cache_k, 1, 0, 74), v = ops::narrow(cache_v, 1, 0, 74);  // 70 stored + this chunk of 4
  REQUIRE(!k.is_contiguous());
  const Tensor got = causal_attention(q, k, v, 0.25, 70);
  const Tensor want = causal_attention(q, ops::contiguous(k), ops::contiguous(v), 0.25, 70);
  CHECK(max_abs_diff(got, want) == 0.0);
}

TEST_CASE("every position variant: fused and materialised attention give the same loss and parameter gradients") {
  for (const PositionVariant& variant : kPositionVariants) {
    for (const CmhaInit init : {CmhaInit::Rope, CmhaInit::Paper}) {
      if (init == CmhaInit::Paper && variant.position != Position::ComplexFormer) continue;
      CAPTURE(variant.name);
      CAPTURE(init == CmhaInit::Paper);
      ModelConfig c = model_config(variant.position, {.d_model = 64, .n_layers = 2, .n_heads = 4, .d_ff = 96, .max_seq_len = 160});
      c.cmha_init = init;
      CausalLM fused(c, 11), reference(c, 11);
      reference.set_attention(AttentionImpl::Materialized);
      Generator g(12);
      std::vector<int64_t> ids(2 * 131);
      for (auto& t : ids) t = static_cast<int64_t>(g.next_u64() % 256);
      const Tensor tokens = from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + 2 * 130), {2, 130});
      Tensor targets = from_vector(std::vector<int64_t>(ids.begin() + 2, ids.end()), {2, 130});
      const Tensor lf = fused.loss(tokens, targets), lr = reference.loss(tokens, targets);
      CHECK(close(lf.item<double>(), lr.item<double>(), {.rtol = 1e-5}));
      lf.backward();
      lr.backward();
      const auto fp = fused.named_parameters(), rp = reference.named_parameters();
      REQUIRE(fp.size() == rp.size());
      for (size_t i = 0; i < fp.size(); ++i) {
        CAPTURE(fp[i].first);
        CHECK(relative_error(fp[i].second.grad(), rp[i].second.grad()) < 1e-5);
      }
    }
  }
}

TEST_CASE("generation through the KV cache with the fused path matches one full forward") {
  for (const Position position : {Position::ComplexFormer, Position::Alibi, Position::XPos}) {
    CAPTURE(static_cast<int>(position));
    const ModelConfig c = model_config(position, {.d_model = 32, .n_layers = 2, .n_heads = 2, .d_ff = 64, .max_seq_len = 512});
    const CausalLM model(c, 3);
    Generator g(4);
    std::vector<int64_t> ids(300);
    for (auto& t : ids) t = static_cast<int64_t>(g.next_u64() % 256);
    NoGradGuard no_grad;
    const Tensor full = model.forward(from_vector(ids, {1, 300}));
    KVCache cache = model.make_cache(1, 300);
    int64_t done = 0;
    for (int64_t chunk : {70, 1, 129, 1, 99}) {  // crosses the cache's first capacity (256) and the 64-key tiles
      const std::vector<int64_t> part(ids.begin() + done, ids.begin() + done + chunk);
      const Tensor step = model.forward(from_vector(part, {1, chunk}), &cache);
      CHECK(relative_error(step, ops::narrow(full, 1, done, chunk)) < 1e-5);
      done += chunk;
    }
    CHECK(cache.length == 300);
  }
}

TEST_CASE("fused attention's forward + backward memory at N = 4096 is linear in N; the materialised path's is not") {
  // B 1, H 2, d 32: q, k, v are 1 MiB each; one [H, N, N] float32 matrix is 128 MiB.
  const int64_t n = 4096, h = 2, d = 32;
  const int64_t tensor_bytes = n * h * d * static_cast<int64_t>(sizeof(float));
  // The stated bound, linear in N: q, k, v, the output, the upstream gradient
  // and dq, dk, dv are 8 tensors of N H d floats; allow 12.
  const int64_t bound = 12 * tensor_bytes;
  auto peak_of = [&](bool fused) {
    Generator g(9);
    const Tensor q = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
    const Tensor k = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
    const Tensor v = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
    const int64_t before = memory_stats(DeviceType::CPU).in_use;
    reset_peak_memory(DeviceType::CPU);
    {
      const Tensor o = fused ? causal_attention(q, k, v, 0.2) : materialized_attention(q, k, v, 0.2, 0, Tensor());
      o.backward(ones(o.shape()));
    }
    return memory_stats(DeviceType::CPU).peak - before + 3 * tensor_bytes;  // q, k, v counted in
  };
  const int64_t fused_peak = peak_of(true);
  CHECK_MESSAGE(fused_peak < bound, "fused peak ", fused_peak, " bytes, bound ", bound);
  const int64_t materialised_peak = peak_of(false);
  CHECK_MESSAGE(materialised_peak > 8 * bound, "materialised peak ", materialised_peak, " bytes");  // the measure can see an N x N matrix
}

TEST_CASE("fused causal attention refuses bad shapes with one-line errors") {
  const Tensor q = zeros({1, 4, 2, 8}), k = zeros({1, 4, 2, 8});
  CHECK(contains(error_of([&] { causal_attention(q, zeros({1, 4, 3, 8}), zeros({1, 4, 3, 8}), 1.0); }), "do not match q"));
  CHECK(contains(error_of([&] { causal_attention(q, k, zeros({1, 5, 2, 8}), 1.0); }), "do not match q"));
  CHECK(contains(error_of([&] { causal_attention(zeros({4, 2, 8}), k, k, 1.0); }), "expected q [B, Nq, H, d]"));
  CHECK(contains(error_of([&] { causal_attention(q, ops::to(k, DType::Float64), k, 1.0); }), "one real floating dtype"));
  CHECK(contains(error_of([&] { causal_attention(q, k, k, 1.0, -1); }), "non-negative"));
  CHECK(contains(error_of([&] { causal_attention(q, zeros({1, 0, 2, 8}), zeros({1, 0, 2, 8}), 1.0); }), "at least one key"));
  CHECK(contains(error_of([&] { causal_attention(q, k, k, 1.0, 0, zeros({3})); }), "slopes shape"));
}
