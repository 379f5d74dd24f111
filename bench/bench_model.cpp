// Model-level benchmarks: training throughput of the README's model for
// complexformer and rope (the ComplexFormer overhead is their ratio), the
// rotation alone, fused attention against the materialised path, and
// generation cost per token at several cache lengths.
//
//   build/bench/bench_model --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <optional>

#include "app/evaluate.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tensor/cpu/scores_bf16.h"
#include "tensor/storage.h"

using namespace phasor;

namespace {
ModelConfig readme_model(Position position) {
  ModelConfig c;
  c.position = position;
  c.d_model = 128;
  c.n_layers = 4;
  c.n_heads = 4;
  c.d_ff = 352;
  c.max_seq_len = 4096;
  return c;
}

Tensor tokens(int64_t b, int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> ids(static_cast<size_t>(b * n));
  for (auto& t : ids) t = static_cast<int64_t>(g.next_u64() % 256);
  return from_vector(ids, {b, n});
}

// forward + backward + AdamW on batch 16 x 128 tokens; reports tokens/s.
void BM_train_step(benchmark::State& state, Position position, AttentionImpl attention) {
  CausalLM model(readme_model(position), 1);
  model.set_attention(attention);
  nn::AdamW opt({{model.named_parameters(), 0.1, 1.0}}, {3e-3, 0.9, 0.95, 1e-8});
  const Tensor x = tokens(16, 128, 1), y = tokens(16, 128, 2);
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss = model.loss(x, y);
    loss.backward();
    opt.step();
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * 16 * 128), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_train_step, complexformer, Position::ComplexFormer, AttentionImpl::Fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_train_step, rope, Position::Rope, AttentionImpl::Fused)->Unit(benchmark::kMillisecond)->UseRealTime();
// The same steps with the materialised attention: what the fused op changed at N = 128.
BENCHMARK_CAPTURE(BM_train_step, complexformer_materialized, Position::ComplexFormer, AttentionImpl::Materialized)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_train_step, rope_materialized, Position::Rope, AttentionImpl::Materialized)->Unit(benchmark::kMillisecond)->UseRealTime();

// The CMHA rotation of one layer's queries (B 16, N 128, H 4, P 16), forward + backward.
void BM_cmha_rotation(benchmark::State& state) {
  const Tensor z = randn({16, 128, 4, 16}, DType::Complex64).requires_grad_();
  const Tensor delta = ones({4, 16}).requires_grad_(), bias = zeros({4, 16}).requires_grad_(), beta = ones({4}).requires_grad_();
  for (auto _ : state) {
    Tensor out = cmha_rotate(z, delta, bias, beta, 0, 10000.0);
    out.backward(ones(out.shape(), out.dtype()));
  }
  state.SetBytesProcessed(state.iterations() * z.nbytes() * 4);  // read z, write out; read z and grad, write dz
}
BENCHMARK(BM_cmha_rotation)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_rope_rotation(benchmark::State& state) {
  const Tensor z = randn({16, 128, 4, 16}, DType::Complex64).requires_grad_();
  for (auto _ : state) {
    Tensor out = rotate(z, ops::rotary_table(128, 16, 0, 10000.0, 0.0, 1, DType::Complex64));
    out.backward(ones(out.shape(), out.dtype()));
  }
  state.SetBytesProcessed(state.iterations() * z.nbytes() * 4);
}
BENCHMARK(BM_rope_rotation)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Attention alone, forward + backward, B 1 x H 4 heads of width d over N
// positions: the fused op against the materialised path. Reports the causal
// attention FLOPs (4 N^2 d per head forward: two GEMMs, half of each masked;
// backward 2.5x that) per second, and the allocator's peak above the inputs.
// `inputs` bfloat16: the fused op as mixed precision runs it (causal_attention_in:
// q, k, v rounded, float32 accumulation), the rounding included; `widened`:
// its scores from tiles widened to float32, not on AVX512-BF16 (tensor/cpu/scores_bf16.h).
void BM_attention(benchmark::State& state, AttentionImpl impl, DType inputs = DType::Float32, bool widened = false) {
  std::optional<cpu::WidenedScores> widen_scores;
  if (widened) widen_scores.emplace();
  const int64_t n = state.range(0), d = state.range(1), h = 4;
  Generator g(1);
  const Tensor q = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
  const Tensor k = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
  const Tensor v = randn({1, n, h, d}, DType::Float32, &g).requires_grad_();
  const Tensor grad = randn({1, n, h, d}, DType::Float32, &g);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t before = memory_stats(DeviceType::CPU).in_use;
  reset_peak_memory(DeviceType::CPU);
  for (auto _ : state) {
    const Tensor o = impl == AttentionImpl::Fused ? causal_attention_in(inputs, q, k, v, scale) : materialized_attention(q, k, v, scale);
    o.backward(grad);
  }
  const double flops = 3.5 * 4.0 * static_cast<double>(n * n * d * h) / 2.0;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_MiB"] = static_cast<double>(memory_stats(DeviceType::CPU).peak - before) / (1 << 20);
}
BENCHMARK_CAPTURE(BM_attention, fused, AttentionImpl::Fused)
    ->ArgsProduct({{128, 512, 1024, 2048, 4096}, {32, 64}})
    ->ArgNames({"N", "d"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_attention, fused_bf16, AttentionImpl::Fused, DType::BFloat16)
    ->ArgsProduct({{128, 512, 1024, 2048, 4096}, {32, 64}})
    ->ArgNames({"N", "d"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_attention, fused_bf16_widened, AttentionImpl::Fused, DType::BFloat16, true)
    ->ArgsProduct({{128, 512, 1024, 2048, 4096}, {32, 64}})
    ->ArgNames({"N", "d"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_attention, materialized, AttentionImpl::Materialized)
    ->ArgsProduct({{128, 512, 1024, 2048, 4096}, {32, 64}})
    ->ArgNames({"N", "d"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One new token with `cache` positions already stored (KV cache): should stay near flat.
void BM_generate_token(benchmark::State& state) {
  const int64_t cache_len = state.range(0);
  CausalLM model(readme_model(Position::ComplexFormer), 1);
  NoGradGuard no_grad;
  KVCache cache = model.make_cache(1, cache_len + 1);
  model.forward(tokens(1, cache_len, 3), &cache);
  const Tensor next = tokens(1, 1, 4);
  for (auto _ : state) {
    cache.length = cache_len;  // overwrite the same slot each iteration
    benchmark::DoNotOptimize(model.forward(next, &cache));
  }
}
BENCHMARK(BM_generate_token)->Arg(64)->Arg(512)->Arg(2048)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

#include "bench/benchmark_main.h"  // main()
