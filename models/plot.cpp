#include "models/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/data/corpus.h"
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
  PHASOR_CHECK(line.is_object(), where, ": expected a JSON object, got ", line.type_name());
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

RunLog read_run_log(const std::string& run_dir) {
  PHASOR_CHECK(fs::is_directory(run_dir), "plot: run folder '", run_dir, "' does not exist");
  const std::string log_path = (fs::path(run_dir) / "log.jsonl").string();
  std::ifstream in(log_path);
  PHASOR_CHECK(in, "plot: '", log_path, "' not found (is '", run_dir, "' a training run folder?)");

  RunLog run{run_name(run_dir), {}, {}};
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
    add_log_line(line, where, run);
  }
  PHASOR_CHECK(!run.train.empty() || !run.validation.empty(), "plot: '", log_path,
               "' has no loss or val_loss values to plot");
  sort_keeping_latest(run.train);
  sort_keeping_latest(run.validation);
  return run;
}

// ---------------------------------------------------------------- drawing

namespace {

constexpr double kWidth = 960, kHeight = 560;
constexpr double kPlotLeft = 80, kPlotRight = 740, kPlotTop = 60, kPlotBottom = 490;
// Tableau 10: distinct hues that stay readable on white and for most colour-blind readers.
const char* const kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string fixed(double value, int decimals = 1) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value + 0.0);  // + 0.0 turns -0 into 0
  return buffer;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten: tick labels people can read at a glance.
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  return power * (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10);
}

// A linear axis whose ends are rounded out to whole ticks.
struct Axis {
  double low, high, tick;
  double pixel_low, pixel_high;

  double to_pixel(double value) const { return pixel_low + (value - low) / (high - low) * (pixel_high - pixel_low); }
  int decimals() const { return std::max(0, static_cast<int>(-std::floor(std::log10(tick) + 1e-9))); }
  // Counted rather than accumulated, so 0.1 steps do not drift.
  std::vector<double> ticks() const {
    const auto count = static_cast<int>(std::lround((high - low) / tick));
    std::vector<double> values;
    for (int i = 0; i <= count; ++i) values.push_back(low + i * tick);
    return values;
  }
};

// min_tick = 1 keeps an axis of whole numbers (steps) from growing fractional ticks.
Axis make_axis(double min, double max, double pixel_low, double pixel_high, double min_tick = 0) {
  if (!(max > min)) {  // one value (or one point): give it some room
    const double pad = std::max(std::abs(max) * 0.1, 1.0);
    min -= pad;
    max += pad;
  }
  const double tick = std::max(nice_step((max - min) / 6), min_tick);
  return {std::floor(min / tick) * tick, std::ceil(max / tick) * tick, tick, pixel_low, pixel_high};
}

struct Range {
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  void add(double v) { min = std::min(min, v), max = std::max(max, v); }
};

void for_each_point(const std::vector<RunLog>& runs, const auto& visit) {
  for (const RunLog& run : runs) {
    for (const LossPoint& p : run.train) visit(p);
    for (const LossPoint& p : run.validation) visit(p);
  }
}

std::string polyline_points(const std::vector<LossPoint>& points, const Axis& x, const Axis& y) {
  std::string out;
  for (const LossPoint& p : points) {
    if (!out.empty()) out += ' ';
    out += fixed(x.to_pixel(static_cast<double>(p.step))) + ',' + fixed(y.to_pixel(p.loss));
  }
  return out;
}

void draw_grid_and_ticks(std::ostream& svg, const Axis& x, const Axis& y) {
  svg << "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (double v : x.ticks())
    svg << "<line x1=\"" << fixed(x.to_pixel(v)) << "\" y1=\"" << kPlotTop << "\" x2=\"" << fixed(x.to_pixel(v))
        << "\" y2=\"" << kPlotBottom << "\"/>\n";
  for (double v : y.ticks())
    svg << "<line x1=\"" << kPlotLeft << "\" y1=\"" << fixed(y.to_pixel(v)) << "\" x2=\"" << kPlotRight
        << "\" y2=\"" << fixed(y.to_pixel(v)) << "\"/>\n";
  svg << "</g>\n<g fill=\"#333\">\n";
  for (double v : x.ticks())
    svg << "<text x=\"" << fixed(x.to_pixel(v)) << "\" y=\"" << kPlotBottom + 20
        << "\" text-anchor=\"middle\">" << fixed(v, x.decimals()) << "</text>\n";
  for (double v : y.ticks())
    svg << "<text x=\"" << kPlotLeft - 8 << "\" y=\"" << fixed(y.to_pixel(v) + 4)
        << "\" text-anchor=\"end\">" << fixed(v, y.decimals()) << "</text>\n";
  svg << "</g>\n";
}

void draw_frame_and_labels(std::ostream& svg) {
  const double middle_x = (kPlotLeft + kPlotRight) / 2, middle_y = (kPlotTop + kPlotBottom) / 2;
  svg << "<rect x=\"" << kPlotLeft << "\" y=\"" << kPlotTop << "\" width=\"" << kPlotRight - kPlotLeft
      << "\" height=\"" << kPlotBottom - kPlotTop << "\" fill=\"none\" stroke=\"#333\"/>\n"
      << "<text x=\"" << middle_x << "\" y=\"" << kPlotTop - 25
      << "\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">Training and validation loss</text>\n"
      << "<text x=\"" << middle_x << "\" y=\"" << kPlotBottom + 48 << "\" text-anchor=\"middle\">step</text>\n"
      << "<text x=\"" << kPlotLeft - 55 << "\" y=\"" << middle_y << "\" text-anchor=\"middle\" transform=\"rotate(-90 "
      << kPlotLeft - 55 << ' ' << middle_y << ")\">loss (nats/token)</text>\n";
}

void draw_train(std::ostream& svg, const RunLog& run, const char* colour, const Axis& x, const Axis& y) {
  if (run.train.empty()) return;
  svg << "<polyline class=\"train\" fill=\"none\" stroke=\"" << colour
      << "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"" << polyline_points(run.train, x, y)
      << "\"/>\n";
}

void draw_validation(std::ostream& svg, const RunLog& run, const char* colour, const Axis& x, const Axis& y) {
  if (run.validation.empty()) return;
  svg << "<g stroke=\"" << colour << "\" stroke-width=\"2\">\n"
      << "<polyline class=\"validation\" fill=\"none\" stroke-dasharray=\"7 4\" points=\""
      << polyline_points(run.validation, x, y) << "\"/>\n";
  for (const LossPoint& p : run.validation)
    svg << "<circle cx=\"" << fixed(x.to_pixel(static_cast<double>(p.step))) << "\" cy=\""
        << fixed(y.to_pixel(p.loss)) << "\" r=\"3.5\" fill=\"white\"/>\n";
  svg << "</g>\n";
}

// One swatch per run, then a key to the two line styles.
void draw_legend(std::ostream& svg, const std::vector<RunLog>& runs) {
  const double left = kPlotRight + 20, swatch = 28;
  double y = kPlotTop + 10;
  for (size_t i = 0; i < runs.size(); ++i, y += 22)
    svg << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + swatch << "\" y2=\"" << y
        << "\" stroke=\"" << kColours[i % std::size(kColours)] << "\" stroke-width=\"3\"/>\n"
        << "<text x=\"" << left + swatch + 8 << "\" y=\"" << y + 4 << "\">" << xml_escape(runs[i].name) << "</text>\n";
  y += 12;
  svg << "<g stroke=\"#555\" fill=\"none\" stroke-width=\"1.5\">\n"
      << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + swatch << "\" y2=\"" << y << "\"/>\n"
      << "<line x1=\"" << left << "\" y1=\"" << y + 22 << "\" x2=\"" << left + swatch << "\" y2=\"" << y + 22
      << "\" stroke-dasharray=\"7 4\" stroke-width=\"2\"/>\n"
      << "<circle cx=\"" << left + swatch / 2 << "\" cy=\"" << y + 22 << "\" r=\"3.5\" fill=\"white\"/>\n</g>\n"
      << "<text x=\"" << left + swatch + 8 << "\" y=\"" << y + 4 << "\">train</text>\n"
      << "<text x=\"" << left + swatch + 8 << "\" y=\"" << y + 26 << "\">validation</text>\n";
}

}  // namespace

std::string loss_curves_svg(const std::vector<RunLog>& runs) {
  Range steps, losses;
  for_each_point(runs, [&](const LossPoint& p) { steps.add(static_cast<double>(p.step)), losses.add(p.loss); });
  PHASOR_CHECK(steps.min <= steps.max, "plot: no loss values to plot");
  const Axis x = make_axis(steps.min, steps.max, kPlotLeft, kPlotRight, 1);
  const Axis y = make_axis(losses.min, losses.max, kPlotBottom, kPlotTop);  // pixels grow downwards

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  draw_grid_and_ticks(svg, x, y);
  // Validation on top: its few points would vanish under the noisy train curves.
  for (size_t i = 0; i < runs.size(); ++i) draw_train(svg, runs[i], kColours[i % std::size(kColours)], x, y);
  for (size_t i = 0; i < runs.size(); ++i) draw_validation(svg, runs[i], kColours[i % std::size(kColours)], x, y);
  draw_frame_and_labels(svg);
  draw_legend(svg, runs);
  svg << "</svg>\n";
  return svg.str();
}

void plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_svg) {
  PHASOR_CHECK(!run_dirs.empty(), "plot: no run folders given");
  std::vector<RunLog> runs;
  for (const std::string& dir : run_dirs) runs.push_back(read_run_log(dir));
  write_text_atomically(out_svg, loss_curves_svg(runs));
}

}  // namespace phasor
