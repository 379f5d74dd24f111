// CUDA Graphs on the CUDA simulator (cuda/sim/runtime.cpp, gpu::Graph in
// cuda/runtime.cpp, app/step_graph.h): capture records the work queued on a
// stream and a launch replays it; what cannot be captured fails the capture;
// a training step replayed from a graph gives the bits of the eager step, with
// no host synchronisation; and `phasor train --cuda-graph` logs the eager run's
// losses exactly.
// Built only on the simulator (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "app/step_graph.h"
#include "app/train.h"
#include "cuda/cuda.h"
#include "cuda/sim/sync_counts.h"
#include "helpers.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "phasor.h"
#include "sim_train_options.h"

using namespace phasor;
using namespace phasor::test;

namespace {

fs::path scratch() { return scratch_root("sim_graph", true); }

struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t n) { REQUIRE(cudaMalloc(&p, n) == cudaSuccess); }
  ~DeviceBytes() { cudaFree(p); }
};

std::vector<int> device_ints(const void* p, size_t n) {
  std::vector<int> out(n);
  REQUIRE(cudaMemcpy(out.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

}  // namespace

TEST_CASE("sim graph: capture records the stream's work instead of running it; each launch runs the recording") {
  DeviceBytes d(4 * sizeof(int));
  REQUIRE(cudaMemset(d.p, 0, 4 * sizeof(int)) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  std::vector<int> source{1, 2, 3, 4};  // a captured upload reads its source at each launch

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(cudaMemsetAsync(d.p, 0x7f, 4 * sizeof(int), s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(d.p, source.data(), 2 * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  CHECK(device_ints(d.p, 4) == std::vector<int>{0, 0, 0, 0});  // nothing ran

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);  // the executable graph keeps its own copy
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(device_ints(d.p, 4) == std::vector<int>{1, 2, 0x7f7f7f7f, 0x7f7f7f7f});

  source = {5, 6, 7, 8};  // the same buffer, new contents (the vector keeps its storage)
  REQUIRE(cudaMemset(d.p, 0, 4 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(device_ints(d.p, 4) == std::vector<int>{5, 6, 0x7f7f7f7f, 0x7f7f7f7f});
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("sim graph: what cannot be captured fails with cudaErrorStreamCaptureUnsupported and invalidates the capture") {
  DeviceBytes d(64);
  std::vector<char> host(64);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);

  // Each refused call, in a capture of its own: it fails, names itself, and the capture ends invalidated.
  struct Refused {
    const char* name;
    std::function<cudaError_t()> call;
  };
  void* fresh = nullptr;
  const std::vector<Refused> refused{
      {"cudaMemcpyAsync (device to host)", [&] { return cudaMemcpyAsync(host.data(), d.p, 64, cudaMemcpyDeviceToHost, s); }},
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(s); }},
      {"cudaDeviceSynchronize", [&] { return cudaDeviceSynchronize(); }},
      {"cudaMemcpy", [&] { return cudaMemcpy(d.p, host.data(), 64, cudaMemcpyHostToDevice); }},
      {"cudaMalloc", [&] { return cudaMalloc(&fresh, 64); }},
      {"cudaFree", [&] { return cudaFree(d.p); }},
  };
  for (const Refused& r : refused) {
    INFO(r.name);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(d.p, 1, 64, s) == cudaSuccess);
    CHECK(r.call() == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureUnsupported);
    CHECK(contains(cudaGetErrorString(cudaErrorStreamCaptureUnsupported), r.name));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    REQUIRE(cudaStreamIsCapturing(s, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    cudaGetLastError();
  }
  CHECK(fresh == nullptr);

  // Relaxed mode lets the capturing thread allocate (a graph's private pool), and the capture goes on.
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeGlobal);
  CHECK(cudaMalloc(&fresh, 64) == cudaSuccess);
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  CHECK(graph != nullptr);
  cudaGraphDestroy(graph);
  CHECK(cudaFree(fresh) == cudaSuccess);

  // The legacy stream cannot be captured; the stream keeps working after all this.
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
  REQUIRE(cudaMemsetAsync(d.p, 3, 64, s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(host.data(), d.p, 64, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(host[63] == 3);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("graph: a capture that reads the device on the host fails with a clear error, and the backend works on") {
  const Tensor x = ops::to_device(from_vector(std::vector<float>{1, 2, 3}), cuda(0));
  gpu::Graph graph;
  const std::string message = expect_error([&] {
    graph.capture([&] {
      const Tensor y = ops::binary(ops::Binary::Mul, x, x);
      (void)ops::sum(y).item<float>();
    });
  });
  CHECK(contains(message, "cuda graph: capture failed"));
  CHECK(contains(message, "read of device memory on the host"));
  CHECK(message.find('\n') == std::string::npos);
  CHECK_FALSE(graph.captured());
  CHECK_FALSE(gpu::capturing());
  CHECK(ops::sum(x).item<float>() == 6.0f);
}

TEST_CASE("graph: a replayed training step gives the eager step's bits, and no host synchronisation") {
  ModelConfig cfg;  // the README model (ComplexFormer, byte vocabulary) at small shapes
  cfg.d_model = 32;
  cfg.n_layers = 1;
  cfg.n_heads = 4;
  cfg.d_ff = 48;
  cfg.max_seq_len = 8;
  constexpr int64_t kBatch = 2, kSeq = 8, kSteps = 4;
  // A different batch and learning rate each step: a replay must take both from the device.
  const auto batch = [&](int step, bool targets) {
    std::vector<int64_t> v(kBatch * kSeq);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * (targets ? 91 : 37) + step * 13) % 256);
    return from_vector(v, {kBatch, kSeq});
  };
  const auto lr_of = [](int step) { return 3e-3 / (1 + step); };
  struct Trainer {
    std::unique_ptr<CausalLM> model;
    std::vector<Tensor> params;
    std::unique_ptr<nn::AdamW> opt;
    // On the GPU before the optimizer, whose moments follow the parameters; a group at half the rate.
    explicit Trainer(const ModelConfig& c) : model(std::make_unique<CausalLM>(c, 11)) {
      model->to(cuda(0));
      for (const auto& entry : model->named_parameters()) params.push_back(entry.second);
      opt = std::make_unique<nn::AdamW>(
          std::vector<nn::ParamGroup>{{model->decayed_parameters(), 0.1, 1.0}, {model->undecayed_parameters(), 0.0, 0.5}},
          nn::AdamWOptions{3e-3, 0.9, 0.95, 1e-8});
    }
    // forward, backward, clip, the device-decided update; {loss, norm} as float64 on the device
    Tensor step(const Tensor& inputs, const Tensor& targets) {
      const Tensor loss = model->loss(inputs, targets);
      opt->zero_grad();
      loss.backward();
      const Tensor norm = nn::clip_grad_norm_(params, 1.0);
      const Tensor values = ops::stack({ops::to(loss.detach(), DType::Float64), norm}, 0);
      opt->step(ops::compare(ops::Compare::Eq, ops::sum(ops::binary(ops::Binary::Sub, values, values)),
                            scalar_tensor(0.0, DType::Float64, values.device())));
      return values;
    }
  };
  const auto make = [&] { return std::make_unique<Trainer>(cfg); };
  // The optimizer's state is made at the first step: both trainers take it eagerly.
  auto eager = make(), replayed = make();
  std::vector<double> eager_values, replayed_values;
  for (Trainer* t : {eager.get(), replayed.get()}) {
    t->opt->set_lr(lr_of(0));
    const std::vector<double> v = t->step(batch(0, false), batch(0, true)).to_vector<double>();
    (t == eager.get() ? eager_values : replayed_values).insert((t == eager.get() ? eager_values : replayed_values).end(), v.begin(), v.end());
  }
  for (int step = 1; step < kSteps; ++step) {
    eager->opt->set_lr(lr_of(step));
    const std::vector<double> v = eager->step(batch(step, false), batch(step, true)).to_vector<double>();
    eager_values.insert(eager_values.end(), v.begin(), v.end());
  }

  const Tensor inputs = ops::to_device(batch(1, false), cuda(0)), targets = ops::to_device(batch(1, true), cuda(0));
  gpu::Graph graph;
  Tensor values;
  replayed->opt->set_lr(lr_of(1));
  graph.capture([&] { values = replayed->step(inputs, targets); });
  REQUIRE(graph.captured());
  for (int step = 1; step < kSteps; ++step) {
    gpu::synchronize();
    sim::reset_sync_counts();
    replayed->opt->set_lr(lr_of(step));
    ops::copy_(inputs, ops::to_device(batch(step, false), cuda(0)));
    ops::copy_(targets, ops::to_device(batch(step, true), cuda(0)));
    graph.replay();
    const sim::SyncCounts c = sim::sync_counts();
    INFO("step ", step, ": d2h ", c.d2h_copies, ", stream ", c.stream_syncs, ", device ", c.device_syncs, ", event ", c.event_syncs);
    CHECK(c.total() == 0);
    const std::vector<double> v = values.to_vector<double>();
    replayed_values.insert(replayed_values.end(), v.begin(), v.end());
  }
  // A replay at learning rate 0 leaves the parameters as they were: the rate is read on the device at each replay.
  std::vector<Tensor> before;
  for (const Tensor& p : replayed->params) before.push_back(to_cpu(p));
  replayed->opt->set_lr(0.0);
  graph.replay();
  for (size_t i = 0; i < before.size(); ++i) {
    INFO("parameter ", i);
    const Tensor after = to_cpu(replayed->params[i]);
    CHECK(std::memcmp(after.raw_data(), before[i].raw_data(), after.nbytes()) == 0);
  }
  REQUIRE(eager_values.size() == 2 * kSteps);
  CHECK(replayed_values == eager_values);  // loss and norm of every step, to the bit
  CHECK(replayed->opt->steps() == kSteps + 1);  // the step at rate 0 counted too
  for (size_t i = 0; i < eager->params.size(); ++i) {
    INFO("parameter ", i);
    const Tensor a = to_cpu(eager->params[i]), b = to_cpu(replayed->params[i]);
    REQUIRE(a.nbytes() == b.nbytes());
    CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  }
}

TEST_CASE("graph: tokens already on the model's GPU are checked by the embedding's kernel, raised at the next synchronisation") {
  ModelConfig cfg;
  cfg.d_model = 16;
  cfg.n_layers = 1;
  cfg.n_heads = 2;
  cfg.d_ff = 24;
  cfg.max_seq_len = 4;
  CausalLM model(cfg, 3);
  model.to(cuda(0));
  const Tensor bad = ops::to_device(from_vector<int64_t>({1, 300}, {1, 2}), cuda(0));
  const std::string message = expect_error([&] {
    (void)model.forward(bad);  // no read of the tokens here: a captured step could not make one
    gpu::synchronize();
  });
  CHECK(contains(message, "index 300 out of range"));
}

TEST_CASE("StepGraph: each batch reaches the replayed step through the captured buffers; a batch of another shape is refused") {
  StepGraph graph(cuda(0));
  int captures = 0;
  // The step: the sums of the tokens and of the targets, as float64 on the device.
  const StepGraph::Step step = [&](const Tensor& inputs, const Tensor& targets) {
    ++captures;
    return ops::stack({ops::to(ops::sum(inputs), DType::Float64), ops::to(ops::sum(targets), DType::Float64)}, 0);
  };
  for (int64_t k = 1; k <= 3; ++k) {
    const std::vector<int64_t> inputs(6, k), targets(6, 10 * k);
    CHECK(graph.run(inputs, targets, 2, 3, step).to_vector<double>() == std::vector<double>{6.0 * k, 60.0 * k});
  }
  CHECK(captures == 1);
  const std::string message = expect_error([&] { graph.run(std::vector<int64_t>(4, 1), std::vector<int64_t>(4, 1), 2, 2, step); });
  CHECK(contains(message, "--cuda-graph replays a step of batch [2, 3], got a batch of [2, 2]"));
}

namespace {
std::vector<std::string> logged_losses(const fs::path& run_dir) {
  std::vector<std::string> out;
  std::istringstream in(read_bytes(run_dir / "log.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (contains(line, "\"loss\"")) out.push_back(line.substr(line.find("\"loss\""), line.find(',', line.find("\"loss\"")) - line.find("\"loss\"")));
  return out;
}
}  // namespace

TEST_CASE("train --cuda-graph logs the eager run's losses exactly, replaying its step, and is refused where it cannot apply") {
  // Three runs of one configuration: eager and with the graph through train(),
  // counting the kernels the host launches, and with the graph through the CLI.
  constexpr int64_t kSteps = 6;
  const auto counted_run = [&](bool graph) {
    TrainOptions o = tiny_cuda_run(kSteps, 1, (scratch() / (graph ? "api_graph" : "api_eager")).string());
    o.cuda_graph = graph;
    fs::remove_all(o.run_dir);
    gpu::synchronize();
    sim::reset_sync_counts();
    const TrainSummary summary = train(o);
    CHECK(summary.steps_done == kSteps);
    return sim::sync_counts().launches;
  };
  const int64_t eager_launches = counted_run(false), graph_launches = counted_run(true);
  const fs::path eager = scratch() / "api_eager", graph = scratch() / "api_graph", cli = scratch() / "cli_graph";
  const std::string flags = " --d-model 32 --n-layers 1 --n-heads 4 --d-ff 48 --max-seq-len 16 --data arith --seq-len 16 --batch 2"
                            " --warmup 2 --log-every 1 --eval-every 0 --eval-windows 2 --threads 1 --device cuda --cuda-graph";
  const Cli c = run_shell(phasor_command() + " train" + flags + " --steps " + std::to_string(kSteps) + " --run-dir " + quote(cli), scratch());
  REQUIRE_MESSAGE(c.status == 0, c.err);  // the CLI run is tiny_cuda_run's configuration, flag by flag

  const std::vector<std::string> eager_losses = logged_losses(eager);
  CHECK(eager_losses.size() == kSteps);
  CHECK(logged_losses(graph) == eager_losses);
  CHECK(logged_losses(cli) == eager_losses);
  // The saved model too: the same bytes.
  const std::string model = read_bytes(latest_folder(eager) / "model.safetensors");
  CHECK(!model.empty());
  CHECK(read_bytes(latest_folder(graph) / "model.safetensors") == model);
  CHECK(read_bytes(latest_folder(cli) / "model.safetensors") == model);
  // 6 steps' kernels launched eagerly against 2 (the first, and the one captured) and a few copies per replay.
  INFO("launches: eager ", eager_launches, ", graph ", graph_launches);
  CHECK(graph_launches < eager_launches / 2);

  const Cli cpu = run_shell(phasor_command() + " train --cuda-graph --device cpu --steps 1 --run-dir " + quote(scratch() / "cpu"), scratch());
  check_one_line_failure(cpu, "--cuda-graph needs --device cuda");
  CHECK(cpu.out.empty());
}
