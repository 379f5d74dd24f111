// The CUDA simulator's counters of host synchronisations (cuda/sim/sync_counts.h):
// every way the host can wait for the device is counted under its kind, and
// what does not wait (a launch, an asynchronous upload, an event record) is
// not. And a training step of the README model (its smallest shapes) waits
// for the device nowhere between its first kernel and its optimizer update,
// and the training loop (app/train.cpp) reads its loss and norm once per
// logging interval.
// Built only on the simulator (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "app/train.h"
#include "cuda/sim/sync_counts.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "phasor.h"
#include "sim_train_options.h"

using namespace phasor;
using phasor::sim::SyncCounts;

namespace {

// The counts `body` adds.
template <class F>
SyncCounts counted(F&& body) {
  sim::reset_sync_counts();
  body();
  return sim::sync_counts();
}

struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t n) { REQUIRE(cudaMalloc(&p, n) == cudaSuccess); }
  ~DeviceBytes() { cudaFree(p); }
};

}  // namespace

TEST_CASE("sim sync counts: each kind of host synchronisation is counted under its own kind") {
  DeviceBytes d(64);
  std::vector<char> host(64, 1);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);

  SyncCounts c = counted([&] { REQUIRE(cudaMemcpyAsync(host.data(), d.p, 64, cudaMemcpyDeviceToHost, s) == cudaSuccess); });
  CHECK(c.d2h_copies == 1);
  CHECK(c.total() == 1);

  c = counted([&] { REQUIRE(cudaMemcpy(host.data(), d.p, 64, cudaMemcpyDeviceToHost) == cudaSuccess); });
  CHECK(c.d2h_copies == 1);
  CHECK(c.device_syncs == 1);  // a synchronous copy waits for the device first
  CHECK(c.total() == 2);

  c = counted([&] { REQUIRE(cudaStreamSynchronize(s) == cudaSuccess); });
  CHECK(c.stream_syncs == 1);
  CHECK(c.total() == 1);

  c = counted([&] { REQUIRE(cudaDeviceSynchronize() == cudaSuccess); });
  CHECK(c.device_syncs == 1);
  CHECK(c.total() == 1);

  c = counted([&] {
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  });
  CHECK(c.event_syncs == 1);
  CHECK(c.total() == 1);

  c = counted([&] {
    REQUIRE(cudaEventQuery(e) == cudaSuccess);
    REQUIRE(cudaStreamQuery(s) == cudaSuccess);
  });
  CHECK(c.queries == 2);
  CHECK(c.total() == 2);

  c = counted([&] { REQUIRE(cudaMemset(d.p, 0, 64) == cudaSuccess); });
  CHECK(c.device_syncs == 1);
  CHECK(c.total() == 1);

  c = counted([&] {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, 16) == cudaSuccess);
    REQUIRE(cudaFree(p) == cudaSuccess);  // cudaFree waits for the device; cudaMalloc does not
  });
  CHECK(c.device_syncs == 1);
  CHECK(c.total() == 1);

  REQUIRE(cudaEventDestroy(e) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("sim sync counts: launches, uploads and event records are not synchronisations, and reset clears") {
  const Tensor x = ops::to_device(from_vector(std::vector<float>{1, 2, 3, 4}), cuda(0));
  gpu::synchronize();
  const SyncCounts c = counted([&] {
    const Tensor y = ops::to_device(from_vector(std::vector<float>{5, 6, 7, 8}), cuda(0));  // staged: asynchronous
    const Tensor z = ops::binary(ops::Binary::Add, x, y);
    (void)z;
  });
  CHECK(c.launches >= 1);
  CHECK(c.total() == 0);

  const SyncCounts read = counted([&] { CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 4}); });
  CHECK(read.d2h_copies == 1);
  CHECK(read.stream_syncs == 1);

  sim::reset_sync_counts();
  const SyncCounts zero = sim::sync_counts();
  CHECK(zero.total() == 0);
  CHECK(zero.launches == 0);
}

TEST_CASE("sim sync counts: a training step of the model makes no host synchronisation, its log one, in float32 and bf16") {
  ModelConfig cfg;  // the README model (ComplexFormer, byte vocabulary), at test_cuda's smallest shapes
  cfg.d_model = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.d_ff = 48;
  cfg.max_seq_len = 16;
  for (nn::Precision precision : {nn::Precision::Float32, nn::Precision::BFloat16}) {  // bf16: the weight GEMMs on cublasGemmEx
    const nn::PrecisionScope scope(precision);
    INFO("precision ", nn::precision_name(precision));
    CausalLM model(cfg, 7);
    model.to(cuda(0));
    nn::AdamW opt({{model.decayed_parameters(), 0.1, 1.0}, {model.undecayed_parameters(), 0.0, 1.0}}, {3e-3, 0.9, 0.95, 1e-8});
    std::vector<Tensor> params;
    for (const auto& entry : model.named_parameters()) params.push_back(entry.second);
    // Host batches, as the sampler gives them: valid tokens, one target ignored.
    std::vector<int64_t> tokens(2 * 16), targets(2 * 16);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i * 37 % 256), targets[i] = static_cast<int64_t>(i * 91 % 256);
    targets[5] = -100;
    gpu::synchronize();
    for (int step = 0; step < 2; ++step) {
      Tensor loss, norm;
      const SyncCounts c = counted([&] {
        loss = model.loss(from_vector(tokens, {2, 16}), from_vector(targets, {2, 16}));
        opt.zero_grad();
        loss.backward();
        norm = nn::clip_grad_norm_(params, 1.0);
        opt.step();
      });
      INFO("step ", step, ": d2h ", c.d2h_copies, ", stream ", c.stream_syncs, ", device ", c.device_syncs, ", event ", c.event_syncs,
           ", queries ", c.queries);
      CHECK(c.launches > 0);
      CHECK(c.total() == 0);
      // The log line's loss and norm: one copy, one wait.
      std::vector<double> logged;
      const SyncCounts log = counted([&] { logged = ops::stack({ops::to(loss.detach(), DType::Float64), norm}, 0).to_vector<double>(); });
      CHECK(log.total() == 2);
      CHECK(log.d2h_copies == 1);
      REQUIRE(logged.size() == 2);
      CHECK(std::isfinite(logged[0]));
      CHECK(logged[1] > 0);
    }
  }
}

TEST_CASE("sim sync counts: the training loop reads its steps once per logging interval") {
  // Two runs that differ only in their length: whatever the start and the end
  // cost (the upload of the model, the validation, the checkpoint), the 8
  // steps more of the longer run, 2 logging intervals, add 2 reads of one
  // copy each, and no other synchronisation.
  const auto synchronisations = [](int64_t steps) {
    const TrainOptions o = test::tiny_cuda_run(steps, 4, std::string(PHASOR_TEST_TMP) + "/sim_sync_run_" + std::to_string(steps));
    std::filesystem::remove_all(o.run_dir);
    gpu::synchronize();
    sim::reset_sync_counts();
    const TrainSummary summary = train(o);
    const SyncCounts c = sim::sync_counts();
    CHECK(summary.steps_done == steps);
    CHECK(summary.skipped_steps == 0);
    CHECK(std::isfinite(summary.final_loss));
    std::filesystem::remove_all(o.run_dir);
    return c;
  };
  const SyncCounts shorter = synchronisations(4), longer = synchronisations(12);
  INFO("4 steps: d2h ", shorter.d2h_copies, ", total ", shorter.total(), "; 12 steps: d2h ", longer.d2h_copies, ", total ", longer.total());
  CHECK(longer.d2h_copies - shorter.d2h_copies == 2);
  CHECK(longer.total() - shorter.total() == 4);  // each read: one copy and one wait
}
