// `phasor eval`: loss and perplexity of a checkpoint over the spec's evaluation windows.
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
    flags.option("--seq-len", seq_len_, "window length L").positive();
    flags.option("--max-windows", max_windows_, "score at most K windows (0: all)").non_negative();
    flags.option("--batch", batch_, "windows per forward pass (at most 2^20)").within(int64_t{1}, int64_t{1} << 20);
    flags.option("--arith-problems", arith_problems_, "also score this many held-out arithmetic problems by greedy exact match (at most 100000)")
        .within(int64_t{0}, int64_t{100'000});
    flags.flag("--json", json_, "print one JSON object");
    precision_.add(flags);
    scaling_.add(flags);
  }

  int run(const Flags&) override {
    const nn::PrecisionScope precision(precision_.value());
    const auto model = load_model(checkpoint_);
    model->set_position_scaling(scaling_.over(model->position_scaling()));  // refused before any note is printed
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
  std::string checkpoint_, data_;
  int64_t seq_len_ = 128, max_windows_ = 0, batch_ = 8, arith_problems_ = 0;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> eval_command() { return std::make_unique<Eval>(); }

}  // namespace phasor::cli
