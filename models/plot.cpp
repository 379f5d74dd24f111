#include "models/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/data/corpus.h"
#include "models/svg.h"
#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- reading the log

namespace {

std::string run_name(const std::string& run_dir) {
  fs::path path = fs::absolute(run_dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "runs/a/" names "a" too
  return path.filename().string();
}

// Absent and null (JSON's spelling of NaN, e.g. a diverged step) both mean no point.
std::optional<double> loss_field(const json& line, const char* key, const std::string& where) {
  if (!line.contains(key) || line[key].is_null()) return std::nullopt;
  PHASOR_CHECK(line[key].is_number(), where, ": '", key, "' is not a number");
  return line[key].get<double>();
}

void add_log_line(const json& line, const std::string& where, RunLog& run) {
  const auto train = loss_field(line, "loss", where);
  const auto validation = loss_field(line, "val_loss", where);
  if (!train && !validation) return;  // some other record
  PHASOR_CHECK(line.contains("step") && line["step"].is_number_integer(), where,
               ": a loss line needs an integer 'step'");
  const auto step = line["step"].get<int64_t>();
  if (train) run.train.push_back({step, *train});
  if (validation) run.validation.push_back({step, *validation});
}

// A resumed run logs again from its checkpoint's step: sort, and keep the
// latest value of each step so the curve never doubles back.
void sort_keeping_latest(std::vector<LossPoint>& points) {
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  std::vector<LossPoint> unique;
  for (const LossPoint& p : points) {
    if (!unique.empty() && unique.back().step == p.step)
      unique.back() = p;
    else
      unique.push_back(p);
  }
  points = std::move(unique);
}

}  // namespace

namespace {

// Calls visit(line, "path:N") for every non-blank line of <run_dir>/log.jsonl;
// returns the log's path.
std::string for_each_log_line(const std::string& run_dir, const std::function<void(const json&, const std::string&)>& visit) {
  PHASOR_CHECK(fs::is_directory(run_dir), "plot: run folder '", run_dir, "' does not exist");
  const std::string log_path = (fs::path(run_dir) / "log.jsonl").string();
  std::ifstream in(log_path);
  PHASOR_CHECK(in, "plot: '", log_path, "' not found (is '", run_dir, "' a training run folder?)");
  std::string text;
  for (int line_number = 1; std::getline(in, text); ++line_number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = log_path + ":" + std::to_string(line_number);
    json line;
    try {
      line = json::parse(text);
    } catch (const json::parse_error& e) {
      fail(where, ": malformed JSON (", e.what(), ")");
    }
    PHASOR_CHECK(line.is_object(), where, ": expected a JSON object, got ", line.type_name());
    visit(line, where);
  }
  return log_path;
}

}  // namespace

RunLog read_run_log(const std::string& run_dir) {
  RunLog run{run_name(run_dir), {}, {}};
  const std::string log_path = for_each_log_line(run_dir, [&](const json& line, const std::string& where) { add_log_line(line, where, run); });
  PHASOR_CHECK(!run.train.empty() || !run.validation.empty(), "plot: '", log_path,
               "' has no loss or val_loss values to plot");
  sort_keeping_latest(run.train);
  sort_keeping_latest(run.validation);
  return run;
}

// ---------------------------------------------------------------- drawing

namespace {

constexpr double kWidth = 960, kHeight = 560;
constexpr svg::Frame kLossFrame{80, 740, 60, 490};

void for_each_point(const std::vector<RunLog>& runs, const auto& visit) {
  for (const RunLog& run : runs) {
    for (const LossPoint& p : run.train) visit(p);
    for (const LossPoint& p : run.validation) visit(p);
  }
}

std::string polyline_points(const std::vector<LossPoint>& points, const svg::Axis& x, const svg::Axis& y) {
  std::string out;
  for (const LossPoint& p : points) {
    if (!out.empty()) out += ' ';
    out += svg::fixed(x.to_pixel(static_cast<double>(p.step))) + ',' + svg::fixed(y.to_pixel(p.loss));
  }
  return out;
}

void draw_train(std::ostream& out, const RunLog& run, const char* colour, const svg::Axis& x, const svg::Axis& y) {
  if (run.train.empty()) return;
  out << "<polyline class=\"train\" fill=\"none\" stroke=\"" << colour
      << "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"" << polyline_points(run.train, x, y) << "\"/>\n";
}

void draw_validation(std::ostream& out, const RunLog& run, const char* colour, const svg::Axis& x, const svg::Axis& y) {
  if (run.validation.empty()) return;
  out << "<g stroke=\"" << colour << "\" stroke-width=\"2\">\n"
      << "<polyline class=\"validation\" fill=\"none\" stroke-dasharray=\"7 4\" points=\""
      << polyline_points(run.validation, x, y) << "\"/>\n";
  for (const LossPoint& p : run.validation)
    out << "<circle cx=\"" << svg::fixed(x.to_pixel(static_cast<double>(p.step))) << "\" cy=\"" << svg::fixed(y.to_pixel(p.loss))
        << "\" r=\"3.5\" fill=\"white\"/>\n";
  out << "</g>\n";
}

constexpr double kSwatch = 28;

// A legend row: a line swatch (colour, optional dash pattern) and its label.
void legend_row(std::ostream& out, double left, double y, const char* colour, const std::string& label, const char* dash = nullptr,
                double width = 3) {
  out << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + kSwatch << "\" y2=\"" << y << "\" stroke=\"" << colour
      << "\" stroke-width=\"" << width << "\"" << (dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") << "/>\n"
      << "<text x=\"" << left + kSwatch + 8 << "\" y=\"" << y + 4 << "\">" << svg::escape(label) << "</text>\n";
}

// One coloured swatch per name, right of the frame; returns the y below the last.
double draw_swatches(std::ostream& out, const std::vector<std::string>& names, const svg::Frame& f = kLossFrame) {
  double y = f.top + 10;
  for (size_t i = 0; i < names.size(); ++i, y += 22) legend_row(out, f.right + 20, y, svg::colour(i), names[i]);
  return y;
}

// One swatch per run, then a key to the two line styles.
void draw_legend(std::ostream& out, const std::vector<RunLog>& runs) {
  std::vector<std::string> names;
  for (const RunLog& run : runs) names.push_back(run.name);
  const double left = kLossFrame.right + 20, y = draw_swatches(out, names) + 12;
  legend_row(out, left, y, "#555", "train", nullptr, 1.5);
  legend_row(out, left, y + 22, "#555", "validation", "7 4", 2);
  out << "<circle cx=\"" << left + kSwatch / 2 << "\" cy=\"" << y + 22 << "\" r=\"3.5\" fill=\"white\" stroke=\"#555\"/>\n";
}

}  // namespace

std::string loss_curves_svg(const std::vector<RunLog>& runs) {
  svg::Range steps, losses;
  for_each_point(runs, [&](const LossPoint& p) { steps.add(static_cast<double>(p.step)), losses.add(p.loss); });
  PHASOR_CHECK(!steps.empty(), "plot: no loss values to plot");
  const svg::Frame& f = kLossFrame;
  const svg::Axis x = svg::make_axis(steps.min, steps.max, f.left, f.right, 1);
  const svg::Axis y = svg::make_axis(losses.min, losses.max, f.bottom, f.top);  // pixels grow downwards

  std::ostringstream out;
  out << svg::begin_document(kWidth, kHeight);
  svg::grid_and_ticks(out, f, x, y);
  // Validation on top: its few points would vanish under the noisy train curves.
  for (size_t i = 0; i < runs.size(); ++i) draw_train(out, runs[i], svg::colour(i), x, y);
  for (size_t i = 0; i < runs.size(); ++i) draw_validation(out, runs[i], svg::colour(i), x, y);
  svg::frame_and_labels(out, f, "Training and validation loss", "step", "loss (nats/token)");
  draw_legend(out, runs);
  out << "</svg>\n";
  return out.str();
}

void plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_svg) {
  PHASOR_CHECK(!run_dirs.empty(), "plot: no run folders given");
  std::vector<RunLog> runs;
  for (const std::string& dir : run_dirs) runs.push_back(read_run_log(dir));
  write_text_atomically(out_svg, loss_curves_svg(runs));
}

}  // namespace phasor
