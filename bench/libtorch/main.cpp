// phasor_torch: the LibTorch reference from the command line.
//   eval   the spec's evaluation windows on a checkpoint (byte tokenizer)
//   train  AdamW from scratch on a byte file, printing losses
//   time   median forward + backward + AdamW step, for side-by-side benchmarks
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <random>

#include "bench/libtorch/reference_model.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace {

using phasor::ModelConfig;
using phasor::torch_ref::Model;

struct Common {
  int threads = 0;  // 0: LibTorch's default
  std::string device = "cpu";
};

struct Shape {
  std::string position = "complexformer";
  std::string cmha_init = "rope";
  int64_t d_model = 128, n_layers = 4, n_heads = 4, d_ff = 352;
  int64_t seq_len = 128, batch = 8, steps = 100;
  double lr = 1e-3, weight_decay = 0.1;
  uint64_t seed = 0;
};

void add_common(CLI::App* cmd, Common& c) {
  cmd->add_option("--threads", c.threads, "intra-op threads (0: LibTorch's default)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", c.device, "cpu, cuda or cuda:N");
}

void add_shape(CLI::App* cmd, Shape& s) {
  cmd->add_option("--position", s.position, phasor::position_names("|"));
  cmd->add_option("--cmha-init", s.cmha_init, phasor::cmha_init_names("|"));
  cmd->add_option("--d-model", s.d_model);
  cmd->add_option("--n-layers", s.n_layers);
  cmd->add_option("--n-heads", s.n_heads);
  cmd->add_option("--d-ff", s.d_ff);
  cmd->add_option("--seq-len", s.seq_len);
  cmd->add_option("--batch", s.batch);
  cmd->add_option("--steps", s.steps);
  cmd->add_option("--lr", s.lr);
  cmd->add_option("--weight-decay", s.weight_decay, "AdamW decay (not on delta, phase_bias, beta)");
  cmd->add_option("--seed", s.seed);
}

torch::Device setup(const Common& c) {
  if (c.threads > 0) torch::set_num_threads(c.threads);
  const torch::Device device(c.device);
  PHASOR_CHECK(!device.is_cuda() || torch::cuda::is_available(), "--device ", c.device,
               ": this LibTorch has no usable CUDA device");
  return device;
}

ModelConfig config_of(const Shape& s) {
  ModelConfig c;
  c.position = phasor::parse_position(s.position);
  c.cmha_init = phasor::parse_cmha_init(s.cmha_init);
  c.d_model = s.d_model;
  c.n_layers = s.n_layers;
  c.n_heads = s.n_heads;
  c.d_ff = s.d_ff;
  c.max_seq_len = s.seq_len;
  PHASOR_CHECK(s.seq_len > 0 && s.batch > 0 && s.steps > 0, "--seq-len, --batch and --steps must be positive");
  return c;
}

// AdamW with the spec's rule: the CMHA parameters take no weight decay.
torch::optim::AdamW make_optimizer(Model& model, const Shape& s) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& item : model.named_parameters())
    (phasor::torch_ref::is_no_decay(item.key()) ? no_decay : decay).push_back(item.value());
  const auto options = torch::optim::AdamWOptions(s.lr).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(options).weight_decay(s.weight_decay)));
  if (!no_decay.empty())
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return torch::optim::AdamW(std::move(groups), torch::optim::AdamWOptions(options).weight_decay(s.weight_decay));
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::vector<int64_t> read_bytes(const std::string& path) {
  const std::string bytes = phasor::read_file_bytes(path);
  std::vector<int64_t> tokens(bytes.size());
  std::transform(bytes.begin(), bytes.end(), tokens.begin(), [](char b) { return static_cast<unsigned char>(b); });
  return tokens;
}

int run_eval(const Common& common, const std::string& checkpoint, const std::string& data, int64_t seq_len,
             int64_t max_windows, int64_t batch, bool json) {
  const auto device = setup(common);
  auto model = phasor::torch_ref::load_model(checkpoint);
  PHASOR_CHECK(model->config().vocab_size >= 256, checkpoint, ": vocab_size ", model->config().vocab_size,
               " is too small for the byte tokenizer (256)");
  model->to(device);
  const auto tokens = read_bytes(data);
  const int64_t windows = phasor::torch_ref::eval_windows(static_cast<int64_t>(tokens.size()), seq_len, max_windows);
  const double loss = phasor::torch_ref::evaluate(*model, tokens, seq_len, max_windows, batch);
  const nlohmann::json out = {{"loss", loss}, {"ppl", std::exp(loss)}, {"tokens", windows * seq_len},
                              {"windows", windows}, {"seq_len", seq_len}};
  if (json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "loss " << loss << " ppl " << std::exp(loss) << " tokens " << windows * seq_len << " windows "
              << windows << " seq_len " << seq_len << "\n";
  }
  return 0;
}

int run_train(const Common& common, const Shape& s, const std::string& data, const std::string& out, int64_t log_every) {
  const auto device = setup(common);
  const auto text = read_bytes(data);
  const int64_t T = static_cast<int64_t>(text.size());
  PHASOR_CHECK(T > s.seq_len + 1, data, ": ", T, " bytes are too few for --seq-len ", s.seq_len);
  Model model(config_of(s), s.seed);
  model.to(device);
  auto optimizer = make_optimizer(model, s);
  const auto all = torch::tensor(text, torch::kLong);
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int64_t> start(0, T - s.seq_len - 1);
  for (int64_t step = 1; step <= s.steps; ++step) {
    // Random windows of seq_len + 1 bytes: inputs and next-byte targets.
    std::vector<torch::Tensor> rows;
    for (int64_t b = 0; b < s.batch; ++b) rows.push_back(all.narrow(0, start(rng), s.seq_len + 1));
    auto windows = torch::stack(rows).to(device);
    optimizer.zero_grad();
    auto loss = model.loss(windows.narrow(1, 0, s.seq_len), windows.narrow(1, 1, s.seq_len));
    loss.backward();
    optimizer.step();
    if (step % log_every == 0 || step == s.steps) std::cout << "step " << step << " loss " << loss.item<double>() << std::endl;
  }
  if (!out.empty()) phasor::torch_ref::save_safetensors(model, out);
  return 0;
}

int run_time(const Common& common, const Shape& s, int64_t warmup, bool json) {
  const auto device = setup(common);
  Model model(config_of(s), s.seed);
  model.to(device);
  auto optimizer = make_optimizer(model, s);
  torch::manual_seed(s.seed);
  auto windows = torch::randint(0, model.config().vocab_size, {s.batch, s.seq_len + 1}, torch::kLong).to(device);
  auto inputs = windows.narrow(1, 0, s.seq_len), targets = windows.narrow(1, 1, s.seq_len);
  std::vector<double> ms;
  for (int64_t step = 0; step < warmup + s.steps; ++step) {
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    model.loss(inputs, targets).backward();
    optimizer.step();
    synchronize(device);
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    if (step >= warmup) ms.push_back(dt.count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  const double tokens_per_s = static_cast<double>(s.batch * s.seq_len) / (median / 1000.0);
  if (json) {
    const nlohmann::json out = {{"median_ms", median},         {"tokens_per_s", tokens_per_s}, {"steps", s.steps},
                                {"batch", s.batch},            {"seq_len", s.seq_len},         {"position", s.position},
                                {"threads", torch::get_num_threads()}, {"device", device.str()}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "median_ms " << median << " tokens_per_s " << tokens_per_s << "\n";
  }
  return 0;
}

// One line on stderr: LibTorch messages carry a backtrace and several lines.
int report(const std::string& message) {
  std::cerr << "phasor_torch: error: " << message.substr(0, message.find('\n')) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"LibTorch reference of the ComplexFormer LM (bench/libtorch)"};
  app.require_subcommand(1);

  Common common;
  Shape train_shape, time_shape;
  time_shape.steps = 10;
  std::string checkpoint, data, out;
  int64_t seq_len = 128, max_windows = 0, eval_batch = 8, log_every = 10, warmup = 3;
  bool json = false;

  auto* eval = app.add_subcommand("eval", "mean next-byte loss over the spec's evaluation windows");
  eval->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  eval->add_option("--data", data, "text file, one token per byte")->required();
  eval->add_option("--seq-len", seq_len, "window length L")->required();
  eval->add_option("--max-windows", max_windows, "use at most the first K windows (0: all)");
  eval->add_option("--batch", eval_batch, "windows per forward pass");
  eval->add_flag("--json", json, "print one JSON object");
  add_common(eval, common);

  auto* train = app.add_subcommand("train", "train from scratch with AdamW on a byte file");
  add_shape(train, train_shape);
  add_common(train, common);
  train->add_option("--data", data, "training text, one token per byte")->required();
  train->add_option("--out", out, "write the trained checkpoint here");
  train->add_option("--log-every", log_every, "print the loss every N steps")->check(CLI::PositiveNumber);

  auto* time = app.add_subcommand("time", "median forward + backward + AdamW step on random tokens");
  add_shape(time, time_shape);
  add_common(time, common);
  time->add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  time->add_flag("--json", json, "print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return report(e.what());
  }

  try {
    if (*eval) return run_eval(common, checkpoint, data, seq_len, max_windows, eval_batch, json);
    if (*train) return run_train(common, train_shape, data, out, log_every);
    return run_time(common, time_shape, warmup, json);
  } catch (const c10::Error& e) {
    return report(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return report(e.what());
  }
}
