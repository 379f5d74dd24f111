// The `phasor` command line: train, eval, generate, plot, grad, attention, info (and sweep).
// Every failure ends with one line on stderr and a non-zero exit status.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <unistd.h>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <span>
#include <sstream>
#include <variant>
#include <new>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/attention_map.h"
#include "app/curvature.h"
#include "app/distributed.h"
#include "app/error_message.h"
#include "app/evaluate.h"
#include "app/gradient.h"
#include "app/output_path.h"
#include "app/plot.h"
#include "app/sweep.h"
#include "app/train.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/atomic_file.h"
#include "phasor_version.h"
#include "tensor/cpu/openblas_core.h"

using namespace phasor;

namespace {

// The flags of an option table (models/options.h): --<name with '-' for '_'>,
// bound to the field, with the row's help. An enum field's flag takes its text
// and help from its names; apply() sets the field after parsing, so an unknown
// name is refused like one in a config file (the message of parse_position,
// exit 1) and only once the command runs.
class FieldFlags {
 public:
  template <class Options>
  void add(CLI::App* cmd, Options& options, std::span<const Field<Options>> fields) {
    for (const Field<Options>& f : fields) {
      std::string flag = "--" + std::string(f.name);
      std::replace(flag.begin(), flag.end(), '_', '-');
      std::visit(
          [&](auto member) {
            using T = field_type<Options, decltype(member)>;
            T& value = options.*member;
            if constexpr (is_enum_field<T>) {
              std::string& text = enum_texts_.emplace_back();
              const CLI::Option* option = cmd->add_option(flag, text, EnumNames<T>::all("|"));
              enum_setters_.push_back([option, &text, &value] {
                if (option->count() > 0) value = EnumNames<T>::parse(text);
              });
            } else if constexpr (std::is_same_v<T, bool>) {
              if (f.flag == Flag::Switch) cmd->add_flag(flag, value, std::string(f.help));
              else cmd->add_option(flag, value, std::string(f.help));
            } else {
              cmd->add_option(flag, value, std::string(f.help));
            }
          },
          f.member);
    }
  }

  // Sets the enum fields whose flags were given; throws phasor::Error for an unknown name.
  void apply() const {
    for (const auto& set : enum_setters_) set();
  }

 private:
  std::deque<std::string> enum_texts_;  // CLI11 writes into these: their addresses must stay
  std::vector<std::function<void()>> enum_setters_;
};

TrainOptions options_from_file(const std::string& path) {
  PHASOR_CHECK(!std::filesystem::is_directory(path), "config file '", path, "' is a folder");
  PHASOR_CHECK(::access(path.c_str(), R_OK) == 0, "config file '", path, "' cannot be read");
  // A regular file of at most 16 MiB (a FIFO or a device is refused, not waited on).
  const std::string text = read_file_bytes(path, 16u << 20, "16 MiB for a config file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("config file '", path, "' is not valid JSON (", e.what(), ")");
  }
  return train_options_from_json(j);
}

// CLI11 clamps an integer beyond 64 bits to the nearest bound (a typo of 20
// digits would ask for 2^63-1 steps); every integer flag refuses one instead.
void refuse_out_of_range_integers(CLI::App& app) {
  const auto in_range = [](bool unsigned_flag) {
    return CLI::Validator(
        [unsigned_flag](std::string& value) -> std::string {
          errno = 0;
          char* end = nullptr;
          if (!value.empty() && value[0] == '-' && unsigned_flag)  // CLI11 would wrap -1 to 2^64-1
            return "value " + value + " is negative; this flag takes 0 to 2^64-1";
          if (!value.empty() && value[0] == '-') (void)std::strtoll(value.c_str(), &end, 0);
          else (void)std::strtoull(value.c_str(), &end, 0);
          return errno == ERANGE ? "value " + value + " is out of the 64-bit integer range" : std::string();
        },
        "");
  };
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* option : command->get_options())
      if (option->get_type_name() == "INT" || option->get_type_name() == "UINT") option->check(in_range(option->get_type_name() == "UINT"));
}

// CLI11's ranges let NaN through (every comparison with it is false), and
// PositiveNumber lets huge values through: every number flag is finite and
// within [lo, hi], refused otherwise with the flag's name.
CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return "value " + value + " is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) {
          std::ostringstream range;
          range << "value " << value << " is outside [" << lo << ", " << hi << "]";
          return range.str();
        }
        return std::string();
      },
      "");
}

// Output lost on a full disk or a failing pipe must not end with status 0:
// what stdout still buffers is flushed, and a write that failed now or
// earlier (a printf's error stays in ferror) becomes the one-line error.
// Descriptor 1 is closed too, so an error only close() reports is seen; nothing
// is written to stdout after this.
int finish_stdout(int status) {
  errno = 0;
  std::cout.flush();  // with stdio synchronised, this flushes stdout itself: its errno is the reason
  int reason = errno;
  bool failed = !std::cout.good();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) failed = true;
  if (reason == 0) reason = errno;
  errno = 0;
  if (::close(STDOUT_FILENO) != 0 && errno != EBADF) failed = true, reason = reason != 0 ? reason : errno;
  if (!failed || status != 0) return status;  // a command that failed already said why, in one line
  std::fprintf(stderr, "phasor: cannot write the output to standard output: %s\n",
               reason != 0 ? std::strerror(reason) : "a write failed");
  return 1;
}

// For output streamed as it is made (generate): stop at the first failed write.
void check_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
    fail("cannot write the output to standard output: ", errno != 0 ? std::strerror(errno) : "a write failed");
}

}  // namespace

// The value of `--config` on a `train` command line, read before parsing so
// that the flags, bound to the same options, override the file.
std::string config_argument(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) return argv[i + 1];
    if (a.starts_with("--config=")) return a.substr(9);
  }
  return "";
}

int run_cli(int argc, char** argv) {
  // OpenBLAS reads its kernels' CPU when it loads: when it mis-detected this
  // one, set it and start again (tensor/cpu/openblas_core.h). libgomp's wait
  // policy is left to the user: with OpenBLAS single-threaded inside Phasor's
  // pool, the default (spin briefly, then sleep) is the fastest measured
  // (docs/benchmarks.md, "Thread pool and wait policy").
  use_best_openblas_core(argv);
  CLI::App app{"phasor: train, evaluate and sample ComplexFormer language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "phasor " PHASOR_VERSION, "print the version this build was made from");

  // train
  TrainOptions train_opts;
  try {
    if (argc > 1 && std::string(argv[1]) == "train" && !config_argument(argc, argv).empty())
      train_opts = options_from_file(config_argument(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "phasor: %s\n", error_message(e).c_str());
    return 1;
  }
  std::string config_file, resume_dir;
  auto* train_cmd = app.add_subcommand("train", "train a model");
  train_cmd->add_option("--config", config_file, "JSON file of options (flags override it)");
  train_cmd->add_option("--resume", resume_dir, "continue the run in this folder exactly where it stopped");
  FieldFlags train_flags;  // model and optimizer flags; each overrides the config file
  train_flags.add<ModelConfig>(train_cmd, train_opts.model, kModelConfigFields);
  train_flags.add<TrainOptions>(train_cmd, train_opts, kTrainOptionFields);
  DistributedOptions dist;  // data parallelism across processes (docs/distributed.md)
  train_cmd->add_option("--distributed", dist.mode, "auto (MPI when mpirun/srun started several processes), off, mpi or nccl")
      ->check(CLI::IsMember({"auto", "off", "mpi", "nccl"}));
  train_cmd->add_option("--dist-timeout", dist.timeout_s, "seconds a rank waits for the others in a collective before aborting the job (at most 10^6)")
      ->check(finite_range(1e-3, 1e6));

  // eval
  std::string checkpoint, data;
  int64_t seq_len = 128, max_windows = 0, eval_batch = 8, arith_problems = 0;
  bool json = false;
  auto* eval_cmd = app.add_subcommand("eval", "loss and perplexity over the spec's evaluation windows");
  eval_cmd->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  eval_cmd->add_option("--data", data, "a text file or a built-in corpus")->required();
  eval_cmd->add_option("--seq-len", seq_len, "window length L")->check(CLI::PositiveNumber);
  eval_cmd->add_option("--max-windows", max_windows, "score at most K windows (0: all)")->check(CLI::NonNegativeNumber);
  eval_cmd->add_option("--batch", eval_batch, "windows per forward pass (at most 2^20)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  eval_cmd->add_option("--arith-problems", arith_problems,
                       "also score this many held-out arithmetic problems by greedy exact match (at most 100000)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}));
  eval_cmd->add_flag("--json", json, "print one JSON object");

  // generate
  std::string prompt;
  SampleOptions sample;
  auto* gen_cmd = app.add_subcommand("generate", "continue a prompt, streaming the text");
  gen_cmd->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  gen_cmd->add_option("--prompt", prompt, "the text to continue (one token per byte)")->required();
  gen_cmd->add_option("--tokens", sample.tokens, "tokens to generate (default 200)")->check(CLI::NonNegativeNumber);
  gen_cmd->add_option("--temperature", sample.temperature, "sampling temperature (default 0.8; 0: greedy; at most 1000)")
      ->check(finite_range(0, 1000));
  gen_cmd->add_option("--top-k", sample.top_k, "sample from the K likeliest tokens only (default 0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  gen_cmd->add_option("--seed", sample.seed, "seed of the sampling (default 0)");

  // plot
  std::vector<std::string> runs;
  std::string out_file = "loss.svg";
  bool plot_head_stats = false;
  auto* plot_cmd = app.add_subcommand("plot", "draw loss curves of one or more runs (or one run's per-head statistics) into an SVG");
  plot_cmd->add_option("runs", runs, "run folders")->required();
  plot_cmd->add_option("--out", out_file, "output SVG file (default loss.svg, or heads.svg with --heads)");
  plot_cmd->add_flag("--heads", plot_head_stats,
                     "per layer and head of one run trained with --log-heads: delta, beta, phase_bias and the gradient norms at the Euler transform");

  // grad
  int64_t grad_window = 0;
  std::string grad_out;
  bool grad_activations = false;
  auto* grad_cmd = app.add_subcommand("grad", "gradient of one evaluation window's loss w.r.t. every parameter, as safetensors");
  grad_cmd->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  grad_cmd->add_option("--data", data, "a text file or a built-in corpus")->required();
  grad_cmd->add_option("--seq-len", seq_len, "window length L")->required()->check(CLI::PositiveNumber);
  grad_cmd->add_option("--window", grad_window, "which of the spec's evaluation windows (default 0)")->check(CLI::NonNegativeNumber);
  grad_cmd->add_option("--out", grad_out, "output .safetensors (F32, the checkpoint's parameter names)")->required();
  grad_cmd->add_flag("--json", json, "print the loss and every gradient's 2-norm as one JSON object");
  grad_cmd->add_flag("--activations", grad_activations,
                     "also write dL/dr and dL/dphi at each layer's Euler transform (complexformer only)");

  // curvature
  CurvatureOptions curv;
  std::string curv_params = "delta,phase_bias,beta", curv_top = "5", curv_out;
  auto* curv_cmd = app.add_subcommand(
      "curvature", "top eigenvalues of the Hessian of one evaluation window's loss over chosen parameters (Lanczos on Hessian-vector products)");
  curv_cmd->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  curv_cmd->add_option("--data", data, "a text file or a built-in corpus")->required();
  curv_cmd->add_option("--seq-len", curv.seq_len, "window length L")->required()->check(CLI::PositiveNumber);
  curv_cmd->add_option("--window", curv.window, "which of the spec's evaluation windows (default 0)")->check(CLI::NonNegativeNumber);
  curv_cmd->add_option("--params", curv_params,
                       "comma-separated parameters: all, names, or dotted suffixes (default delta,phase_bias,beta; e.g. attn.wq.weight)");
  curv_cmd->add_option("--top", curv_top, "K eigenvalues, largest first (default 5), or 'all' for the exact Hessian (at most 1024 parameters)");
  curv_cmd->add_option("--max-hvps", curv.max_products, "Lanczos steps at most (default 300; at most 100000)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  curv_cmd->add_option("--tol", curv.tolerance, "relative residual each eigenpair must reach (default 1e-6; in [1e-300, 1])")
      ->check(finite_range(1e-300, 1));
  curv_cmd->add_option("--seed", curv.seed, "seed of the Lanczos start vector (default 0)");
  curv_cmd->add_option("--out", curv_out, "also write the eigenvectors (and eigenvalues) as F32 .safetensors");
  curv_cmd->add_flag("--json", json, "print the result as one JSON object");

  // attention
  std::string attention_text, attention_out;
  int64_t attention_layer = 0, attention_head = 0;
  auto* attention_cmd = app.add_subcommand("attention", "draw one head's attention map for a text as an SVG heat map");
  attention_cmd->add_option("--checkpoint", checkpoint, "model.safetensors")->required();
  attention_cmd->add_option("--text", attention_text, "the text (one token per byte)")->required();
  attention_cmd->add_option("--layer", attention_layer, "layer index, from 0")->required();
  attention_cmd->add_option("--head", attention_head, "head index, from 0")->required();
  attention_cmd->add_option("--out", attention_out, "output SVG file")->required();

  // info
  auto* info_cmd = app.add_subcommand("info", "print the config and parameter count of a checkpoint");
  info_cmd->add_option("checkpoint", checkpoint, "model.safetensors")->required();

  // sweep
  std::string preset = "quick", sweep_out, sweep_cell, sweep_device;
  int64_t sweep_steps = 0, sweep_seeds = 0, sweep_eval_tokens = 0, sweep_arith = -1, sweep_rounds = -1;
  std::vector<std::string> sweep_tasks;
  int sweep_jobs = 0;
  bool report_only = false;
  auto* sweep_cmd = app.add_subcommand("sweep", "train and evaluate every variant on every task with several seeds (docs/RESULTS.md)");
  sweep_cmd->add_option("--preset", preset, "quick (a 2-core CPU, under 40 minutes), long (long context to 65,536 positions, 2 cores, about an hour) or full (a GPU)")
      ->check(CLI::IsMember({"quick", "long", "full"}));
  sweep_cmd->add_option("--out", sweep_out, "folder of the sweep; rerunning continues it")->required();
  sweep_cmd->add_option("--jobs", sweep_jobs, "cells trained at once (default: the preset's)")->check(CLI::Range(1, 256));
  sweep_cmd->add_option("--steps", sweep_steps, "training steps per cell (default: the preset's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000'000}));
  sweep_cmd->add_option("--seeds", sweep_seeds, "seeds per cell (default: the preset's)")->check(CLI::Range(int64_t{1}, int64_t{100}));
  sweep_cmd->add_option("--eval-tokens", sweep_eval_tokens, "predictions scored per evaluation length (default: the preset's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  sweep_cmd->add_option("--arith-problems", sweep_arith, "held-out problems for arith exact match (default: the preset's)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}));
  sweep_cmd->add_option("--tasks", sweep_tasks, "only these of the preset's tasks (kjv, code, arith)")
      ->check(CLI::IsMember({"kjv", "code", "arith"}));
  sweep_cmd->add_option("--throughput-rounds", sweep_rounds, "rounds of the throughput measurement (default: the preset's)")
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  sweep_cmd->add_option("--device", sweep_device, "cpu or cuda (default: the preset's)")->check(CLI::IsMember({"cpu", "cuda"}));
  sweep_cmd->add_flag("--report-only", report_only, "only rewrite report.md and the plots from the results so far");
  sweep_cmd->add_option("--cell", sweep_cell, "run one cell of an existing sweep in this process (what the sweep itself starts)");

  try {
    refuse_out_of_range_integers(app);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "phasor: %s (see phasor --help)\n", one_line(e.what()).c_str());
    return 2;
  }

  try {
    if (*train_cmd) {
      init_distributed(dist);
      if (!resume_dir.empty())  // a resumed run is the checkpoint's run: only its length may change
        for (const CLI::Option* opt : train_cmd->get_options())
          PHASOR_CHECK(opt->count() == 0 || opt->check_lname("resume") || opt->check_lname("steps") ||
                           opt->check_lname("distributed") || opt->check_lname("dist-timeout"),  // how to run, not what
                       "train: ", opt->get_name(),
                       " cannot be combined with --resume (the run continues with its own options; only --steps may change)");
      train_flags.apply();
      if (resume_dir.empty())  // the run's own files must not replace its data or config
        for (const char* file : {"config.json", "validation.txt", "log.jsonl", "latest"})
          refuse_output_over_inputs("train", "the run file", train_opts.run_dir + "/" + file,
                                    {{"--data", train_opts.data}, {"--config", config_file}});
      const TrainSummary s = resume_dir.empty() ? train(train_opts)
                                                 : resume(resume_dir, train_cmd->count("--steps") ? train_opts.steps : 0);
      const auto loss_text = [](bool computed, double loss) {
        char text[32] = "not computed";
        if (computed) std::snprintf(text, sizeof text, "%.4f", loss);
        return std::string(text);
      };
      if (world().is_root())
        std::printf("trained %ld steps: loss %s, validation loss %s, %.0f tokens/s%s\n", static_cast<long>(s.steps_done),
                    loss_text(!std::isnan(s.final_loss), s.final_loss).c_str(), loss_text(s.validated, s.final_val_loss).c_str(),
                    s.tokens_per_second, s.interrupted ? " (interrupted; checkpoint saved)" : "");
      finalize_distributed();
      return s.interrupted ? 130 : 0;
    }
    if (*eval_cmd) {
      const auto model = load_model(checkpoint);
      check_positions_fit(model->config(), seq_len, "eval: --seq-len");
      const EvalResult r = evaluate(*model, ByteTokenizer().encode(load_text(data)), seq_len, max_windows, eval_batch);
      nlohmann::json out = {{"loss", r.loss}, {"ppl", r.ppl}, {"tokens", r.tokens}, {"windows", r.windows}, {"seq_len", r.seq_len}};
      if (arith_problems > 0) out["exact_match"] = arith_exact_match(*model, static_cast<size_t>(arith_problems));
      if (json) {
        std::printf("%s\n", out.dump().c_str());
      } else {
        std::printf("loss %.4f nats/token, ppl %.3f over %ld windows of %ld tokens (%ld predictions)\n", r.loss, r.ppl,
                    static_cast<long>(r.windows), static_cast<long>(r.seq_len), static_cast<long>(r.tokens));
        if (arith_problems > 0)
          std::printf("exact match %.4f on %ld held-out arithmetic problems\n", out["exact_match"].get<double>(), static_cast<long>(arith_problems));
      }
      return 0;
    }
    if (*gen_cmd) {
      const auto model = load_model(checkpoint);
      const std::vector<int64_t> ids = encode_prompt(prompt, model->config().vocab_size);
      // The prompt is echoed once generation has started, so a refusal prints nothing on stdout.
      bool echoed = false;
      const auto echo_prompt = [&] {
        if (!echoed) std::fputs(prompt.c_str(), stdout);
        echoed = true;
      };
      generate(*model, ids, sample, [&](int64_t t) {
        echo_prompt();
        std::fputc(static_cast<int>(t), stdout);
        check_stdout();  // a full disk or a closed pipe stops the generation
      });
      echo_prompt();
      std::fputc('\n', stdout);
      return 0;
    }
    if (*plot_cmd) {
      if (plot_head_stats) {
        PHASOR_CHECK(runs.size() == 1, "plot --heads: give one run folder, got ", runs.size());
        if (plot_cmd->count("--out") == 0) out_file = "heads.svg";
      }
      std::vector<NamedInput> logs;
      for (const std::string& run : runs) logs.emplace_back("log", run + "/log.jsonl");
      check_output_path("plot", "--out", out_file, logs);
      if (plot_head_stats) plot_heads(runs[0], out_file);
      else plot_runs(runs, out_file);
      std::printf("wrote %s\n", out_file.c_str());
      return 0;
    }
    if (*sweep_cmd) {
      PHASOR_CHECK(!is_run_folder(sweep_out), "sweep: --out '", sweep_out,
                   "' holds a training run, not a sweep; choose another --out");
      if (!sweep_cell.empty()) {
        run_sweep_cell(sweep_out, sweep_cell);
        return 0;
      }
      if (!report_only) {
        SweepPlan plan = sweep_preset(preset);
        if (sweep_jobs > 0) plan.jobs = sweep_jobs;
        if (sweep_steps > 0) plan.steps = sweep_steps, plan.warmup = std::min(plan.warmup, sweep_steps / 10);
        if (sweep_seeds > 0) plan.seeds = sweep_seeds;
        if (sweep_eval_tokens > 0) plan.eval_tokens = sweep_eval_tokens;
        if (sweep_arith >= 0) plan.arith_problems = sweep_arith;
        if (sweep_rounds >= 0) plan.throughput_rounds = sweep_rounds;
        if (!sweep_tasks.empty()) plan.tasks = sweep_tasks;
        if (!sweep_device.empty()) plan.device = sweep_device;
        run_sweep(plan, sweep_out, std::filesystem::read_symlink("/proc/self/exe").string());
      }
      write_sweep_report(sweep_out);
      std::printf("wrote %s/report.md\n", sweep_out.c_str());
      return 0;
    }
    if (*grad_cmd) {
      check_output_path("grad", "--out", grad_out, {{"--checkpoint", checkpoint}, {"--data", data}});
      const auto model = load_model(checkpoint);
      const WindowGradients g = window_gradients(*model, ByteTokenizer().encode(load_text(data)), seq_len, grad_window, grad_activations);
      save_gradients(grad_out, g, model->config());
      if (json) {
        std::printf("%s\n", gradient_norms_json(g).dump().c_str());
      } else {
        std::printf("wrote %s: gradients of %zu parameters%s, window %ld of %ld (seq_len %ld), loss %.4f\n", grad_out.c_str(),
                    g.parameters.size(), g.activations.empty() ? "" : " and the Euler-transform activations",
                    static_cast<long>(g.window), static_cast<long>(g.windows), static_cast<long>(g.seq_len), g.loss);
      }
      return 0;
    }
    if (*curv_cmd) {
      curv.params.clear();
      for (size_t at = 0; at <= curv_params.size();) {
        const size_t comma = std::min(curv_params.find(',', at), curv_params.size());
        PHASOR_CHECK(comma > at, "curvature: --params '", curv_params, "' has an empty entry");
        curv.params.push_back(curv_params.substr(at, comma - at));
        at = comma + 1;
      }
      if (curv_top == "all") {
        curv.top = 0;
      } else {
        size_t used = 0;
        try {
          curv.top = std::stoll(curv_top, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        PHASOR_CHECK(used == curv_top.size() && curv.top > 0, "curvature: --top must be a positive integer or 'all', got '", curv_top, "'");
      }
      if (!curv_out.empty()) check_output_path("curvature", "--out", curv_out, {{"--checkpoint", checkpoint}, {"--data", data}});
      const auto model = load_model(checkpoint);
      const CurvatureResult r = curvature(*model, ByteTokenizer().encode(load_text(data)), curv);
      if (!curv_out.empty()) save_eigenvectors(curv_out, r, model->config());
      if (json) {
        std::printf("%s\n", curvature_json(r).dump().c_str());
      } else {
        std::printf("%s Hessian of window %ld (seq_len %ld, loss %.4f) over %ld parameters: %ld Hessian-vector products, %s\n",
                    r.method.c_str(), static_cast<long>(r.window), static_cast<long>(r.seq_len), r.loss, static_cast<long>(r.dimension),
                    static_cast<long>(r.products), r.converged ? "converged" : "NOT converged");
        for (size_t i = 0; i < r.eigenvalues.size(); ++i)
          std::printf("  lambda_%zu = %.8g   (relative residual %.2g)\n", i + 1, r.eigenvalues[i], r.residuals[i]);
        if (!curv_out.empty()) std::printf("wrote %s\n", curv_out.c_str());
      }
      return 0;
    }
    if (*attention_cmd) {
      check_output_path("attention", "--out", attention_out, {{"--checkpoint", checkpoint}});
      const auto model = load_model(checkpoint);
      const std::vector<int64_t> ids = ByteTokenizer().encode(attention_text);
      const Tensor map = attention_map(*model, ids, attention_layer, attention_head);
      const std::string title = "layer " + std::to_string(attention_layer) + ", head " + std::to_string(attention_head) + " (" +
                                std::string(position_name(model->config().position)) + ")";
      write_text_atomically(attention_out, attention_map_svg(map, ids, title));
      std::printf("wrote %s\n", attention_out.c_str());
      return 0;
    }
    if (*info_cmd) {  // the file alone, checked whole: no model is built
      const ModelFile file = read_model_file(checkpoint);
      std::printf("%s\nparameters: %ld\n", to_json(file.config).dump(2).c_str(), static_cast<long>(parameter_count(file.config)));
      return 0;
    }
  } catch (const std::exception& e) {
    const std::string message = error_message(e);
    if (world().world_size() > 1) {  // one rank failing takes the whole job down, rather than leaving the others waiting
      std::fprintf(stderr, "phasor: rank %d of %d: %s\n", world().rank(), world().world_size(), message.c_str());
      world().abort(1);
    }
    std::fprintf(stderr, "phasor: %s\n", message.c_str());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) { return finish_stdout(run_cli(argc, argv)); }
