#pragma once
// Loss curves of one or more training runs, drawn as a self-contained SVG.
// A run folder holds log.jsonl: training lines {"step", "loss", "lr",
// "tokens_per_s", ...} and validation lines {"step", "val_loss", ...}.
#include <cstdint>
#include <string>
#include <vector>

namespace phasor {

struct LossPoint {
  int64_t step;
  double loss;
};

struct RunLog {
  std::string name;  // the run folder's base name
  std::vector<LossPoint> train, validation;  // sorted by step, one point per step
};

// Reads <run_dir>/log.jsonl. Other keys are ignored, and so is a null loss
// (how JSON writes NaN). phasor::Error names the folder or file at fault, and
// the line of a malformed one; a log with no loss at all is an error too.
RunLog read_run_log(const std::string& run_dir);

// Train loss (solid) and validation loss (dashed, with markers) against step,
// one colour per run, as an SVG document.
std::string loss_curves_svg(const std::vector<RunLog>& runs);

// Reads every run and writes loss_curves_svg to out_svg atomically.
void plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_svg);

}  // namespace phasor
