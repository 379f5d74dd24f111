// `phasor generate`: continue a prompt with a checkpoint, streaming the text to stdout.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/cli/precision_flag.h"
#include "app/cli/scaling_flags.h"
#include "app/cli/standard_output.h"
#include "app/evaluate.h"
#include "models/model_io.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Generate final : public Command {
 public:
  Generate() : Command("generate", "continue a prompt, streaming the text") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("--checkpoint", checkpoint_);
    flags.option("--prompt", prompt_, "the text to continue (one token per byte; default empty: start a new line)");
    flags.option("--tokens", sample_.tokens, "tokens to generate (default 200)").non_negative();
    flags.option("--temperature", sample_.temperature, "sampling temperature (default 0.8; 0: greedy; at most 1000)").finite_within(0, 1000);
    flags.option("--top-k", sample_.top_k, "sample from the K likeliest tokens only (default 0: all)").within(int64_t{0}, int64_t{1} << 31);
    flags.option("--top-p", sample_.top_p, "sample from the likeliest tokens whose probabilities sum to P (nucleus; default 1: all)")
        .finite_within(1e-12, 1);
    flags.option("--num-samples", samples_, "samples to draw, the i-th (from 0) with seed S + i, each after a header line when N > 1 (default 1)")
        .within(int64_t{1}, int64_t{10'000});
    flags.option("--seed", sample_.seed, "seed of the sampling (default 0)");
    flags.option("--repetition-penalty", sample_.repetition_penalty,
                 "divide the logit of every token already in the prompt or output by R (multiply when negative); 1: none, > 1 discourages repeats")
        .finite_within(1e-3, 1000);
    flags.option("--stop", stops_, "end a sample where it produces this text (not printed); several may be given");
    flags.option("--prompt-file", prompt_file_, "read the prompt from this file (its bytes as they are; instead of --prompt)");
    precision_.add(flags);
    scaling_.add(flags);
  }

  int run(const Flags& flags) override {
    PHASOR_CHECK(prompt_file_.empty() || flags.count("--prompt") == 0, "generate: give --prompt or --prompt-file, not both");
    if (!prompt_file_.empty()) prompt_ = read_file_bytes(prompt_file_, uint64_t{1} << 24, "16 MiB for a prompt");
    for (const std::string& s : stops_) {
      PHASOR_CHECK(!s.empty(), "generate: --stop '' is empty; give the text a sample ends at");
      sample_.stop.emplace_back(s.begin(), s.end());
      for (int64_t& byte : sample_.stop.back()) byte = static_cast<unsigned char>(byte);
    }
    const nn::PrecisionScope precision(precision_.value());
    const auto model = load_model(checkpoint_);
    model->set_position_scaling(scaling_.over(model->position_scaling()));
    // An empty prompt starts a new line: the model needs one token to condition on, and is not shown it.
    const std::vector<int64_t> ids = encode_prompt(prompt_.empty() ? std::string("\n") : prompt_, model->config().vocab_size);
    for (int64_t i = 0; i < samples_; ++i) {
      SampleOptions sample = sample_;
      sample.seed = sample_.seed + static_cast<uint64_t>(i);
      // The header and the prompt are echoed once generation has started, so a refusal prints nothing on stdout.
      bool echoed = false;
      const auto echo_prompt = [&] {
        if (!echoed) {
          if (samples_ > 1) std::printf("--- sample %ld of %ld (seed %llu)\n", static_cast<long>(i + 1), static_cast<long>(samples_),
                                        static_cast<unsigned long long>(sample.seed));
          std::fputs(prompt_.c_str(), stdout);
        }
        echoed = true;
      };
      // Bytes that may begin a --stop string wait until they do not (or the string completes, and is dropped).
      std::string held;
      generate(*model, ids, sample, [&](int64_t t) {
        echo_prompt();
        held.push_back(static_cast<char>(t));
        const size_t printable = held.size() - ending_stop_prefix(held);
        std::fwrite(held.data(), 1, printable, stdout);
        held.erase(0, printable);
        check_stdout();  // a full disk or a closed pipe stops the generation
      });
      std::fwrite(held.data(), 1, held.size() - stop_at_end(held), stdout);
      echo_prompt();
      std::fputc('\n', stdout);
    }
    return 0;
  }

 private:
  // The length of the --stop string `text` ends with (0: none).
  size_t stop_at_end(const std::string& text) const {
    for (const std::string& s : stops_)
      if (text.ends_with(s)) return s.size();
    return 0;
  }
  // The length of the longest end of `text` that begins (or is) a --stop string: what must not be printed yet.
  size_t ending_stop_prefix(const std::string& text) const {
    size_t longest = 0;
    for (const std::string& s : stops_)
      for (size_t n = std::min(s.size(), text.size()); n > longest; --n)
        if (text.compare(text.size() - n, n, s, 0, n) == 0) {
          longest = n;
          break;
        }
    return longest;
  }

  PrecisionFlag precision_;
  ScalingFlags scaling_;
  std::string checkpoint_, prompt_, prompt_file_;
  std::vector<std::string> stops_;
  SampleOptions sample_;
  int64_t samples_ = 1;
};

}  // namespace

std::unique_ptr<Command> generate_command() { return std::make_unique<Generate>(); }

}  // namespace phasor::cli
