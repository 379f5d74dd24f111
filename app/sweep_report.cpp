// The report of a sweep: tables of means and standard deviations over seeds,
// differences against RoPE marked when larger than the seed noise, and plots.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/plot.h"
#include "app/sweep.h"
#include "app/sweep_stats.h"
#include "models/data/corpus.h"
#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string mean_sd(const SeedStats& s, const char* fmt = "%.4f") {
  if (s.values.empty()) return "–";
  return format_number(fmt, s.mean()) + " ± " + format_number(fmt, s.sd()) + (s.values.size() < 2 ? " (n=1)" : "");
}

// variant − reference paired seed by seed: "+0.0123 ± 0.0045 [+0.0027, +0.0219]",
// the mean difference ± its standard error [95% interval, t with n − 1 dof],
// starred when the interval leaves out 0; "–" where no seed pairs up.
std::string difference(const SeedStats& a, const SeedStats& b, const char* fmt = "%+.4f") {
  const std::optional<PairedDifference> d = paired_difference(a, b);
  if (!d) return "–";
  return d->format(fmt) + (d->excludes_zero() ? "*" : "");
}

// What every difference in the report is, said once before its first table.
constexpr const char* kDifferenceLegend =
    "Differences are variant − rope paired seed by seed (the same seed: the same initialisation stream and batch order), "
    "negative = lower loss than rope: the mean of the per-seed differences ± its standard error, then its 95% interval "
    "(t with seeds − 1 degrees of freedom); `*` marks an interval that leaves out 0.";

struct Results {
  SweepPlan plan;
  // [task][variant] -> values over seeds
  std::map<std::string, std::map<std::string, SeedStats>> loss, exact, params;
  std::map<std::string, std::map<std::string, std::map<int64_t, SeedStats>>> long_context;  // [task][variant][length]
  std::map<std::string, std::string> kjv_seed1_runs;  // variant -> run folder
  size_t cells = 0, missing = 0;
  double train_seconds = 0;
  std::map<std::string, SeedStats> cell_rates;  // [variant] training tokens/s of its cells (incl. validation and saving)
};

Results read_results(const std::string& out_dir) {
  Results r;
  r.plan = read_sweep_plan(out_dir);
  for (const SweepCell& cell : sweep_cells(r.plan)) {
    ++r.cells;
    const std::string path = out_dir + "/cells/" + cell.name + "/result.json";
    if (!fs::exists(path)) {
      ++r.missing;
      continue;
    }
    const CellResult j = read_cell_result(path);  // every field range-checked, naming the file
    const std::string& v = cell.variant.name;
    r.loss[cell.task][v].add(cell.seed, j.loss_at(std::to_string(r.plan.seq_len())));
    r.params[cell.task][v].add(cell.seed, j.parameters);
    if (j.exact_match) r.exact[cell.task][v].add(cell.seed, *j.exact_match);
    if (cell.long_context) {
      auto& table = r.long_context[cell.task];
      for (int64_t length : r.plan.eval_lengths) table[v][length].add(cell.seed, j.loss_at(std::to_string(length)));
      // A context extension's row ("rope+yarn"): the model itself at the training length (S = 1), stretched past it.
      for (const std::string& method : r.plan.scalings_of(cell.variant)) {
        const std::string key = std::to_string(r.plan.eval_lengths.back()) + "+" + method;
        if (!j.loss.contains(key)) continue;  // a variant that cannot take this method
        for (int64_t length : r.plan.eval_lengths) {
          const std::string at = length == r.plan.seq_len() ? std::to_string(length) : std::to_string(length) + "+" + method;
          table[v + "+" + method][length].add(cell.seed, j.loss_at(at));
        }
      }
    }
    if (cell.task == r.plan.long_context_task && cell.seed == 1) r.kjv_seed1_runs[v] = out_dir + "/cells/" + cell.name;
    r.train_seconds += j.train_seconds;
    PHASOR_CHECK(j.tokens_trained.has_value(), "sweep: '", path, "': tokens_trained is missing");
    if (j.train_seconds > 0) r.cell_rates[v].values.push_back(*j.tokens_trained / j.train_seconds);
  }
  return r;
}

void write_setup(std::ostream& md, const Results& r, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  md << "## Setup (preset `" << p.name << "`)\n\n"
     << "- Byte-level models: " << p.n_layers << " layers, " << p.n_heads << " heads; trained " << p.steps << " steps of "
     << p.batch << " x " << p.seq_len() << " tokens (" << p.steps * p.batch * p.seq_len()
     << " tokens), AdamW lr " << p.lr << " -> " << p.min_lr << " (warm-up " << p.warmup << ", cosine), "
     << p.seeds << " seeds per cell (seed = initialisation and batch order).\n"
     << "- Loss: mean nats per byte over the spec's evaluation windows of the run's held-out text (the last 5% of the corpus), "
     << "at most " << p.eval_tokens << " predictions per evaluation length.\n"
     << "- Cells: " << r.cells - r.missing << " of " << r.cells << " done";
  if (r.missing > 0) md << " (**" << r.missing << " missing**: the tables cover only the finished ones)";
  md << "; training took " << format_number("%.1f", r.train_seconds / 60) << " minutes summed over the cells (" << p.jobs
     << " at once, " << (p.threads_per_job > 0 ? std::to_string(p.threads_per_job) : std::string("all")) << " thread(s) each, on "
     << p.device << "). Folder: `" << out_dir << "`.\n\n";
}

void write_main_table(std::ostream& md, const Results& r) {
  const SweepPlan& p = r.plan;
  md << "## Validation loss at the training length (mean ± sd over seeds, nats/byte)\n\n| variant | parameters |";
  for (const auto& t : p.tasks) md << " " << t << " |";
  if (r.exact.count("arith")) md << " arith exact match |";
  md << "\n|---|---|";
  for (size_t i = 0; i < p.tasks.size() + (r.exact.count("arith") ? 1 : 0); ++i) md << "---|";
  md << "\n";
  const std::string first_task = p.tasks.front();
  const auto& params = r.params.count(first_task) ? r.params.at(first_task) : std::map<std::string, SeedStats>{};
  for (const auto& v : p.variants) {
    md << "| " << v.name << " | " << (params.count(v.name) ? format_number("%.0f", params.at(v.name).mean()) : "–") << " |";
    for (const auto& t : p.tasks) md << " " << (r.loss.count(t) && r.loss.at(t).count(v.name) ? mean_sd(r.loss.at(t).at(v.name)) : "–") << " |";
    if (r.exact.count("arith"))
      md << " " << (r.exact.at("arith").count(v.name) ? mean_sd(r.exact.at("arith").at(v.name), "%.3f") : "–") << " |";
    md << "\n";
  }
  md << "\n" << kDifferenceLegend << "\n\n| variant − rope |";
  for (const auto& t : p.tasks) md << " " << t << " |";
  if (r.exact.count("arith")) md << " arith exact match |";
  md << "\n|---|";
  for (size_t i = 0; i < p.tasks.size() + (r.exact.count("arith") ? 1 : 0); ++i) md << "---|";
  md << "\n";
  const auto cell = [](const auto& table, const std::string& task, const std::string& v) -> const SeedStats* {
    if (!table.count(task) || !table.at(task).count(v)) return nullptr;
    return &table.at(task).at(v);
  };
  for (const auto& v : p.variants) {
    if (v.name == "rope") continue;
    md << "| " << v.name << " |";
    for (const auto& t : p.tasks) {
      const SeedStats *a = cell(r.loss, t, v.name), *b = cell(r.loss, t, "rope");
      md << " " << (a && b ? difference(*a, *b) : "–") << " |";
    }
    if (r.exact.count("arith")) {
      const SeedStats *a = cell(r.exact, "arith", v.name), *b = cell(r.exact, "arith", "rope");
      md << " " << (a && b ? difference(*a, *b, "%+.3f") : "–") << " |";
    }
    md << "\n";
  }
  md << "\n";
}

// Series at the same lengths, each moved sideways by a few hundredths of an
// octave so that their error bars do not cover each other.
std::vector<LineSeries> spread_sideways(std::vector<LineSeries> series) {
  const double n = static_cast<double>(series.size());
  for (size_t i = 0; i < series.size(); ++i)
    for (auto& point : series[i].points) point.first *= std::exp2(0.04 * (static_cast<double>(i) - (n - 1) / 2));
  return series;
}

// One pair of tables per task evaluated past the training length: each
// variant (and each of its context extensions) per length, then its paired
// difference from rope per length. The plots (loss with its standard error,
// and the difference with its 95% interval) are of the long-context task (or
// the first such task).
void write_long_context(std::ostream& md, const Results& r, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  std::vector<std::string> rows;  // each variant, then its context extensions ("rope+yarn")
  for (const auto& v : p.variants) {
    rows.push_back(v.name);
    for (const std::string& method : p.scalings_of(v)) rows.push_back(v.name + "+" + method);
  }
  const auto header = [&](const std::string& first) {
    md << "| " << first << " |";
    for (int64_t l : p.eval_lengths) md << " " << l << " |";
    md << "\n|---|";
    for (size_t i = 0; i < p.eval_lengths.size(); ++i) md << "---|";
    md << "\n";
  };
  bool plotted = false;
  for (const std::string& task : p.tasks) {
    if (!r.long_context.count(task)) continue;
    const auto& table = r.long_context.at(task);
    md << "## Long context: `" << task << "` loss against evaluation length (trained at " << p.seq_len() << ")\n\n"
       << "Mean ± sd over seeds (nats/byte):\n\n";
    header("variant");
    std::vector<LineSeries> losses, differences;
    for (const std::string& row : rows) {
      if (!table.count(row)) continue;
      md << "| " << row << " |";
      LineSeries s{row, {}, {}};
      for (int64_t l : p.eval_lengths) {
        const SeedStats& st = table.at(row).at(l);
        md << " " << mean_sd(st, "%.3f") << " |";
        s.points.push_back({static_cast<double>(l), st.mean()});
        s.errors.push_back(st.standard_error());
      }
      md << "\n";
      losses.push_back(std::move(s));
    }
    if (table.count("rope")) {
      md << "\n" << kDifferenceLegend << "\n\n";
      header("variant − rope");
      for (const std::string& row : rows) {
        if (row == "rope" || !table.count(row)) continue;
        md << "| " << row << " |";
        LineSeries s{row + " − rope", {}, {}};
        for (int64_t l : p.eval_lengths) {
          md << " " << difference(table.at(row).at(l), table.at("rope").at(l), "%+.3f") << " |";
          const std::optional<PairedDifference> d = paired_difference(table.at(row).at(l), table.at("rope").at(l));
          if (d && d->has_interval()) s.points.push_back({static_cast<double>(l), d->mean}), s.errors.push_back(d->half_width);
        }
        md << "\n";
        if (!s.points.empty()) differences.push_back(std::move(s));
      }
    }
    if (!losses.empty() && !plotted && (task == p.long_context_task || !r.long_context.count(p.long_context_task))) {
      const std::string trained = " (trained at " + std::to_string(p.seq_len()) + ")";
      write_text_atomically(out_dir + "/long_context.svg",
                            line_chart_svg("Loss against evaluation length on " + task + trained + ", ± standard error over seeds",
                                           spread_sideways(losses), "evaluation length (tokens)", "loss (nats/byte)", svg::XScale::Log2));
      md << "\n![loss against evaluation length](long_context.svg)\n";
      if (!differences.empty()) {
        write_text_atomically(out_dir + "/long_context_difference.svg",
                              line_chart_svg("Variant − rope on " + task + trained + ", paired over seeds, 95% interval", spread_sideways(differences),
                                             "evaluation length (tokens)", "variant − rope (nats/byte)", svg::XScale::Log2));
        md << "\n![variant − rope against evaluation length, 95% intervals](long_context_difference.svg)\n";
      }
      plotted = true;
    }
    md << "\n";
  }
}

void write_efficiency(std::ostream& md, const Results& r) {
  const SweepPlan& p = r.plan;
  if (p.efficiency.empty()) return;
  const std::string& t = p.efficiency_task;
  if (!r.loss.count(t)) return;
  const auto& loss = r.loss.at(t);
  const auto& params = r.params.at(t);
  md << "## Parameter efficiency (`" << t << "`)\n\n| model | parameters | loss | − rope (paired, ± se [95% interval]) |\n|---|---|---|---|\n";
  std::vector<std::string> names = {"rope"};
  // Each full-size variant beside its smaller twins of the efficiency list.
  for (const auto& v : p.variants)
    if (std::any_of(p.efficiency.begin(), p.efficiency.end(), [&](const SweepVariant& e) { return e.position == v.position; }))
      names.push_back(v.name);
  for (const auto& v : p.efficiency) names.push_back(v.name);
  for (const auto& name : names) {
    if (!loss.count(name)) continue;
    md << "| " << name << " | " << format_number("%.0f", params.at(name).mean()) << " | " << mean_sd(loss.at(name)) << " | "
       << (name == "rope" || !loss.count("rope") ? "" : difference(loss.at(name), loss.at("rope"))) << " |\n";
  }
  md << "\n";
}

// Two views of the same question: each variant alone on every core (a short
// run per round, variants interleaved), and the cells' own training runs
// (whole runs, several per variant, next to another cell).
void write_overhead(std::ostream& md, const Results& r, const std::string& out_dir) {
  const std::string path = out_dir + "/throughput.json";
  json alone = json::object();
  if (fs::exists(path)) alone = read_sweep_json(path);
  PHASOR_CHECK(alone.is_object(), "sweep: '", path, "' must hold a JSON object (variant -> tokens/s of each round)");
  if (alone.empty() && r.cell_rates.empty()) return;
  const auto ratio = [](double value, double rope) { return rope > 0 && value > 0 ? format_number("%.3f", value / rope) : std::string("–"); };
  const double alone_rope = alone.contains("rope") ? median(sweep_rates(alone["rope"], path, "rope")) : 0;
  const double cells_rope = r.cell_rates.count("rope") ? median(r.cell_rates.at("rope").values) : 0;
  md << "## Overhead: training tokens/s\n\n"
     << "Alone: each variant trained " << r.plan.throughput_steps << " steps by itself with "
     << (r.plan.threads_per_job > 0 ? std::to_string(r.plan.threads_per_job) : std::string("all")) << " thread(s), median of the logged rates after the "
     << "first, then the median over rounds (variants interleaved). Cells: tokens trained / training time of every cell of the "
     << "variant (validation and checkpoint included, beside another cell, under whatever else the machine ran), median.\n\n"
     << "| variant | alone: tokens/s | rounds | relative to rope | cells: tokens/s | cells | relative to rope |\n"
     << "|---|---|---|---|---|---|---|\n";
  std::vector<SweepVariant> variants = r.plan.variants;
  variants.insert(variants.end(), r.plan.efficiency.begin(), r.plan.efficiency.end());
  for (const SweepVariant& v : variants) {
    const std::vector<double> rounds = alone.contains(v.name) ? sweep_rates(alone[v.name], path, v.name) : std::vector<double>{};
    const double a = rounds.empty() ? 0 : median(rounds);
    const double c = r.cell_rates.count(v.name) ? median(r.cell_rates.at(v.name).values) : 0;
    md << "| " << v.name << " | " << (a > 0 ? format_number("%.0f", a) : "–") << " | " << rounds.size() << " | " << ratio(a, alone_rope) << " | "
       << (c > 0 ? format_number("%.0f", c) : "–") << " | " << (r.cell_rates.count(v.name) ? r.cell_rates.at(v.name).values.size() : 0)
       << " | " << ratio(c, cells_rope) << " |\n";
  }
  md << "\n";
}

}  // namespace

void write_sweep_report(const std::string& out_dir) {
  const SweepPlan plan = read_sweep_plan(out_dir);
  if (!plan.sizes.empty()) return write_scale_report(out_dir);
  if (std::ranges::all_of(plan.tasks, [&](const std::string& t) { return plan.is_builtin_task(t); })) return write_length_report(out_dir);
  const Results r = read_results(out_dir);
  std::ostringstream md;
  md << "# Sweep report (generated by `phasor sweep`; do not edit)\n\n";
  write_setup(md, r, out_dir);
  write_main_table(md, r);
  write_long_context(md, r, out_dir);
  write_efficiency(md, r);
  write_overhead(md, r, out_dir);
  if (!r.kjv_seed1_runs.empty()) {
    // A copy of a sweep's results (docs/results/<preset>) keeps result.json but
    // not the logs: its curves stay as the sweep drew them.
    std::vector<std::string> runs;
    for (const auto& v : r.plan.variants)
      if (r.kjv_seed1_runs.count(v.name) && fs::exists(r.kjv_seed1_runs.at(v.name) + "/log.jsonl")) runs.push_back(r.kjv_seed1_runs.at(v.name));
    if (!runs.empty()) plot_runs(runs, out_dir + "/loss_curves.svg");
    if (fs::exists(out_dir + "/loss_curves.svg"))
      md << "## Training curves (`" << r.plan.long_context_task << "`, seed 1)\n\n![loss curves](loss_curves.svg)\n";
  }
  write_text_atomically(out_dir + "/report.md", md.str());
}

}  // namespace phasor
