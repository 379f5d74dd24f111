// `phasor generate`: continue a prompt with a checkpoint, streaming the text to stdout.
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/cli/precision_flag.h"
#include "app/cli/scaling_flags.h"
#include "app/cli/standard_output.h"
#include "app/evaluate.h"
#include "models/model_io.h"

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
    precision_.add(flags);
    scaling_.add(flags);
  }

  int run(const Flags&) override {
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
      generate(*model, ids, sample, [&](int64_t t) {
        echo_prompt();
        std::fputc(static_cast<int>(t), stdout);
        check_stdout();  // a full disk or a closed pipe stops the generation
      });
      echo_prompt();
      std::fputc('\n', stdout);
    }
    return 0;
  }

 private:
  PrecisionFlag precision_;
  ScalingFlags scaling_;
  std::string checkpoint_, prompt_;
  SampleOptions sample_;
  int64_t samples_ = 1;
};

}  // namespace

std::unique_ptr<Command> generate_command() { return std::make_unique<Generate>(); }

}  // namespace phasor::cli
