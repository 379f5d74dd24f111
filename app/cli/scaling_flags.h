#pragma once
// The context-extension flags of eval, generate, attention and train
// (--rope-scaling, --rope-factor, --original-length, --yarn-alpha,
// --yarn-beta): what they do is models/rotary_scaling.h's.
// May include: app/cli/command_line.h, models/.
#include <string>

#include "app/cli/command_line.h"
#include "models/rotary_scaling.h"

namespace phasor::cli {

struct ScalingFlags {
  std::string method;  // empty: what the checkpoint records (none for a model trained without one)
  double factor = 1.0, yarn_alpha = 1.0, yarn_beta = 32.0;
  int64_t original_length = 0;

  void add(Flags& flags) {
    flags.option("--rope-scaling", method,
                 "none|pi|ntk|yarn: stretch the rotary frequencies of rope, xpos, complexformer (its beta term) and pope to --rope-factor "
                 "times the trained context (carope: pi only); default: what the checkpoint records")
        .one_of({"none", "pi", "ntk", "yarn"});
    flags.option("--rope-factor", factor, "S >= 1: the context extension's factor (default 1)").finite_within(1.0, 1e6);
    flags.option("--original-length", original_length,
                 "L: the length the model was trained at, for a checkpoint that does not record it (yarn needs it)")
        .positive();
    flags.option("--yarn-alpha", yarn_alpha, "YaRN's ramp: frequencies turning fewer than alpha times in L are interpolated (default 1)").finite_within(0.0, 1e6);
    flags.option("--yarn-beta", yarn_beta, "YaRN's ramp: frequencies turning more than beta times in L are kept (default 32)").finite_within(0.0, 1e6);
  }

  // The scaling a model whose file records `recorded` runs with: the flags
  // where given, the recorded values elsewhere. Not validated here
  // (CausalLM::set_position_scaling refuses what the variant cannot take).
  PositionScaling over(const PositionScaling& recorded) const {
    PositionScaling s = recorded;
    if (!method.empty()) {
      s.method = parse_rope_scaling(method);
      s.factor = factor;
      s.yarn_alpha = yarn_alpha;
      s.yarn_beta = yarn_beta;
    }
    if (original_length > 0) s.original_length = original_length;
    return s;
  }
};

}  // namespace phasor::cli
