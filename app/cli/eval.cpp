// `phasor eval`: loss and perplexity of a checkpoint over the spec's evaluation
// windows, or, on a built-in task (passkey, copy, recall, flipflop), its
// exact-match accuracy on examples of the window's length.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "app/checkpoint_path.h"
#include "app/cli/command.h"
#include "app/cli/precision_flag.h"
#include "app/cli/scaling_flags.h"
#include "app/evaluate.h"
#include "app/output_path.h"
#include "models/data/corpus.h"
#include "models/data/tasks.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Eval final : public Command {
 public:
  Eval() : Command("eval", "loss and perplexity over the spec's evaluation windows") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("--checkpoint", checkpoint_);
    flags.option("--data", data_, "a text file or a built-in corpus (default: the held-out text of the checkpoint's run, its validation.txt)");
    flags.option("--seq-len", seq_len_, "window length L (default: the run's training length for a checkpoint in a run folder, else 128)").positive();
    flags.option("--max-windows", max_windows_, "score at most K windows (0: all)").non_negative();
    flags.option("--batch", batch_, "windows per forward pass (at most 2^20)").within(int64_t{1}, int64_t{1} << 20);
    flags.option("--arith-problems", arith_problems_, "also score this many held-out arithmetic problems by greedy exact match (at most 100000)")
        .within(int64_t{0}, int64_t{100'000});
    flags.option("--examples", examples_, "a task (passkey, copy, recall, flipflop): score this many examples of --seq-len bytes (default 100; at most 10^6)")
        .within(int64_t{1}, int64_t{1'000'000});
    flags.option("--depths", depths_, "passkey: the depths in percent the examples are spread evenly over (default 0,25,50,75,100)");
    flags.option("--seed", seed_, "a task: the seed of its examples (default 2, the evaluation seed training never uses)");
    flags.option("--dump-examples", dump_, "a task: write each scored example as a JSON line (prompt, answer, depth, correct) to this file");
    flags.flag("--json", json_, "print one JSON object");
    precision_.add(flags);
    scaling_.add(flags);
  }

  int run(const Flags& flags) override {
    const nn::PrecisionScope precision(precision_.value());
    const auto model = load_model(checkpoint_);
    model->set_position_scaling(scaling_.over(model->position_scaling()));  // refused before any note is printed
    if (flags.count("--seq-len") == 0) default_to_training_length();
    if (is_task(data_) && !std::filesystem::exists(data_)) return run_task(*model, flags.count("--batch") > 0 ? batch_ : 0);
    PHASOR_CHECK(!task_flag_given(flags), "eval: --examples, --depths, --seed and --dump-examples are for a task's examples (--data ", task_names(), ")");
    const std::string data = data_to_score();
    check_positions_fit(model->config(), seq_len_, "eval: --seq-len");
    const EvalResult r = evaluate(*model, ByteTokenizer().encode(load_text(data)), seq_len_, max_windows_, batch_);
    nlohmann::json out = {{"loss", r.loss}, {"ppl", r.ppl}, {"tokens", r.tokens}, {"windows", r.windows}, {"seq_len", r.seq_len}};
    if (arith_problems_ > 0) out["exact_match"] = arith_exact_match(*model, static_cast<size_t>(arith_problems_));
    if (json_) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf("loss %.4f nats/token, ppl %.3f over %ld windows of %ld tokens (%ld predictions)\n", r.loss, r.ppl,
                  static_cast<long>(r.windows), static_cast<long>(r.seq_len), static_cast<long>(r.tokens));
      if (arith_problems_ > 0)
        std::printf("exact match %.4f on %ld held-out arithmetic problems\n", out["exact_match"].get<double>(), static_cast<long>(arith_problems_));
    }
    return 0;
  }

 private:
  static bool task_flag_given(const Flags& flags) {
    return flags.count("--examples") + flags.count("--depths") + flags.count("--seed") + flags.count("--dump-examples") > 0;
  }

  // Exact-match accuracy on the task's examples (app/evaluate.h).
  int run_task(const CausalLM& model, int64_t batch) {
    PHASOR_CHECK(arith_problems_ == 0 && max_windows_ == 0, "eval: --arith-problems and --max-windows are for a text, not the task '", data_, "'");
    TaskEvalOptions o;
    o.task = parse_task(data_);
    o.length = seq_len_;
    o.examples = examples_ > 0 ? examples_ : 100;
    o.seed = seed_;
    o.depths = parse_depths(depths_);
    o.batch = batch;
    PHASOR_CHECK(o.depths.empty() || o.task == Task::Passkey, "eval: --depths is passkey's; the ", data_, " task has no depth");
    if (!dump_.empty()) check_output_path("eval", "--dump-examples", dump_, {{"--checkpoint", checkpoint_}});
    const TaskEvaluation e = evaluate_task(model, o);
    if (!dump_.empty()) {
      std::string lines;
      for (size_t i = 0; i < e.examples.size(); ++i) lines += example_json_line(e.examples[i], e.score.correct_each[i]) + "\n";
      write_text_atomically(dump_, lines);
    }
    nlohmann::json out = to_json(e.score);
    out["task"] = data_;
    out["seq_len"] = seq_len_;
    out["seed"] = seed_;
    if (json_) {
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    std::printf("%s at %ld bytes: accuracy %.4f (%zu of %zu; 95%% Wilson interval %.4f to %.4f), answer loss %.4f nats/byte\n", data_.c_str(),
                static_cast<long>(seq_len_), e.score.accuracy, e.score.correct, e.score.examples, e.score.interval.low,
                e.score.interval.high, e.score.answer_log_loss);
    for (const auto& [depth, d] : e.score.by_depth)
      std::printf("  depth %3d%%: accuracy %.4f (%zu of %zu)\n", depth, static_cast<double>(d.correct) / static_cast<double>(d.examples),
                  d.correct, d.examples);
    return 0;
  }

  // "0,25,50": each a whole percentage from 0 to 100.
  static std::vector<int> parse_depths(const std::string& text) {
    std::vector<int> depths;
    if (text.empty()) return depths;
    size_t start = 0;
    while (true) {
      const size_t end = std::min(text.find(',', start), text.size());
      const std::string item = text.substr(start, end - start);
      const bool digits = !item.empty() && item.size() <= 3 && item.find_first_not_of("0123456789") == std::string::npos;
      PHASOR_CHECK(digits && std::stoi(item) <= 100, "eval: --depths must be whole percentages from 0 to 100 separated by commas, got '", text, "'");
      depths.push_back(std::stoi(item));
      if (end == text.size()) break;
      start = end + 1;
    }
    return depths;
  }

  // Without --seq-len: the length the checkpoint's run trained at (its
  // config.json), said on stderr, so that eval scores what training validated.
  void default_to_training_length() {
    const std::string run = run_folder_of(checkpoint_);
    if (run.empty()) return;
    int64_t trained = 0;
    try {
      trained = nlohmann::json::parse(read_file_bytes(run + "/config.json", 16u << 20, "16 MiB for a config file")).value("seq_len", int64_t{0});
    } catch (const std::exception&) {
      return;  // an unreadable config keeps the default
    }
    if (trained <= 0) return;
    seq_len_ = trained;
    std::fprintf(stderr, "eval: --seq-len %ld, the run's training length (give --seq-len for another)\n", static_cast<long>(seq_len_));
  }

  // --data, or the run's held-out text; a note on stderr where --data is the text the run trained on.
  std::string data_to_score() const {
    const std::string run = run_folder_of(checkpoint_);
    if (data_.empty()) {
      PHASOR_CHECK(!run.empty(), "eval: give --data: '", checkpoint_,
                   "' is not in a training run's folder, whose held-out text (validation.txt) eval scores by default");
      const std::string held_out = (std::filesystem::path(run) / "validation.txt").string();
      std::fprintf(stderr, "eval: scoring the run's held-out text, %s\n", held_out.c_str());
      return held_out;
    }
    if (!run.empty() && trained_on(run, data_))
      std::fprintf(stderr, "eval: note: %s is the text this run trained on, so these windows include training text; without --data, eval scores the held-out part (%s/validation.txt)\n",
                   data_.c_str(), run.c_str());
    return data_;
  }
  // Whether `data` names the run's training data: the same built-in corpus, or the same file.
  static bool trained_on(const std::string& run, const std::string& data) {
    std::string trained;
    try {
      trained = nlohmann::json::parse(read_file_bytes(run + "/config.json", 16u << 20, "16 MiB for a config file")).value("data", "");
    } catch (const std::exception&) {
      return false;  // an unreadable config only loses the note
    }
    return trained == data || (!trained.empty() && same_file(trained, data));
  }

  PrecisionFlag precision_;
  ScalingFlags scaling_;
  std::string checkpoint_, data_, depths_, dump_;
  int64_t seq_len_ = 128, max_windows_ = 0, batch_ = 8, arith_problems_ = 0, examples_ = 0;
  uint64_t seed_ = kTaskEvalSeed;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> eval_command() { return std::make_unique<Eval>(); }

}  // namespace phasor::cli
