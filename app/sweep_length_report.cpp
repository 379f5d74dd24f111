// The report of a sweep of the built-in tasks (the length preset): exact-match
// accuracy against evaluation length per task and variant (seed mean and its
// standard error), one plot per task, and for passkey a depth x length heat
// map per variant, all from the cells' result.json files.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/plot.h"
#include "app/svg.h"
#include "app/sweep.h"
#include "app/sweep_stats.h"
#include "models/data/corpus.h"
#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;

namespace {

struct LengthResults {
  SweepPlan plan;
  std::vector<std::string> rows;  // each variant, then its evaluation-time entries ("rope+yarn")
  // [task][row][length] -> accuracy over seeds
  std::map<std::string, std::map<std::string, std::map<int64_t, SeedStats>>> accuracy;
  // passkey: [row][depth][length] -> accuracy over seeds
  std::map<std::string, std::map<int, std::map<int64_t, SeedStats>>> by_depth;
  std::vector<std::string> missing;
  size_t cells = 0;
  double train_seconds = 0;
};

// The eval key of a row at a length: an entry "rope+yarn" is the model itself at the training length (S = 1).
std::string eval_key(const SweepPlan& plan, const std::string& method, int64_t length) {
  return method.empty() || length == plan.seq_len() ? std::to_string(length) : std::to_string(length) + "+" + method;
}

LengthResults read_length_results(const std::string& out_dir) {
  LengthResults r;
  r.plan = read_sweep_plan(out_dir);
  for (const SweepVariant& v : r.plan.variants) {
    r.rows.push_back(v.name);
    for (const std::string& method : r.plan.scalings_of(v)) r.rows.push_back(v.name + "+" + method);
  }
  for (const SweepCell& cell : sweep_cells(r.plan)) {
    ++r.cells;
    const std::string path = out_dir + "/cells/" + cell.name + "/result.json";
    if (!fs::exists(path)) {
      r.missing.push_back(cell.name);
      continue;
    }
    const CellResult j = read_cell_result(path);  // every field range-checked, naming the file
    r.train_seconds += j.train_seconds;
    std::vector<std::string> methods = {""};
    for (const std::string& m : r.plan.scalings_of(cell.variant)) methods.push_back(m);
    for (const std::string& method : methods) {
      const std::string row = method.empty() ? cell.variant.name : cell.variant.name + "+" + method;
      for (int64_t length : r.plan.eval_lengths) {
        const std::string key = eval_key(r.plan, method, length);
        const auto acc = j.accuracy.find(key);
        PHASOR_CHECK(acc != j.accuracy.end(), "sweep: '", path, "': eval.", key, ".accuracy is missing");
        r.accuracy[cell.task][row][length].values.push_back(acc->second);
        if (const auto d = j.depth_accuracy.find(key); d != j.depth_accuracy.end())
          for (const auto& [depth, value] : d->second) r.by_depth[row][depth][length].values.push_back(value);
      }
    }
  }
  return r;
}

// "0.93 ± 0.02" over seeds, "0.93 (n=1)" for one seed, "–" for none.
std::string accuracy_cell(const SeedStats* s) {
  if (!s || s->values.empty()) return "–";
  if (s->values.size() < 2) return format_number("%.2f", s->mean()) + " (n=1)";
  return format_number("%.2f", s->mean()) + " ± " + format_number("%.2f", s->standard_error());
}

std::string file_safe(std::string name) {
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = '_';
  return name;
}

// A grid of values in [0, 1] (NaN: no result), darker for higher, each cell labelled.
std::string heat_map_svg(const std::string& title, const std::vector<std::string>& row_labels, const std::vector<std::string>& column_labels,
                         const std::vector<std::vector<double>>& values, const std::string& row_title, const std::string& column_title) {
  const double cell_w = 64, cell_h = 30, left = 110, top = 50;
  const double width = left + cell_w * static_cast<double>(column_labels.size()) + 20;
  const double height = top + cell_h * static_cast<double>(row_labels.size()) + 60;
  std::ostringstream out;
  out << svg::begin_document(width, height);
  out << "<text x=\"" << svg::fixed(width / 2) << "\" y=\"24\" text-anchor=\"middle\" font-weight=\"bold\">" << svg::escape(title) << "</text>\n";
  for (size_t i = 0; i < row_labels.size(); ++i) {
    const double y = top + cell_h * static_cast<double>(i);
    out << "<text x=\"" << svg::fixed(left - 8) << "\" y=\"" << svg::fixed(y + cell_h / 2 + 4) << "\" text-anchor=\"end\">"
        << svg::escape(row_labels[i]) << "</text>\n";
    for (size_t k = 0; k < column_labels.size(); ++k) {
      const double x = left + cell_w * static_cast<double>(k), v = values[i][k];
      const bool known = std::isfinite(v);
      // White to dark blue: each channel from 255 down to the blue's.
      const auto mix = [&](int dark) { return static_cast<int>(std::lround(255 - (255 - dark) * (known ? v : 0))); };
      char colour[8];
      std::snprintf(colour, sizeof colour, "#%02x%02x%02x", mix(0x08), mix(0x30), mix(0x6b));
      out << "<rect x=\"" << svg::fixed(x) << "\" y=\"" << svg::fixed(y) << "\" width=\"" << svg::fixed(cell_w) << "\" height=\""
          << svg::fixed(cell_h) << "\" fill=\"" << (known ? colour : "#dddddd") << "\" stroke=\"#bbb\"/>\n";
      out << "<text x=\"" << svg::fixed(x + cell_w / 2) << "\" y=\"" << svg::fixed(y + cell_h / 2 + 4) << "\" text-anchor=\"middle\" fill=\""
          << (known && v > 0.5 ? "#fff" : "#333") << "\">" << (known ? format_number("%.2f", v) : "–") << "</text>\n";
    }
  }
  const double bottom = top + cell_h * static_cast<double>(row_labels.size());
  for (size_t k = 0; k < column_labels.size(); ++k)
    out << "<text x=\"" << svg::fixed(left + cell_w * (static_cast<double>(k) + 0.5)) << "\" y=\"" << svg::fixed(bottom + 18)
        << "\" text-anchor=\"middle\">" << svg::escape(column_labels[k]) << "</text>\n";
  out << "<text x=\"" << svg::fixed(left + cell_w * static_cast<double>(column_labels.size()) / 2) << "\" y=\"" << svg::fixed(bottom + 42)
      << "\" text-anchor=\"middle\">" << svg::escape(column_title) << "</text>\n";
  out << "<text x=\"14\" y=\"" << svg::fixed(top + (bottom - top) / 2) << "\" transform=\"rotate(-90 14 " << svg::fixed(top + (bottom - top) / 2)
      << ")\" text-anchor=\"middle\">" << svg::escape(row_title) << "</text>\n";
  out << "</svg>\n";
  return out.str();
}

// "9000 (copy 2000, flipflop 3000)": the plan's steps and the tasks that differ.
std::string steps_per_task(const SweepPlan& p) {
  std::string text = std::to_string(p.steps), others;
  for (const std::string& task : p.tasks)
    if (p.steps_of(task) != p.steps) others += (others.empty() ? "" : ", ") + task + " " + std::to_string(p.steps_of(task));
  return others.empty() ? text : text + " (" + others + ")";
}

void write_setup(std::ostream& md, const LengthResults& r, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  md << "## Setup (preset `" << p.name << "`)\n\n"
     << "- Byte-level models: " << p.n_layers << " layers, " << p.n_heads << " heads; trained " << steps_per_task(p) << " steps of " << p.batch
     << " x " << p.seq_len() << " bytes of each task's training stream (seed 1), AdamW lr " << p.lr << " -> " << p.min_lr << " (warm-up " << p.warmup
     << ", cosine), " << p.seeds << " seed(s) per cell (seed = initialisation and batch order). Rule: a fixed number of steps; "
     << "a cell counts as solved at its training length where its accuracy there is at least 0.99.\n"
     << "- Scored: " << p.task_examples << " examples (evaluation seed 2) at each length, exact match of the whole answer "
     << "(argmax under teacher forcing, the same as greedy decoding); passkey's spread evenly over the depths 0, 25, 50, 75 and 100%. "
     << "An entry such as rope+yarn is the trained model evaluated with that context extension at S = length / " << p.seq_len() << ".\n"
     << "- Each value: the mean over seeds ± its standard error; \"(n=1)\" for a single seed, which has no error bar. "
     << "A single cell's 95% Wilson interval is in its result.json.\n"
     << "- Cells: " << r.cells - r.missing.size() << " of " << r.cells << " done";
  if (!r.missing.empty()) md << " (**" << r.missing.size() << " missing**: the tables cover only the finished ones)";
  md << "; training took " << format_number("%.1f", r.train_seconds / 60) << " minutes summed over the cells (" << p.jobs << " at once, "
     << (p.threads_per_job > 0 ? std::to_string(p.threads_per_job) : std::string("all")) << " thread(s) each, on " << p.device
     << "). Folder: `" << out_dir << "`.\n\n";
}

void write_task(std::ostream& md, const LengthResults& r, const std::string& task, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  if (!r.accuracy.count(task)) return;
  const auto& table = r.accuracy.at(task);
  md << "## `" << task << "`: exact-match accuracy against evaluation length (trained at " << p.seq_len() << ")\n\n| variant |";
  for (int64_t l : p.eval_lengths) md << " " << l << " (" << l / p.seq_len() << "x) |";
  md << "\n|---|";
  for (size_t i = 0; i < p.eval_lengths.size(); ++i) md << "---|";
  md << "\n";
  std::vector<LineSeries> series;
  std::vector<std::string> unsolved;
  for (const std::string& row : r.rows) {
    if (!table.count(row)) continue;
    md << "| " << row << " |";
    LineSeries s{row, {}, {}};
    bool every_point_has_seeds = true;
    for (int64_t l : p.eval_lengths) {
      const auto& by_length = table.at(row);
      const SeedStats* st = by_length.count(l) ? &by_length.at(l) : nullptr;
      md << " " << accuracy_cell(st) << " |";
      if (!st || st->values.empty()) continue;
      s.points.push_back({static_cast<double>(l), st->mean()});
      s.errors.push_back(st->standard_error());
      every_point_has_seeds = every_point_has_seeds && st->values.size() >= 2;
    }
    md << "\n";
    if (!every_point_has_seeds) s.errors.clear();  // a one-seed point has no error bar
    if (row.find('+') == std::string::npos && table.at(row).count(p.seq_len()) && table.at(row).at(p.seq_len()).mean() < 0.99)
      unsolved.push_back(row);
    if (!s.points.empty()) series.push_back(std::move(s));
  }
  md << "\n";
  if (!unsolved.empty()) {
    md << "Not solved at the training length (mean accuracy below 0.99 there): ";
    for (size_t i = 0; i < unsolved.size(); ++i) md << (i ? ", " : "") << unsolved[i];
    md << ".\n\n";
  }
  if (series.empty()) return;
  const std::string file = "length_" + file_safe(task) + ".svg";
  write_text_atomically(out_dir + "/" + file,
                        line_chart_svg("Exact-match accuracy on " + task + " (trained at " + std::to_string(p.seq_len()) + ")", series,
                                       "evaluation length (bytes)", "accuracy", svg::XScale::Log2));
  md << "![" << task << ": accuracy against length](" << file << ")\n\n";
}

void write_depth_maps(std::ostream& md, const LengthResults& r, const std::string& out_dir) {
  if (r.by_depth.empty()) return;
  const SweepPlan& p = r.plan;
  md << "## `passkey`: accuracy by depth and length (seed mean)\n\n"
     << "Depth d: d% of the filler comes before the key line (0: at the start, 100: just before the question).\n\n";
  std::vector<std::string> columns;
  for (int64_t l : p.eval_lengths) columns.push_back(std::to_string(l));
  for (const std::string& row : r.rows) {
    if (!r.by_depth.count(row)) continue;
    std::vector<std::string> labels;
    std::vector<std::vector<double>> values;
    for (const auto& [depth, by_length] : r.by_depth.at(row)) {
      labels.push_back(std::to_string(depth) + "%");
      std::vector<double> line;
      for (int64_t l : p.eval_lengths) line.push_back(by_length.count(l) ? by_length.at(l).mean() : NAN);
      values.push_back(line);
    }
    const std::string file = "passkey_depth_" + file_safe(row) + ".svg";
    write_text_atomically(out_dir + "/" + file, heat_map_svg("passkey: " + row, labels, columns, values, "depth", "evaluation length (bytes)"));
    md << "![passkey depth x length: " << row << "](" << file << ")\n";
  }
  md << "\n";
}

}  // namespace

void write_length_report(const std::string& out_dir) {
  const LengthResults r = read_length_results(out_dir);
  std::ostringstream md;
  md << "# Length generalisation report (generated by `phasor sweep`; do not edit)\n\n";
  write_setup(md, r, out_dir);
  for (const std::string& task : r.plan.tasks) write_task(md, r, task, out_dir);
  write_depth_maps(md, r, out_dir);
  write_text_atomically(out_dir + "/report.md", md.str());
}

}  // namespace phasor
