#pragma once
// Loss curves of one or more training runs, and the per-head statistics of a
// run trained with --log-heads, drawn as self-contained SVGs.
// A run folder holds log.jsonl: training lines {"step", "loss", "lr",
// "tokens_per_s", ...} and validation lines {"step", "val_loss", ...}.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/svg.h"

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
// the line of a malformed one; a log with no loss at all is an error too. A
// malformed last line (a write cut short by a full disk or a kill) is skipped
// with a one-line warning on stderr; one before other lines stays an error.
RunLog read_run_log(const std::string& run_dir);

// Whether one line of a log.jsonl is a whole JSON object.
bool is_whole_log_line(std::string_view text);
// Drops a partial or malformed last line of a run's log (repair_last_line,
// nn/atomic_file.h), so the lines appended next start on a line of their own;
// returns a one-line note saying so, or "" when the log was whole (or absent).
std::string repair_run_log(const std::string& log_path);

// Train loss (solid) and validation loss (dashed, with markers) against step,
// one colour per run, as an SVG document.
std::string loss_curves_svg(const std::vector<RunLog>& runs);

// A named line of (x, y) points, for line_chart_svg; `errors`, if given, one
// per point: a vertical bar from y - error to y + error (a standard error).
struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  std::vector<double> errors;
};

// Lines with point markers (and error bars), one colour per series; x_scale
// Log2 puts x on a logarithmic axis with ticks at powers of two (sequence
// lengths), Log10 on one labelled 100k, 1M (parameters). Where the y axis
// spans 0, a darker line marks it (a difference's "no difference").
std::string line_chart_svg(const std::string& title, const std::vector<LineSeries>& series, const std::string& x_label,
                           const std::string& y_label, svg::XScale x_scale = svg::XScale::Linear);

// Reads every run and writes loss_curves_svg to out_svg atomically. Each run's
// legend entry is its label when `labels` are given (one per run), else its
// folder's base name, or as many trailing parts of its path as tell it apart
// from the others' (a/run and b/run, not run twice).
void plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_svg, const std::vector<std::string>& labels = {});

// Per-head statistics of a complexformer run trained with --log-heads
// (app/train.cpp writes them as "heads": one object per layer, each key an
// array of one number per head). For each metric, one (step, value) series per
// layer and head.
struct HeadSeries {
  int64_t layer = 0, head = 0;
  std::vector<LossPoint> points;  // (step, value), sorted by step, one per step
};
struct HeadMetric {
  std::string key;  // as logged: delta_mean, beta, phase_bias_mean, {q,k}_grad_{phi,r}_norm
  std::vector<HeadSeries> series;  // layer-major: index layer * heads + head
};
struct HeadLog {
  std::string name;  // the run folder's base name
  int64_t layers = 0, heads = 0;
  std::vector<HeadMetric> metrics;  // in the order above; a metric the log lacks is left out
};

// Reads <run_dir>/log.jsonl; phasor::Error names the line of a malformed
// "heads" entry, and a log without any (another variant, or no --log-heads).
HeadLog read_head_log(const std::string& run_dir);

// One panel per metric against step, one line per head (colour: head, dash
// pattern: layer); gradient norms on a log10 scale.
std::string head_statistics_svg(const HeadLog& log);

// Reads the run and writes head_statistics_svg to out_svg atomically.
void plot_heads(const std::string& run_dir, const std::string& out_svg);

}  // namespace phasor
