#pragma once
// The --precision flag of train, eval, generate and grad: float32 (the
// default) or bf16, mixed precision's policy (nn/precision.h).
// May include: app/cli/command_line.h, nn/.
#include <string>

#include "app/cli/command_line.h"
#include "nn/precision.h"

namespace phasor::cli {

struct PrecisionFlag {
  std::string text = "float32";
  void add(Flags& flags) {
    flags.option("--precision", text, "float32|bf16: bf16 runs the weight GEMMs in bfloat16 with float32 accumulation (mixed precision; "
                                      "phases, softmax, norms, loss and optimizer stay float32)")
        .one_of({"float32", "bf16"});
  }
  nn::Precision value() const { return nn::parse_precision(text); }
};

}  // namespace phasor::cli
