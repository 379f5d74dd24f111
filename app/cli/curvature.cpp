// `phasor curvature`: the largest or smallest eigenvalues of the Hessian of one evaluation window's loss over chosen parameters.
#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "app/curvature.h"
#include "app/output_path.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Curvature final : public Command {
 public:
  Curvature()
      : Command("curvature",
                "the largest or smallest eigenvalues of the Hessian of an evaluation window's loss (or several windows' mean) over chosen parameters (Lanczos on Hessian-vector products)") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("--checkpoint", checkpoint_);
    flags.option("--data", data_, "a text file or a built-in corpus").required();
    flags.option("--seq-len", options_.seq_len, "window length L").required().positive();
    flags.option("--window", options_.window, "which of the spec's evaluation windows (default 0)").non_negative();
    flags.option("--windows", options_.window_count, "the mean loss of this many consecutive windows from --window (default 1; at most 4096)")
        .within(int64_t{1}, int64_t{4096});
    flags.option("--params", params_,
                 "comma-separated parameters: all, names, or dotted suffixes (default delta,phase_bias,beta; e.g. attn.wq.weight)");
    flags.option("--top", top_, "K eigenvalues (default 5), or 'all' for the exact Hessian (at most 1024 parameters)");
    flags.option("--which", which_, "which end of the spectrum K counts from: largest (default, largest first), smallest "
                                    "(the negative end, smallest first) or both (K of each)")
        .one_of({"largest", "smallest", "both"});
    flags.option("--max-hvps", options_.max_products, "Lanczos steps at most (default 300; at most 100000)").within(int64_t{1}, int64_t{100'000});
    flags.option("--tol", options_.tolerance, "relative residual each eigenpair must reach (default 1e-6; in [1e-300, 1])")
        .finite_within(1e-300, 1);
    flags.option("--seed", options_.seed, "seed of the Lanczos start vector (default 0)");
    flags.option("--out", out_, "also write the eigenvectors (and eigenvalues) as F32 .safetensors");
    flags.flag("--json", json_, "print the result as one JSON object");
  }

  int run(const Flags&) override {
    options_.params.clear();
    for (size_t at = 0; at <= params_.size();) {
      const size_t comma = std::min(params_.find(',', at), params_.size());
      PHASOR_CHECK(comma > at, "curvature: --params '", params_, "' has an empty entry");
      options_.params.push_back(params_.substr(at, comma - at));
      at = comma + 1;
    }
    if (top_ == "all") {
      options_.top = 0;
    } else {
      size_t used = 0;
      try {
        options_.top = std::stoll(top_, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      PHASOR_CHECK(used == top_.size() && options_.top > 0, "curvature: --top must be a positive integer or 'all', got '", top_, "'");
    }
    options_.which = which_ == "smallest" ? SpectrumEnd::Smallest : which_ == "both" ? SpectrumEnd::Both : SpectrumEnd::Largest;
    if (!out_.empty()) check_output_path("curvature", "--out", out_, {{"--checkpoint", checkpoint_}, {"--data", data_}});
    const auto model = load_model(checkpoint_);
    const CurvatureResult r = curvature(*model, ByteTokenizer().encode(load_text(data_)), options_);
    if (!out_.empty()) save_eigenvectors(out_, r, model->config());
    if (json_) {
      std::printf("%s\n", curvature_json(r).dump().c_str());
    } else {
      char windows[64];
      if (r.window_count == 1) std::snprintf(windows, sizeof windows, "window %ld", static_cast<long>(r.window));
      else std::snprintf(windows, sizeof windows, "windows %ld-%ld (mean)", static_cast<long>(r.window), static_cast<long>(r.window + r.window_count - 1));
      std::printf("%s Hessian of %s (seq_len %ld, loss %.4f) over %ld parameters: %ld Hessian-vector products, %s\n", r.method.c_str(),
                  windows, static_cast<long>(r.seq_len), r.loss, static_cast<long>(r.dimension), static_cast<long>(r.products),
                  r.converged ? "converged" : "NOT converged");
      for (size_t i = 0; i < r.eigenvalues.size(); ++i)
        std::printf("  lambda_%zu = %.8g   (relative residual %.2g)\n", i + 1, r.eigenvalues[i], r.residuals[i]);
      // The formed matrix's asymmetry says how far float64 rounding leaves it from symmetric.
      if (r.method == "exact") std::printf("  asymmetry ||H - H^T|| / ||H|| = %.2g\n", r.asymmetry);
      if (!out_.empty()) std::printf("wrote %s\n", out_.c_str());
    }
    return 0;
  }

 private:
  std::string checkpoint_, data_, params_ = "delta,phase_bias,beta", top_ = "5", which_ = "largest", out_;
  CurvatureOptions options_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> curvature_command() { return std::make_unique<Curvature>(); }

}  // namespace phasor::cli
