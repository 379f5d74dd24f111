// `phasor grad`: the gradient of one evaluation window's loss w.r.t. every parameter, as safetensors.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "app/cli/precision_flag.h"
#include "app/gradient.h"
#include "app/output_path.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"

namespace phasor::cli {

namespace {

class Grad final : public Command {
 public:
  Grad() : Command("grad", "gradient of one evaluation window's loss w.r.t. every parameter, as safetensors") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("--checkpoint", checkpoint_);
    flags.option("--data", data_, "a text file or a built-in corpus").required();
    flags.option("--seq-len", seq_len_, "window length L").required().positive();
    flags.option("--window", window_, "which of the spec's evaluation windows (default 0)").non_negative();
    flags.option("--out", out_, "output .safetensors (F32, the checkpoint's parameter names); --json alone writes no file");
    flags.flag("--json", json_, "print the loss and every gradient's 2-norm as one JSON object");
    flags.flag("--activations", activations_, "also write dL/dr and dL/dphi at each layer's Euler transform (complexformer only)");
    precision_.add(flags);
  }

  int run(const Flags&) override {
    const nn::PrecisionScope precision(precision_.value());
    PHASOR_CHECK(!out_.empty() || json_, "grad: give --out FILE (the gradients, as safetensors), --json (the loss and their norms), or both");
    if (!out_.empty()) check_output_path("grad", "--out", out_, {{"--checkpoint", checkpoint_}, {"--data", data_}});
    const auto model = load_model(checkpoint_);
    const WindowGradients g = window_gradients(*model, ByteTokenizer().encode(load_text(data_)), seq_len_, window_, activations_);
    if (!out_.empty()) save_gradients(out_, g, model->config());
    if (json_) {
      std::printf("%s\n", gradient_norms_json(g).dump().c_str());
    } else {
      std::printf("wrote %s: gradients of %zu parameters%s, window %ld of %ld (seq_len %ld), loss %.4f\n", out_.c_str(),
                  g.parameters.size(), g.activations.empty() ? "" : " and the Euler-transform activations",
                  static_cast<long>(g.window), static_cast<long>(g.windows), static_cast<long>(g.seq_len), g.loss);
    }
    return 0;
  }

 private:
  PrecisionFlag precision_;
  std::string checkpoint_, data_, out_;
  int64_t seq_len_ = 128, window_ = 0;
  bool json_ = false, activations_ = false;
};

}  // namespace

std::unique_ptr<Command> grad_command() { return std::make_unique<Grad>(); }

}  // namespace phasor::cli
