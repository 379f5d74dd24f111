// Engine micro-benchmarks (Google Benchmark), each beside its yardstick in the
// same binary: memcpy for elementwise ops, a direct cblas call for matmul,
// LibTorch (when found) for dispatch and autograd overhead.
//
//   build/bench/bench_core --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>

#include "phasor.h"
#include "tensor/cpu/onednn_gemm.h"
#include "tensor/cpu/tile_product.h"

#ifdef PHASOR_HAVE_TORCH
#include <torch/torch.h>
#endif

using namespace phasor;

namespace {
constexpr int64_t kElems = 4 << 20;  // 4M float32

// Bytes moved per iteration are reported so Google Benchmark prints GB/s.
void BM_memcpy_4M(benchmark::State& state) {
  std::vector<float> a(kElems, 1.0f), b(kElems, 2.0f), c(kElems);
  for (auto _ : state) {
    std::memcpy(c.data(), a.data(), kElems * 4);
    std::memcpy(c.data(), b.data(), kElems * 4);  // add reads two arrays and writes one: compare with 2 copies
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 3);
}
BENCHMARK(BM_memcpy_4M);

void BM_add_4M(benchmark::State& state) {
  const Tensor a = randn({kElems}), b = randn({kElems});
  for (auto _ : state) benchmark::DoNotOptimize(ops::binary(ops::Binary::Add, a, b));
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 3);
}
BENCHMARK(BM_add_4M);

void BM_mul_4M(benchmark::State& state) {
  const Tensor a = randn({kElems}), b = randn({kElems});
  for (auto _ : state) benchmark::DoNotOptimize(ops::binary(ops::Binary::Mul, a, b));
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 3);
}
BENCHMARK(BM_mul_4M);

template <DType dt>
void BM_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = randn({n, n}, dt), b = randn({n, n}, dt);
  for (auto _ : state) benchmark::DoNotOptimize(ops::matmul(a, b));
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n * (is_complex(dt) ? 4 : 1));
}
BENCHMARK(BM_matmul<DType::Float32>)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_matmul<DType::Complex64>)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// The same products through cblas directly (including the output allocation Phasor makes).
void BM_cblas_sgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    Tensor c = empty({n, n});
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f, c.data<float>(), n);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * 2 * int64_t{n} * n * n);
}
BENCHMARK(BM_cblas_sgemm)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// float32 GEMMs at the model's shapes through each library (tensor/cpu/onednn_gemm.h):
// M = 2048 rows (16 x 128 tokens), (N, K) from the README model and the deep one,
// in the three forms of a linear layer's step: Y = X W^T (forward), dX = dY W,
// dW = dY^T X. Args: library (0 OpenBLAS, 1 oneDNN), form (0, 1, 2), N, K.
void BM_gemm_library(benchmark::State& state) {
  const bool onednn = state.range(0) == 1;
  const int64_t form = state.range(1), m = 2048, n = state.range(2), k = state.range(3);
  if (onednn && !cpu::onednn_available()) {
    state.SkipWithError("this build has no oneDNN");
    return;
  }
  cpu::set_gemm_library(onednn ? cpu::GemmLibrary::OneDNN : cpu::GemmLibrary::OpenBLAS);
  Tensor a, b;
  MatOp op_a = MatOp::None, op_b = MatOp::None;
  if (form == 0) a = randn({m, k}), b = randn({n, k}), op_b = MatOp::Transpose;       // [m, k] x [n, k]^T
  else if (form == 1) a = randn({m, n}), b = randn({n, k});                            // [m, n] x [n, k]
  else a = randn({m, n}), b = randn({m, k}), op_a = MatOp::Transpose;                 // [m, n]^T x [m, k]
  for (auto _ : state) benchmark::DoNotOptimize(ops::matmul(a, b, op_a, op_b));
  cpu::set_gemm_library(std::nullopt);
  state.SetItemsProcessed(state.iterations() * 2 * m * n * k);  // items/s = FLOP/s
  state.SetLabel(std::string(onednn ? "onednn" : "openblas") + (form == 0 ? " X W^T" : form == 1 ? " dY W" : " dY^T X"));
}
BENCHMARK(BM_gemm_library)
    ->ArgsProduct({{0, 1}, {0, 1, 2}, {128, 352, 768}, {128, 352, 704}})
    ->UseRealTime()  // the product runs on the OpenMP pool: wall time, not the main thread's CPU time
    ->Unit(benchmark::kMicrosecond);

// The fused attention's two forward tile products, S = Q K^T ([64, 64] over the
// head width d) and O += P V ([64, d] over 64 keys): the micro-kernel it uses
// (tensor/cpu/tile_product.h) against OpenBLAS sgemm on the same tiles, one
// thread (the kernel calls them from inside its own parallel region).
PHASOR_SIMD_CLONES void attention_tiles_micro(int64_t d, const float* q, const float* kt, const float* v, float* s, float* o) {
  cpu::tile_product<float, false, false>(64, 64, d, q, d, kt, 64, s, 64);
  cpu::tile_product<float, false, true>(64, d, 64, s, 64, v, d, o, d);
}
void attention_tiles_sgemm(int64_t d, const float* q, const float* kt, const float* v, float* s, float* o) {
  const int di = static_cast<int>(d);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, di, 1.0f, q, di, kt, 64, 0.0f, s, 64);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, di, 64, 1.0f, s, 64, v, di, 1.0f, o, di);
}
void BM_attention_tiles(benchmark::State& state, bool micro) {
  const int64_t d = state.range(0);
  openblas_set_num_threads(1);
  const Tensor q = randn({64, d}), kt = randn({d, 64}), v = randn({64, d});
  Tensor s = empty({64, 64}), o = zeros({64, d});
  for (auto _ : state) {
    (micro ? attention_tiles_micro : attention_tiles_sgemm)(d, q.data<float>(), kt.data<float>(), v.data<float>(), s.data<float>(), o.data<float>());
    benchmark::DoNotOptimize(o.data<float>());
  }
  openblas_set_num_threads(0);  // back to OpenBLAS's default
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * 64 * 64 * static_cast<double>(d * state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_attention_tiles, micro_kernel, true)->Arg(16)->Arg(32)->Arg(64)->Arg(128);
BENCHMARK_CAPTURE(BM_attention_tiles, openblas_sgemm, false)->Arg(16)->Arg(32)->Arg(64)->Arg(128);

void BM_cblas_cgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Tensor a = randn({n, n}, DType::Complex64), b = randn({n, n}, DType::Complex64);
  const c64 one(1), zero(0);
  for (auto _ : state) {
    Tensor c = empty({n, n}, DType::Complex64);
    cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, &one, a.data<c64>(), n, b.data<c64>(), n, &zero, c.data<c64>(), n);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations() * 8 * int64_t{n} * n * n);
}
BENCHMARK(BM_cblas_cgemm)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Re(q k^H) for attention: the real GEMM over interleaved pairs vs the full complex GEMM.
void BM_scores_real_gemm(benchmark::State& state) {
  const Tensor q = randn({8, 256, 64}), k = randn({8, 256, 64});  // 32 complex pairs per row
  for (auto _ : state) benchmark::DoNotOptimize(ops::matmul_real_part_conj(q, k));
}
BENCHMARK(BM_scores_real_gemm)->Unit(benchmark::kMicrosecond);
void BM_scores_complex_gemm(benchmark::State& state) {
  const Tensor q = ops::view_as_complex(randn({8, 256, 32, 2})), k = ops::view_as_complex(randn({8, 256, 32, 2}));
  for (auto _ : state) benchmark::DoNotOptimize(ops::real(ops::matmul(q, k, MatOp::None, MatOp::ConjTranspose)));
}
BENCHMARK(BM_scores_complex_gemm)->Unit(benchmark::kMicrosecond);

// Per-op overhead on tiny tensors.
void BM_dispatch_add16(benchmark::State& state) {
  const Tensor a = randn({16}), b = randn({16});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(BM_dispatch_add16);

// Forward + backward through a chain of 100 small elementwise ops; time / 100 = per-op cost.
void BM_backward_chain100(benchmark::State& state) {
  const Tensor x = randn({16}).requires_grad_();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = tanh(y * 1.01);
    sum(y).backward();
    x.zero_grad();
  }
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_backward_chain100)->Unit(benchmark::kMicrosecond);

#ifdef PHASOR_HAVE_TORCH
void BM_torch_dispatch_add16(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  const auto a = torch::randn({16}), b = torch::randn({16});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}
BENCHMARK(BM_torch_dispatch_add16);

void BM_torch_add_4M(benchmark::State& state) {
  const auto a = torch::randn({kElems}), b = torch::randn({kElems});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetBytesProcessed(state.iterations() * kElems * 4 * 3);
}
BENCHMARK(BM_torch_add_4M);

void BM_torch_backward_chain100(benchmark::State& state) {
  const auto x = torch::randn({16}, torch::requires_grad());
  for (auto _ : state) {
    auto y = x;
    for (int i = 0; i < 50; ++i) y = torch::tanh(y * 1.01);
    y.sum().backward();
    x.mutable_grad().reset();
  }
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_torch_backward_chain100)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

#include "bench/benchmark_main.h"  // main()
