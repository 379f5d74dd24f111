#pragma once
// What bench/compare_phasor.cpp and bench/compare_torch.cpp share: the same
// command line, the same workloads, the same statistics and the same JSON line,
// so that bench/compare_libtorch can run the two side by side.
//
// Workloads (one per process, so the peak RSS is the workload's own):
//   train     forward + backward + AdamW step on random tokens [batch, seq_len]
//   eval      forward-only (no autograd graph) logits + mean cross-entropy
//   generate  greedy decoding with a KV cache, batch 1: ms per new token
//   rotation  the attention rotation alone (complexformer: Euler transform +
//             adaptive rotation; rope: the rotary product), forward + backward,
//             on a [batch, seq_len, n_heads, head_dim] query tensor
//   qk        one layer's query and key heads from its input x [batch,
//             seq_len, d_model]: the two projections and the variant's
//             rotation (with the angle nets, carope's projection and scan),
//             forward + backward: the step every new rotation kernel is in
//   sgemm     one float32 [1024, 1024] x [1024, 1024] product: the machine's
//             GEMM rate through each library, one yardstick of the training
//             workloads' model FLOP rates
//   fma-peak  the machine's float32 FMA peak on --threads threads
//             (bench/fma_peak.h; compare_phasor only: it belongs to the CPU,
//             not to a library), the other yardstick, the one that is a limit;
//             its line also gives the CPU's rate at its nominal clock
//             (nominal_gflops_per_s), against which compare_libtorch judges it
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "models/config.h"

namespace phasor::compare {

struct Options {
  std::string workload = "train";
  std::string position = "complexformer";  // a name of models/config.h's tables
  std::string cmha_init = "rope";
  int64_t d_model = 128, n_layers = 4, n_heads = 4, d_ff = 352;
  int64_t seq_len = 128, batch = 16;
  int64_t prompt = 16, new_tokens = 64;  // generate
  int threads = 2;
  int blas_threads = 0;  // OpenBLAS threads; 0: the same as threads
  int64_t warmup = 2, reps = 5;
  uint64_t seed = 0;
  double lr = 1e-3, weight_decay = 0.1;
  std::string precision = "float32";  // train/eval/generate: float32, or bf16 mixed precision (Phasor's policy, LibTorch's CPU autocast)
};

// Parses argv; returns false (after printing) on --help or an error, with *exit_code set.
inline bool parse(int argc, char** argv, const char* name, Options& o, int* exit_code) {
  CLI::App app{std::string(name) + ": one side-by-side benchmark workload, one JSON line on stdout"};
  app.add_option("--workload", o.workload, "train|eval|generate|rotation|qk|sgemm|fma-peak")
      ->check(CLI::IsMember({"train", "eval", "generate", "rotation", "qk", "sgemm", "fma-peak"}));
  app.add_option("--position", o.position, position_names("|"));
  app.add_option("--cmha-init", o.cmha_init, cmha_init_names("|"));
  app.add_option("--d-model", o.d_model);
  app.add_option("--n-layers", o.n_layers);
  app.add_option("--n-heads", o.n_heads);
  app.add_option("--d-ff", o.d_ff);
  app.add_option("--seq-len", o.seq_len);
  app.add_option("--batch", o.batch);
  app.add_option("--prompt", o.prompt, "generate: prompt length");
  app.add_option("--new-tokens", o.new_tokens, "generate: tokens decoded per repetition");
  app.add_option("--threads", o.threads, "OpenMP / BLAS / intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--blas-threads", o.blas_threads, "LibTorch's OpenBLAS threads when different from --threads (0: the same); Phasor always runs OpenBLAS single-threaded inside its own pool")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", o.warmup, "untimed repetitions first")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", o.reps, "timed repetitions")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed);
  app.add_option("--lr", o.lr);
  app.add_option("--weight-decay", o.weight_decay);
  app.add_option("--precision", o.precision, "float32|bf16: bf16 runs the model under mixed precision (Phasor: nn/precision.h; LibTorch: CPU autocast to bfloat16)")
      ->check(CLI::IsMember({"float32", "bf16"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return false;
  }
  if (o.blas_threads == 0) o.blas_threads = o.threads;
  return true;
}

// A field of /proc/self/status in MiB (VmHWM: peak resident set; VmRSS: now).
inline double proc_status_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;  // kB
  return -1.0;
}

// The 1, 5 and 15 minute load averages of /proc/loadavg (empty where it is
// missing): every JSON line records them, as the conditions of its figures.
inline std::vector<double> load_average() {
  std::ifstream in("/proc/loadavg");
  std::vector<double> avg(3);
  if (!(in >> avg[0] >> avg[1] >> avg[2])) return {};
  return avg;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// CPU time of the whole process (all threads, user + system) in ms. On a
// shared machine it is far less disturbed by other people's work than wall time.
inline double process_cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// A point in time on both clocks, and the span between two of them.
struct Stamp {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu_ms = process_cpu_ms();
};
struct Span {
  double wall_ms = 0, cpu_ms = 0;
};
inline Span since(const Stamp& t0) {
  const Stamp t1;
  return {std::chrono::duration<double, std::milli>(t1.wall - t0.wall).count(), t1.cpu_ms - t0.cpu_ms};
}

struct Timings {
  std::vector<double> wall_ms, cpu_ms;
};

// Runs `body` warmup + reps times, timing each run itself. `body` may instead
// time a part of itself and return that span (generate leaves the prefill out).
inline Timings time_self_timed_runs(const Options& o, const std::function<Span()>& body) {
  Timings t;
  for (int64_t i = 0; i < o.warmup + o.reps; ++i) {
    const Span s = body();
    if (i >= o.warmup) {
      t.wall_ms.push_back(s.wall_ms);
      t.cpu_ms.push_back(s.cpu_ms);
    }
  }
  return t;
}

inline Timings time_runs(const Options& o, const std::function<void()>& body) {
  return time_self_timed_runs(o, [&] {
    const Stamp t0;
    body();
    return since(t0);
  });
}

// Tokens a repetition processes (generate: new tokens decoded; sgemm: one
// product; fma-peak: one run of the FMA chains).
inline int64_t tokens_per_rep(const Options& o) {
  if (o.workload == "sgemm" || o.workload == "fma-peak") return 1;
  return o.workload == "generate" ? o.new_tokens : o.batch * o.seq_len;
}

constexpr int64_t kSgemmSize = 1024;
// Iterations of fma-peak's chains per thread and repetition: about 0.1 s of AVX-512 FMAs.
constexpr int64_t kFmaPeakIters = 40'000'000;

// The FLOPs of one repetition, when they are counted (fma-peak's depend on the
// CPU's vector width: compare_phasor reports them): sgemm's 2 n^3, and a
// training step's model FLOPs, 6 x (the weights in matrix products: 4 d^2 + 3 d
// d_ff per layer and the 256 x d output head) + 12 x layers x d x seq (the
// attention's two products, forward and backward, causal mask not discounted)
// per token, as llm.c and nanoGPT count them.
inline double flops_per_rep(const Options& o) {
  if (o.workload == "sgemm") return 2.0 * static_cast<double>(kSgemmSize * kSgemmSize * kSgemmSize);
  if (o.workload != "train") return 0.0;
  const double d = static_cast<double>(o.d_model), layers = static_cast<double>(o.n_layers);
  const double weights = layers * (4 * d * d + 3 * d * static_cast<double>(o.d_ff)) + 256 * d;
  const double per_token = 6 * weights + 12 * layers * d * static_cast<double>(o.seq_len);
  return per_token * static_cast<double>(tokens_per_rep(o));
}

// The JSON line: wall and CPU times per repetition and their medians, tokens/s
// (by wall time), ms/token for generate, and the process's peak RSS (VmHWM)
// and its RSS before the workload.
inline void emit(const char* impl, const Options& o, const Timings& t, double base_rss_mib,
                 nlohmann::json extra = nlohmann::json::object()) {
  const double med = median(t.wall_ms);
  const double tokens = static_cast<double>(tokens_per_rep(o));
  nlohmann::json j = {{"impl", impl},
                      {"workload", o.workload},
                      {"position", o.position},
                      {"d_model", o.d_model},
                      {"n_layers", o.n_layers},
                      {"n_heads", o.n_heads},
                      {"d_ff", o.d_ff},
                      {"seq_len", o.seq_len},
                      {"batch", o.workload == "generate" ? 1 : o.batch},
                      {"threads", o.threads},
                      {"blas_threads", o.blas_threads},
                      {"precision", o.precision},
                      {"tokens_per_rep", tokens_per_rep(o)},
                      {"times_ms", t.wall_ms},
                      {"median_ms", med},
                      {"cpu_ms", t.cpu_ms},
                      {"median_cpu_ms", median(t.cpu_ms)},
                      {"tokens_per_s", tokens / (med / 1000.0)},
                      {"peak_rss_mib", proc_status_mib("VmHWM")},
                      {"base_rss_mib", base_rss_mib},
                      {"load_average", load_average()}};
  if (o.workload == "generate") j["ms_per_token"] = med / tokens;
  if (const double flops = flops_per_rep(o); flops > 0) {
    j["flops_per_rep"] = flops;
    j["gflops_per_s"] = flops / (med / 1000.0) / 1e9;
  }
  for (const auto& [k, v] : extra.items()) j[k] = v;
  if (j.contains("flops_per_rep")) j["gflops_per_s"] = j["flops_per_rep"].get<double>() / (med / 1000.0) / 1e9;
  std::cout << j.dump() << std::endl;
}

}  // namespace phasor::compare
