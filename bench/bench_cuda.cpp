// GPU micro-benchmarks (Google Benchmark), timed with CUDA events on Phasor's
// stream:
//   - GEMM through Phasor (ops::matmul -> cuBLAS) against cuBLAS called directly,
//     float32 (also with TF32), complex64 and float64;
//   - the rotation kernels (RoPE table multiply, ComplexFormer rotation forward
//     and backward) as achieved bandwidth, beside a device-to-device copy;
//   - one training step of the README's small model (forward, backward,
//     clipping, AdamW), in tokens per second;
//   - the fused causal attention (FlashAttention-2 scheme), forward and
//     forward + backward, in TFLOP/s and ms at N = 1024, 4096, 16384.
// Built without CUDA, it only says so.
#ifdef PHASOR_WITH_CUDA
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/cuda.h"
#include "cuda/runtime.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tensor/attention.h"

using namespace phasor;

namespace {

const Device G = cuda(0);

// Times `body` (one or more launches) with events around it.
template <class F>
void timed(benchmark::State& state, F&& body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  body();  // warm-up (and first allocations)
  gpu::synchronize();
  for (auto _ : state) {
    cudaEventRecord(start, gpu::stream());
    body();
    cudaEventRecord(stop, gpu::stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

DType dtype_arg(int64_t code) { return code == 0 ? DType::Float32 : code == 1 ? DType::Complex64 : DType::Float64; }
double flops_per_mac(DType t) { return is_complex(t) ? 8.0 : 2.0; }

// ---- GEMM: Phasor vs cuBLAS ----

void BM_PhasorMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const DType dt = dtype_arg(state.range(1));
  const bool tf32 = state.range(2) != 0;
  gpu::set_allow_tf32(tf32);
  const Tensor a = ops::to_device(randn({n, n}, dt), G), b = ops::to_device(randn({n, n}, dt), G);
  // a b^T: the Linear layer's pattern, a transpose passed as a flag.
  timed(state, [&] { benchmark::DoNotOptimize(ops::matmul(a, b, MatOp::None, MatOp::Transpose)); });
  gpu::set_allow_tf32(false);
  state.counters["TFLOP/s"] = benchmark::Counter(flops_per_mac(dt) * n * n * n * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(dt)) + (tf32 ? " tf32" : ""));
}

void BM_CublasDirect(benchmark::State& state) {
  const int64_t n = state.range(0);
  const DType dt = dtype_arg(state.range(1));
  const bool tf32 = state.range(2) != 0;
  // The same random operands as BM_PhasorMatmul (tensor cores run faster on zeros).
  const Tensor ta = ops::to_device(randn({n, n}, dt), G), tb = ops::to_device(randn({n, n}, dt), G), tc = empty({n, n}, dt, G);
  void *a = ta.raw_data(), *b = tb.raw_data(), *c = tc.raw_data();
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, gpu::stream());
  cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const int ni = static_cast<int>(n);
  timed(state, [&] {
    if (dt == DType::Float32) {
      const float one = 1, zero = 0;
      cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<float*>(b), ni, static_cast<float*>(a), ni, &zero,
                  static_cast<float*>(c), ni);
    } else if (dt == DType::Complex64) {
      const cuComplex one{1, 0}, zero{0, 0};
      cublasCgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<cuComplex*>(b), ni, static_cast<cuComplex*>(a), ni, &zero,
                  static_cast<cuComplex*>(c), ni);
    } else {
      const double one = 1, zero = 0;
      cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<double*>(b), ni, static_cast<double*>(a), ni, &zero,
                  static_cast<double*>(c), ni);
    }
  });
  cublasDestroy(h);
  state.counters["TFLOP/s"] = benchmark::Counter(flops_per_mac(dt) * n * n * n * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(dt)) + (tf32 ? " tf32" : ""));
}

void gemm_args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1024, 4096}) b->Args({n, 0, 0});
  for (int64_t n : {1024, 4096}) b->Args({n, 0, 1});
  b->Args({2048, 1, 0});
  b->Args({2048, 2, 0});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_PhasorMatmul)->Apply(gemm_args);
BENCHMARK(BM_CublasDirect)->Apply(gemm_args);

// The attention pattern: [B, N, H, d] permuted to [B, H, N, d], scores q k^T (pointer-array batches).
void BM_PhasorAttentionScores(benchmark::State& state) {
  const Tensor q = ops::to_device(randn({16, 128, 4, 32}), G), k = ops::to_device(randn({16, 128, 4, 32}), G);
  timed(state, [&] {
    benchmark::DoNotOptimize(ops::matmul(ops::permute(q, {0, 2, 1, 3}), ops::permute(k, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose));
  });
}
BENCHMARK(BM_PhasorAttentionScores)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- rotation kernels: bandwidth vs a device-to-device copy ----
// z [B, N, H, P] complex64 with B 16, N 1024, H 32, P 64: 33.5 M values, 268 MB each way.
const Dims kRotShape = {16, 1024, 32, 64};

void BM_DeviceCopy(benchmark::State& state) {
  const Tensor src = empty(kRotShape, DType::Complex64, G), dst = empty(kRotShape, DType::Complex64, G);
  timed(state, [&] { cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice, gpu::stream()); });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(src.nbytes()));
}
BENCHMARK(BM_DeviceCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_Rotate(benchmark::State& state) {
  const Tensor z = ops::to_device(randn(kRotShape, DType::Complex64), G);
  const Tensor table = ops::to_device(ops::rotary_table(kRotShape[1], kRotShape[3], 0, 10000.0, 0.0, 1, DType::Complex64), G);
  timed(state, [&] { benchmark::DoNotOptimize(ops::rotate(z, table, false)); });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(z.nbytes()));
}
BENCHMARK(BM_Rotate)->UseManualTime()->Unit(benchmark::kMicrosecond);

ops::CmhaParams cmha_params() {
  const int64_t h = kRotShape[2], p = kRotShape[3];
  return {ops::to_device(randn({h, p}), G), ops::to_device(randn({h, p}), G), ops::to_device(ones({h}), G), 0, 10000.0};
}

void BM_CmhaRotate(benchmark::State& state) {
  const Tensor z = ops::to_device(randn(kRotShape, DType::Complex64), G);
  const ops::CmhaParams p = cmha_params();
  timed(state, [&] { benchmark::DoNotOptimize(ops::cmha_rotate(z, p)); });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(z.nbytes()));
}
BENCHMARK(BM_CmhaRotate)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_CmhaRotateBackward(benchmark::State& state) {
  const Tensor z = ops::to_device(randn(kRotShape, DType::Complex64), G), g = ops::to_device(randn(kRotShape, DType::Complex64), G);
  const ops::CmhaParams p = cmha_params();
  timed(state, [&] { benchmark::DoNotOptimize(ops::cmha_rotate_backward(g, z, p)); });
  // reads grad and z, writes dz
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * static_cast<int64_t>(z.nbytes()));
}
BENCHMARK(BM_CmhaRotateBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- a training step of the README's small model ----
void BM_TrainStep(benchmark::State& state) {
  ModelConfig cfg;  // complexformer, d_model 128, 4 layers, 4 heads, d_ff 352
  cfg.position = state.range(0) == 0 ? Position::ComplexFormer : Position::Rope;
  const int64_t batch = 16, seq = 128;
  CausalLM model(cfg, 1);
  model.to(G);
  nn::AdamW opt({{model.decayed_parameters(), 0.1, 1.0}, {model.undecayed_parameters(), 0.0, 1.0}}, {3e-3, 0.9, 0.95, 1e-8});
  Generator gen(3);
  const Tensor tokens = ops::to(uniform({batch, seq}, 0, 255.99, DType::Float64, &gen), DType::Int64);
  const Tensor targets = ops::to(uniform({batch, seq}, 0, 255.99, DType::Float64, &gen), DType::Int64);
  auto step = [&] {
    const Tensor loss = model.loss(tokens, targets);
    const double value = loss.item<double>();  // the training loop reads the loss every step
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    benchmark::DoNotOptimize(value);
  };
  step();
  gpu::synchronize();
  for (auto _ : state) {
    step();
    gpu::synchronize();
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(batch * seq), benchmark::Counter::kIsIterationInvariantRate);
  const gpu::MemoryStats m = gpu::memory_stats();
  state.counters["peak_MiB"] = static_cast<double>(m.peak_allocated) / (1024.0 * 1024.0);
  state.counters["reserved_MiB"] = static_cast<double>(m.reserved) / (1024.0 * 1024.0);
  state.SetLabel(std::string(position_name(cfg.position)));
}
BENCHMARK(BM_TrainStep)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- fused causal attention (cuda/attention.cu) ----
// Registered last: the newest kernels, so a failure there leaves the figures above in place.
// float32 q, k, v [B, N, H, d], H = 8, with B * H * N = 2^17 at every N: the forward's
// query tiles of 128 rows make 1024 blocks, about 8 for each of an H200's 132 SMs
// (the backward's key tiles of 32 or 64 rows, 2 to 4 times that). FLOPs as
// FlashAttention-2 counts them: the forward's two products over the causal half,
// 4 B H d N(N+1)/2, and the backward 2.5 times that (five products; the kernels
// recompute S and dP once more, not counted).
constexpr int64_t kAttnTokensHeads = int64_t{1} << 17;
constexpr int64_t kAttnHeads = 8;

double attention_flops(int64_t bh, int64_t n, int64_t d) {
  return 4.0 * static_cast<double>(bh * d) * static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;
}

void BM_FusedAttention(benchmark::State& state) {
  const int64_t n = state.range(0), d = state.range(1);
  const bool backward = state.range(2) != 0;
  const int64_t bh = kAttnTokensHeads / n, h = kAttnHeads, b = bh / h;
  const Dims shape = {b, n, h, d};
  const Tensor q = randn(shape, DType::Float32, nullptr, G), k = randn(shape, DType::Float32, nullptr, G);
  const Tensor v = randn(shape, DType::Float32, nullptr, G), g = randn(shape, DType::Float32, nullptr, G);
  const ops::AttentionParams p{1.0 / std::sqrt(static_cast<double>(d)), 0, Tensor()};
  timed(state, [&] {
    const ops::AttentionResult r = ops::causal_attention(q, k, v, p);
    if (backward) benchmark::DoNotOptimize(ops::causal_attention_backward(g, q, k, v, r, p));
    benchmark::DoNotOptimize(r);
  });
  const double flops = attention_flops(bh, n, d) * (backward ? 3.5 : 1.0);
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(backward ? "fwd+bwd" : "fwd") + " B " + std::to_string(b) + " H " + std::to_string(h));
}
void attention_args(benchmark::internal::Benchmark* bm) {
  for (int64_t backward : {0, 1})
    for (int64_t n : {1024, 4096, 16384})
      for (int64_t d : {32, 64, 128}) bm->Args({n, d, backward});
  bm->ArgNames({"N", "d", "bwd"})->UseManualTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_FusedAttention)->Apply(attention_args);

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::available()) {
    std::printf("bench_cuda: no usable GPU (%s)\n", gpu::unavailable_reason().c_str());
    return 0;
  }
  std::printf("bench_cuda on %s\n", gpu::device_name().c_str());
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#else
#include <cstdio>
int main() {
  std::printf("bench_cuda: Phasor was built without CUDA (configure with -DPHASOR_CUDA=ON and nvcc present)\n");
  return 0;
}
#endif
