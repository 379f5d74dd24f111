#include "app/plot.h"

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
#include <set>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "app/svg.h"
#include "models/data/corpus.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- reading the log

bool is_whole_log_line(std::string_view text) {
  const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return line.is_object();  // a parse error gives a discarded value, not an object
}

std::string repair_run_log(const std::string& log_path) {
  const LastLineRepair repair = repair_last_line(log_path, is_whole_log_line);
  if (repair.dropped == 0) return {};
  return "train: dropped the last line of '" + log_path + "' (" + std::to_string(repair.dropped) +
         " bytes, not a whole JSON object: a write cut short, by a full disk or a kill); the log goes on from the line before";
}

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
  std::error_code ec;
  PHASOR_CHECK(fs::exists(log_path, ec), "plot: '", log_path, "' not found (is '", run_dir, "' a training run folder?)");
  // A regular file of at most 1 GiB: a FIFO or a device there is refused, not waited on or read forever.
  std::vector<std::string> lines;
  {
    std::istringstream in(read_text_file(log_path, "1 GiB for a log"));
    for (std::string text; std::getline(in, text);) lines.push_back(std::move(text));
  }
  const auto blank = [](const std::string& text) { return text.find_first_not_of(" \t\r") == std::string::npos; };
  size_t last = lines.size();  // the last non-blank line
  while (last > 0 && blank(lines[last - 1])) --last;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    const std::string where = log_path + ":" + std::to_string(i + 1);
    // The last line alone may be cut short (a full disk, a killed run): skipped, with a warning.
    if (i + 1 == last && !is_whole_log_line(lines[i])) {
      std::fprintf(stderr, "plot: warning: %s: the last line is not a whole JSON object (a write cut short?); skipped it\n", where.c_str());
      break;
    }
    json line;
    try {
      line = json::parse(lines[i]);
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

std::string line_chart_svg(const std::string& title, const std::vector<LineSeries>& series, const std::string& x_label,
                           const std::string& y_label, svg::XScale x_scale) {
  svg::Range xs, ys;
  for (const LineSeries& s : series) {
    PHASOR_CHECK(s.errors.empty() || s.errors.size() == s.points.size(), "plot: '", s.name, "' has ", s.errors.size(),
                 " error bars for ", s.points.size(), " points");
    for (size_t i = 0; i < s.points.size(); ++i) {
      const auto [x, y] = s.points[i];
      PHASOR_CHECK(x_scale == svg::XScale::Linear || x > 0, "plot: x value ", x, " of '", s.name, "' cannot go on a logarithmic axis");
      const double error = s.errors.empty() ? 0 : s.errors[i];
      xs.add(svg::x_position(x_scale, x)), ys.add(y - error), ys.add(y + error);
    }
  }
  PHASOR_CHECK(!xs.empty(), "plot: no points to plot");
  const svg::Frame& f = kLossFrame;
  const svg::Axis x = svg::make_axis(xs.min, xs.max, f.left, f.right, x_scale == svg::XScale::Log2 ? 1 : 0);
  const svg::Axis y = svg::make_axis(ys.min, ys.max, f.bottom, f.top);
  std::ostringstream out;
  out << svg::begin_document(kWidth, kHeight);
  svg::grid_and_ticks(out, f, x, y, x_scale);
  if (y.low < 0 && y.high > 0)
    out << "<line class=\"zero\" x1=\"" << f.left << "\" y1=\"" << svg::fixed(y.to_pixel(0)) << "\" x2=\"" << f.right << "\" y2=\""
        << svg::fixed(y.to_pixel(0)) << "\" stroke=\"#888\" stroke-width=\"1.5\"/>\n";
  std::vector<std::string> names;
  for (size_t i = 0; i < series.size(); ++i) {
    const auto px = [&](double v) { return svg::fixed(x.to_pixel(svg::x_position(x_scale, v))); };
    std::string points;
    for (const auto& [vx, vy] : series[i].points) points += (points.empty() ? "" : " ") + px(vx) + ',' + svg::fixed(y.to_pixel(vy));
    out << "<g stroke=\"" << svg::colour(i) << "\" stroke-width=\"2\">\n<polyline class=\"series\" fill=\"none\" points=\"" << points
        << "\"/>\n";
    for (size_t k = 0; k < series[i].errors.size(); ++k) {  // a bar with caps 4 pixels each side
      const auto [vx, vy] = series[i].points[k];
      const double e = series[i].errors[k], cx = x.to_pixel(svg::x_position(x_scale, vx));
      const std::string top = svg::fixed(y.to_pixel(vy + e)), bottom = svg::fixed(y.to_pixel(vy - e));
      const std::string left = svg::fixed(cx - 4), right = svg::fixed(cx + 4), middle = svg::fixed(cx);
      out << "<path class=\"error-bar\" fill=\"none\" d=\"M" << left << ',' << top << 'H' << right << "M" << middle << ',' << top << 'V'
          << bottom << "M" << left << ',' << bottom << 'H' << right << "\"/>\n";
    }
    for (const auto& [vx, vy] : series[i].points)
      out << "<circle cx=\"" << px(vx) << "\" cy=\"" << svg::fixed(y.to_pixel(vy)) << "\" r=\"3.5\" fill=\"white\"/>\n";
    out << "</g>\n";
    names.push_back(series[i].name);
  }
  svg::frame_and_labels(out, f, title, x_label, y_label);
  draw_swatches(out, names);
  out << "</svg>\n";
  return out.str();
}

namespace {
// The last `parts` components of a path ("a/b/run", 2: "b/run"), trailing slashes aside.
std::string path_tail(const std::string& dir, size_t parts) {
  std::vector<std::string> names;
  for (const auto& part : fs::path(dir).lexically_normal())
    if (!part.empty() && part != ".") names.push_back(part.string());
  const size_t from = names.size() > parts ? names.size() - parts : 0;
  std::string tail;
  for (size_t i = from; i < names.size(); ++i) tail += (tail.empty() ? "" : "/") + names[i];
  return tail.empty() ? dir : tail;
}
}  // namespace

void plot_runs(const std::vector<std::string>& run_dirs, const std::string& out_svg, const std::vector<std::string>& labels) {
  PHASOR_CHECK(!run_dirs.empty(), "plot: no run folders given");
  PHASOR_CHECK(labels.empty() || labels.size() == run_dirs.size(), "plot: ", labels.size(), " --label names for ", run_dirs.size(),
               " runs; give one per run, in the runs' order");
  std::vector<RunLog> runs;
  for (const std::string& dir : run_dirs) runs.push_back(read_run_log(dir));
  if (!labels.empty()) {
    for (size_t i = 0; i < runs.size(); ++i) runs[i].name = labels[i];
  } else {  // the fewest trailing path parts that tell every run apart
    for (size_t parts = 1; parts < 64; ++parts) {
      std::set<std::string> seen;
      for (size_t i = 0; i < runs.size(); ++i) runs[i].name = path_tail(run_dirs[i], parts);
      for (const RunLog& r : runs) seen.insert(r.name);
      if (seen.size() == runs.size()) break;
    }
  }
  write_text_atomically(out_svg, loss_curves_svg(runs));
}

// ---------------------------------------------------------------- per-head statistics

namespace {

struct HeadMetricInfo {
  const char* key;
  const char* title;
  const char* y_label;
  bool log10;  // norms span orders of magnitude
};
// Panel order: the two weights whose balance is the head's mix of semantic
// angle (delta) and position (beta) first, then the gradients reaching them.
constexpr HeadMetricInfo kHeadMetrics[] = {
    {"delta_mean", "delta, weight of the semantic angle (mean over pairs)", "delta", false},
    {"beta", "beta, weight of the position angle", "beta", false},
    {"phase_bias_mean", "phase_bias (mean over pairs)", "radians", false},
    {"q_grad_phi_norm", "queries: |dL/dphi|", "log10 norm", true},
    {"q_grad_r_norm", "queries: |dL/dr|", "log10 norm", true},
    {"k_grad_phi_norm", "keys: |dL/dphi|", "log10 norm", true},
    {"k_grad_r_norm", "keys: |dL/dr|", "log10 norm", true},
    // complexformer-seed: the gates of its semantic and positional terms.
    {"alpha_gate", "sigmoid(alpha), gate of the semantic term", "gate", false},
    {"beta_gate", "sigmoid(beta), gate of the relative-position bias", "gate", false},
};

const HeadMetricInfo* head_metric(const std::string& key) {
  for (const HeadMetricInfo& m : kHeadMetrics)
    if (key == m.key) return &m;
  return nullptr;
}

// Layer l's dash pattern (layer 0 solid).
const char* layer_dash(int64_t l) {
  static const char* const kDashes[] = {nullptr, "7 4", "2 3", "9 3 2 3", "14 4"};
  return kDashes[l % static_cast<int64_t>(std::size(kDashes))];
}

constexpr double kPanelWidth = 540, kPanelHeight = 310, kTitleHeight = 50;

void draw_head_panel(std::ostream& out, const svg::Frame& f, const HeadMetric& metric, const HeadMetricInfo& info) {
  std::vector<std::vector<LossPoint>> shown;  // the values as drawn (log10 of positive norms)
  svg::Range steps, values;
  for (const HeadSeries& s : metric.series) {
    std::vector<LossPoint> points;
    for (const LossPoint& p : s.points) {
      if (info.log10 && !(p.loss > 0)) continue;  // a zero norm has no logarithm
      points.push_back({p.step, info.log10 ? std::log10(p.loss) : p.loss});
      steps.add(static_cast<double>(p.step)), values.add(points.back().loss);
    }
    shown.push_back(std::move(points));
  }
  if (steps.empty()) steps.add(0), values.add(0);  // an empty panel still gets its axes
  const svg::Axis x = svg::make_axis(steps.min, steps.max, f.left, f.right, 1);
  const svg::Axis y = svg::make_axis(values.min, values.max, f.bottom, f.top);
  svg::grid_and_ticks(out, f, x, y);
  for (size_t i = 0; i < shown.size(); ++i) {
    const HeadSeries& s = metric.series[i];
    const char* dash = layer_dash(s.layer);
    out << "<polyline class=\"head\" data-metric=\"" << metric.key << "\" data-layer=\"" << s.layer << "\" data-head=\"" << s.head
        << "\" fill=\"none\" stroke=\"" << svg::colour(static_cast<size_t>(s.head)) << "\" stroke-width=\"1.5\""
        << (dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") << " points=\"" << polyline_points(shown[i], x, y)
        << "\"/>\n";
  }
  svg::frame_and_labels(out, f, info.title, "step", info.y_label, 14);
}

// Heads by colour in one column, layers by dash pattern in the next.
void draw_head_legend(std::ostream& out, double left, double top, int64_t layers, int64_t heads) {
  for (int64_t h = 0; h < heads; ++h)
    legend_row(out, left, top + 22 * static_cast<double>(h), svg::colour(static_cast<size_t>(h)), "head " + std::to_string(h));
  for (int64_t l = 0; l < layers; ++l)
    legend_row(out, left + 150, top + 22 * static_cast<double>(l), "#555", "layer " + std::to_string(l), layer_dash(l), 1.5);
}

}  // namespace

HeadLog read_head_log(const std::string& run_dir) {
  HeadLog log;
  log.name = run_name(run_dir);
  std::map<std::string, std::vector<std::vector<LossPoint>>> values;  // key -> [layer * heads + head]
  const std::string log_path = for_each_log_line(run_dir, [&](const json& line, const std::string& where) {
    if (!line.contains("heads") || line["heads"].is_null()) return;  // not a logged step, or not a complexformer
    const json& layers = line["heads"];
    PHASOR_CHECK(layers.is_array() && !layers.empty(), where, ": 'heads' must be an array of one object per layer");
    PHASOR_CHECK(line.contains("step") && line["step"].is_number_integer(), where, ": a heads line needs an integer 'step'");
    const auto step = line["step"].get<int64_t>();
    if (log.layers == 0) log.layers = static_cast<int64_t>(layers.size());
    PHASOR_CHECK(static_cast<int64_t>(layers.size()) == log.layers, where, ": 'heads' has ", layers.size(),
                 " layers where earlier lines have ", log.layers);
    for (int64_t l = 0; l < log.layers; ++l) {
      const json& layer = layers[static_cast<size_t>(l)];
      PHASOR_CHECK(layer.is_object(), where, ": 'heads' entry ", l, " must be an object");
      for (const auto& [key, per_head] : layer.items()) {
        if (!head_metric(key)) continue;  // a statistic this chart does not draw
        PHASOR_CHECK(per_head.is_array() && !per_head.empty(), where, ": layer ", l, " '", key, "' must be an array of one number per head");
        if (log.heads == 0) log.heads = static_cast<int64_t>(per_head.size());
        PHASOR_CHECK(static_cast<int64_t>(per_head.size()) == log.heads, where, ": layer ", l, " '", key, "' has ",
                     per_head.size(), " heads where earlier entries have ", log.heads);
        auto& series = values[key];
        series.resize(static_cast<size_t>(log.layers * log.heads));
        for (int64_t h = 0; h < log.heads; ++h) {
          const json& v = per_head[static_cast<size_t>(h)];
          if (v.is_null()) continue;  // NaN
          PHASOR_CHECK(v.is_number(), where, ": layer ", l, " '", key, "' holds a value that is not a number");
          series[static_cast<size_t>(l * log.heads + h)].push_back({step, v.get<double>()});
        }
      }
    }
  });
  PHASOR_CHECK(!values.empty(), "plot --heads: '", log_path,
               "' has no per-head statistics (train a complexformer or complexformer-seed with --log-heads)");
  for (const HeadMetricInfo& info : kHeadMetrics) {
    auto found = values.find(info.key);
    if (found == values.end()) continue;
    HeadMetric metric{info.key, {}};
    for (size_t i = 0; i < found->second.size(); ++i) {
      sort_keeping_latest(found->second[i]);
      metric.series.push_back({static_cast<int64_t>(i) / log.heads, static_cast<int64_t>(i) % log.heads, found->second[i]});
    }
    log.metrics.push_back(std::move(metric));
  }
  return log;
}

std::string head_statistics_svg(const HeadLog& log) {
  PHASOR_CHECK(!log.metrics.empty(), "plot --heads: no per-head statistics to plot");
  const size_t cells = log.metrics.size() + 1;  // the last cell holds the legend
  const double width = 2 * kPanelWidth, height = kTitleHeight + static_cast<double>((cells + 1) / 2) * kPanelHeight;
  std::ostringstream out;
  out << svg::begin_document(width, height) << "<text x=\"" << width / 2
      << "\" y=\"30\" text-anchor=\"middle\" font-size=\"20\" font-weight=\"bold\">Per-head CMHA statistics: "
      << svg::escape(log.name) << "</text>\n";
  const auto cell = [&](size_t i) { return std::pair{static_cast<double>(i % 2) * kPanelWidth, kTitleHeight + static_cast<double>(i / 2) * kPanelHeight}; };
  for (size_t i = 0; i < log.metrics.size(); ++i) {
    const auto [x, y] = cell(i);
    draw_head_panel(out, {x + 85, x + kPanelWidth - 25, y + 45, y + kPanelHeight - 65}, log.metrics[i], *head_metric(log.metrics[i].key));
  }
  const auto [x, y] = cell(log.metrics.size());
  draw_head_legend(out, x + 85, y + 45, log.layers, log.heads);
  out << "</svg>\n";
  return out.str();
}

void plot_heads(const std::string& run_dir, const std::string& out_svg) {
  write_text_atomically(out_svg, head_statistics_svg(read_head_log(run_dir)));
}

}  // namespace phasor
