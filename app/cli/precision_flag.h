#pragma once
// The --precision flag of eval, generate and grad: float32 (the default),
// bf16 (mixed precision's policy, nn/precision.h) or auto (bf16 where the CPU
// has bf16 arithmetic).
// May include: app/cli/command_line.h, nn/.
#include <string>

#include "app/cli/command_line.h"
#include "nn/precision.h"

namespace phasor::cli {

struct PrecisionFlag {
  std::string text = "float32";
  void add(Flags& flags) {
    flags.option("--precision", text, "float32|bf16|auto: bf16 runs the weight GEMMs in bfloat16 with float32 accumulation (mixed precision; "
                                      "phases, softmax, norms, loss and optimizer stay float32); auto picks bf16 where the CPU has bf16 "
                                      "arithmetic (AVX512-BF16 or AMX), float32 elsewhere (default float32)")
        .one_of({"float32", "bf16", "auto"});
  }
  nn::Precision value() const { return nn::resolve_precision(text, DeviceType::CPU); }  // these commands run on the CPU
};

}  // namespace phasor::cli
