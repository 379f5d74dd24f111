// `phasor plot`: loss curves of runs, or one run's per-head statistics, as an SVG.
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/output_path.h"
#include "app/plot.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Plot final : public Command {
 public:
  Plot() : Command("plot", "draw loss curves of one or more runs (or one run's per-head statistics) into an SVG") {}

  void add_flags(Flags& flags) override {
    flags.option("runs", runs_, "run folders").required();
    flags.option("--out", out_, "output SVG file (default loss.svg, or heads.svg with --heads)");
    flags.option("--label", labels_, "the runs' names in the legend, one per run in their order (default: the folders' names)");
    flags.flag("--heads", heads_,
               "per layer and head of one run trained with --log-heads: delta, beta, phase_bias and the gradient norms at the Euler transform");
  }

  int run(const Flags& flags) override {
    if (heads_) {
      PHASOR_CHECK(runs_.size() == 1, "plot --heads: give one run folder, got ", runs_.size());
      PHASOR_CHECK(labels_.empty(), "plot --heads: --label names the runs of a loss plot; a heads plot has one run");
      if (flags.count("--out") == 0) out_ = "heads.svg";
    }
    std::vector<NamedInput> logs;
    for (const std::string& run : runs_) logs.emplace_back("log", run + "/log.jsonl");
    check_output_path("plot", "--out", out_, logs);
    if (heads_) plot_heads(runs_[0], out_);
    else plot_runs(runs_, out_, labels_);
    std::printf("wrote %s\n", out_.c_str());
    return 0;
  }

 private:
  std::vector<std::string> runs_, labels_;
  std::string out_ = "loss.svg";
  bool heads_ = false;
};

}  // namespace

std::unique_ptr<Command> plot_command() { return std::make_unique<Plot>(); }

}  // namespace phasor::cli
