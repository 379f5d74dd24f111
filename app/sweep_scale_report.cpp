// The report of a sweep over model sizes (the scale preset): loss per size and
// variant, the gap of each variant to RoPE against parameters with its
// standard error, a weighted fit of that gap's trend, and the overhead per step.
#include <algorithm>
#include <cmath>
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

constexpr const char* kBaseline = "rope";

struct ScaleResults {
  SweepPlan plan;
  // [task][size][variant][evaluation length] -> loss over seeds
  std::map<std::string, std::map<std::string, std::map<std::string, std::map<int64_t, SeedStats>>>> loss;
  std::map<std::string, std::map<std::string, double>> parameters;  // [size][variant]
  std::map<std::string, SeedStats> cell_seconds;                    // [size] training time of a cell
  std::vector<std::string> missing;                                 // cells without a result, in the plan's order
  size_t cells = 0;
};

ScaleResults read_scale_results(const std::string& out_dir) {
  ScaleResults r;
  r.plan = read_sweep_plan(out_dir);
  for (const SweepCell& cell : sweep_cells(r.plan)) {
    ++r.cells;
    const std::string path = out_dir + "/cells/" + cell.name + "/result.json";
    if (!fs::exists(path)) {
      r.missing.push_back(cell.name);
      continue;
    }
    const CellResult j = read_cell_result(path);  // every field range-checked, naming the file
    for (int64_t length : cell.long_context ? r.plan.eval_lengths : std::vector<int64_t>{r.plan.seq_len()})
      r.loss[cell.task][cell.size.name][cell.variant.name][length].add(cell.seed, j.loss_at(std::to_string(length)));
    r.parameters[cell.size.name][cell.variant.name] = j.parameters;
    r.cell_seconds[cell.size.name].values.push_back(j.train_seconds);
  }
  return r;
}

std::string mean_se(const SeedStats* s, const char* fmt = "%.4f") {
  if (!s || s->values.empty()) return "–";
  return format_number(fmt, s->mean()) + " ± " + format_number(fmt, s->standard_error()) +
         (s->values.size() < 2 ? " (n=1)" : "");
}

// A variant's loss at one size and length, or null when no seed is done.
const SeedStats* loss_of(const ScaleResults& r, const std::string& task, const std::string& size, const std::string& variant,
                         int64_t length) {
  const auto t = r.loss.find(task);
  if (t == r.loss.end() || !t->second.count(size) || !t->second.at(size).count(variant)) return nullptr;
  const auto& by_length = t->second.at(size).at(variant);
  return by_length.count(length) ? &by_length.at(length) : nullptr;
}

// variant - rope at one size and length, paired seed by seed. A gap from a
// single pair has no standard error: it is printed "(n=1)" and left out of the
// plots and the fit.
std::optional<PairedDifference> gap_of(const ScaleResults& r, const std::string& task, const std::string& size, const std::string& variant,
                                       int64_t length) {
  const SeedStats* a = loss_of(r, task, size, variant, length);
  const SeedStats* b = loss_of(r, task, size, kBaseline, length);
  if (!a || !b) return std::nullopt;
  return paired_difference(*a, *b);
}

double rope_parameters(const ScaleResults& r, const std::string& size) {
  const auto it = r.parameters.find(size);
  if (it == r.parameters.end() || !it->second.count(kBaseline)) return 0;
  return it->second.at(kBaseline);
}

void write_setup(std::ostream& md, const ScaleResults& r) {
  const SweepPlan& p = r.plan;
  std::string variants, lengths;
  for (const auto& v : p.variants) variants += (variants.empty() ? "`" : ", `") + v.name + "`";
  for (int64_t l : p.eval_lengths) lengths += (lengths.empty() ? "" : ", ") + std::to_string(l);
  md << "### Setup\n\n"
     << "- Byte-level models of each size below, variants " << variants << "; tasks";
  for (const auto& t : p.tasks) md << " `" << t << "`";
  md << "; " << p.seeds << " seeds per cell (seed = initialisation and batch order).\n"
     << "- Training: batches of " << p.batch << " x " << p.seq_len() << " tokens, AdamW lr " << p.lr << " -> " << p.min_lr
     << " (linear warm-up, then cosine decay), in " << p.precision << " (the weight GEMMs; evaluation in float32). Tokens per "
     << "run: min(" << format_number("%g", p.tokens_per_parameter) << " x parameters, " << p.max_tokens
     << "), rounded up to whole steps, the same rule for every variant (RoPE's parameter count; the others differ by under 0.1%).\n"
     << "- Evaluation: loss in nats per byte on the held-out text (the last 5% of the corpus), at lengths " << lengths << ", "
     << p.eval_tokens << " predictions per length; cells " << p.jobs << " at a time, "
     << (p.threads_per_job > 0 ? std::to_string(p.threads_per_job) : std::string("all")) << " thread(s) each, on " << p.device << ".\n\n"
     << "| size | layers | heads | d_model | d_ff | parameters (rope) | steps | warm-up | tokens | tokens / parameter | training time per cell (median) | cells done |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  const std::vector<SweepCell> cells = sweep_cells(p);
  for (const SweepSize& s : p.sizes) {
    const double params = size_parameters(s);
    const int64_t tokens = s.steps * p.batch * p.seq_len();
    size_t done = 0, of = 0;
    for (const SweepCell& c : cells)
      if (c.size.name == s.name)
        ++of, done += std::find(r.missing.begin(), r.missing.end(), c.name) == r.missing.end();
    const auto seconds = r.cell_seconds.find(s.name);
    md << "| " << s.name << " | " << s.n_layers << " | " << s.n_heads << " | " << s.d_model << " | " << s.d_ff << " | "
       << format_number("%.0f", params) << " | " << s.steps << " | " << s.warmup << " | " << tokens << " | "
       << format_number("%.1f", static_cast<double>(tokens) / params) << " | "
       << (seconds != r.cell_seconds.end() ? format_number("%.0f s", median(seconds->second.values)) : "–") << " | " << done << " / " << of
       << " |\n";
  }
  md << "\n";
  if (r.missing.size() == r.cells) {
    md << "**No cells yet**: the tables below fill as cells finish.\n\n";
  } else if (!r.missing.empty()) {
    md << "**" << r.cells - r.missing.size() << " of " << r.cells << " cells done**; the tables cover only those. ";
    if (r.missing.size() > 24) {  // more than a size's worth: the table's last column says where
      md << r.missing.size() << " not yet done (the last column above counts each size's).\n\n";
    } else {
      md << "Not yet done:";
      for (const auto& name : r.missing) md << " `" << name << "`";
      md << ".\n\n";
    }
  } else {
    md << "All " << r.cells << " cells done.\n\n";
  }
}

void write_loss_tables(std::ostream& md, const ScaleResults& r) {
  const SweepPlan& p = r.plan;
  md << "### Validation loss (nats/byte, mean ± standard error over seeds)\n\n";
  for (const auto& task : p.tasks) {
    md << "`" << task << "`, trained at " << p.seq_len() << ":\n\n| size | variant | parameters |";
    for (int64_t l : p.eval_lengths) md << " at " << l << " |";
    md << "\n|---|---|---|";
    for (size_t i = 0; i < p.eval_lengths.size(); ++i) md << "---|";
    md << "\n";
    for (const SweepSize& s : p.sizes)
      for (const SweepVariant& v : p.variants) {
        const auto params = r.parameters.count(s.name) && r.parameters.at(s.name).count(v.name) ? r.parameters.at(s.name).at(v.name) : 0.0;
        md << "| " << s.name << " | " << v.name << " | " << (params > 0 ? format_number("%.0f", params) : "–") << " |";
        for (int64_t l : p.eval_lengths) md << " " << mean_se(loss_of(r, task, s.name, v.name, l)) << " |";
        md << "\n";
      }
    md << "\n";
  }
}

// The gap of every variant but RoPE, per task: a table, a plot and the fit.
void write_gaps(std::ostream& md, const ScaleResults& r, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  std::vector<std::string> others;
  for (const SweepVariant& v : p.variants)
    if (v.name != kBaseline) others.push_back(v.name);
  md << "### The gap to RoPE against parameters\n\n"
     << "Variant − rope in nats/byte (negative: the variant is better), paired seed by seed (the same seed: the same "
     << "initialisation stream and batch order): the mean of the per-seed differences ± its standard error, then its 95% "
     << "interval (t with seeds − 1 degrees of freedom); `*` marks an interval that leaves out 0. A gap from a single seed "
     << "has no standard error: it reads (n=1), and stays out of the plots and the fit. The plots and the fit are at the "
     << "training length, " << p.seq_len() << ".\n\n| task | size | parameters (rope) | length |";
  for (const auto& v : others) md << " " << v << " − rope |";
  md << "\n|---|---|---|---|";
  for (size_t i = 0; i < others.size(); ++i) md << "---|";
  md << "\n";
  for (const auto& task : p.tasks)
    for (const SweepSize& s : p.sizes)
      for (int64_t length : p.eval_lengths) {
        if (!loss_of(r, task, s.name, kBaseline, length) && length != p.seq_len()) continue;  // not evaluated there
        const double params = rope_parameters(r, s.name);
        md << "| " << task << " | " << s.name << " | " << (params > 0 ? format_number("%.0f", params) : "–") << " | " << length << " |";
        for (const auto& v : others) {
          const std::optional<PairedDifference> g = gap_of(r, task, s.name, v, length);
          md << " " << (g ? g->format() + (g->excludes_zero() ? "*" : "") : "–") << " |";
        }
        md << "\n";
      }
  md << "\n";

  // One plot per task; the series are shifted sideways by a few hundredths of
  // a decade so that their error bars do not cover each other.
  for (const auto& task : p.tasks) {
    std::vector<LineSeries> series;
    for (size_t i = 0; i < others.size(); ++i) {
      LineSeries line{others[i] + " − rope", {}, {}};
      const double shift = std::pow(10.0, 0.02 * (static_cast<double>(i) - static_cast<double>(others.size() - 1) / 2));
      for (const SweepSize& s : p.sizes) {
        const std::optional<PairedDifference> g = gap_of(r, task, s.name, others[i], p.seq_len());
        const double params = rope_parameters(r, s.name);
        if (params > 0 && g && g->has_interval()) line.points.push_back({params * shift, g->mean}), line.errors.push_back(g->se);
      }
      if (!line.points.empty()) series.push_back(std::move(line));
    }
    if (series.empty()) continue;
    const std::string file = "gap_" + task + ".svg";
    write_text_atomically(out_dir + "/" + file, line_chart_svg("`" + task + "`: loss gap to RoPE against model size (paired, ± standard error)", series,
                                                               "parameters (log scale)", "variant − rope (nats/byte)", svg::XScale::Log10));
    md << "![" << task << ": gap to rope against parameters](" << file << ")\n\n";
  }

  md << "### Does the gap move with size?\n\n"
     << "A straight line fitted to each gap against log10(parameters) by weighted least squares (weights 1 / standard error²); "
     << "the slope is the change of the gap per tenfold increase in parameters, its standard error follows from the points' "
     << "standard errors, and chi² (on points − 2 degrees of freedom) says whether the points scatter more than those errors allow. "
     << "A slope more than twice its standard error is called distinguishable from zero. With " << p.seeds
     << " seeds each standard error rests on " << p.seeds - 1 << " degree(s) of freedom, so read it as rough.\n\n"
     << "| task | variant − rope | sizes | slope per decade | chi² | trend |\n|---|---|---|---|---|---|\n";
  for (const auto& task : p.tasks)
    for (const auto& v : others) {
      std::vector<double> x, y, se;
      for (const SweepSize& s : p.sizes) {
        const std::optional<PairedDifference> g = gap_of(r, task, s.name, v, p.seq_len());
        const double params = rope_parameters(r, s.name);
        if (params > 0 && g && g->has_interval() && g->se > 0) x.push_back(std::log10(params)), y.push_back(g->mean), se.push_back(g->se);
      }
      md << "| " << task << " | " << v << " | " << x.size() << " |";
      if (x.size() < 2) {
        md << " – | – | not enough sizes with two or more seeds of both variants yet |\n";
        continue;
      }
      const LineFit f = weighted_line_fit(x, y, se);
      md << " " << format_number("%+.4f", f.slope) << " ± " << format_number("%.4f", f.slope_se) << " | "
         << (f.points > 2 ? format_number("%.2f", f.chi2) + " (" + std::to_string(f.points - 2) + " dof)" : std::string("– (2 points)"))
         << " | " << (f.slope_distinguishable_from_zero() ? "**distinguishable from zero**" : "not distinguishable from zero") << " |\n";
    }
  md << "\n";
}

void write_overhead(std::ostream& md, const ScaleResults& r, const std::string& out_dir) {
  const SweepPlan& p = r.plan;
  md << "### Overhead per training step\n\n";
  const std::string path = out_dir + "/throughput.json";
  if (!fs::exists(path)) {
    md << "Not measured yet: the sweep measures it after its last cell (`throughput.json`).\n\n";
    return;
  }
  const json alone = read_sweep_json(path);
  PHASOR_CHECK(alone.is_object(), "sweep: '", path, "' must hold a JSON object (size -> variant -> tokens/s of each round)");
  md << "Each variant trained " << p.throughput_steps << " steps alone (no cell beside it) with "
     << (p.threads_per_job > 0 ? std::to_string(p.threads_per_job) : std::string("all")) << " thread(s) in " << p.precision
     << ", " << p.batch << " x " << p.seq_len()
     << " tokens a step: the median of the logged rates after the first, then the median over rounds (variants interleaved); "
        "milliseconds per step, and in brackets relative to rope.\n\n| size |";
  for (const SweepVariant& v : p.variants) md << " " << v.name << " |";
  md << "\n|---|";
  for (size_t i = 0; i < p.variants.size(); ++i) md << "---|";
  md << "\n";
  const double tokens_per_step = static_cast<double>(p.batch * p.seq_len());
  const auto ms_per_step = [&](const std::string& size, const std::string& variant) {
    if (!alone.contains(size)) return 0.0;
    PHASOR_CHECK(alone[size].is_object(), "sweep: '", path, "': ", size, " must be a JSON object (variant -> tokens/s of each round)");
    if (!alone[size].contains(variant)) return 0.0;
    return 1000 * tokens_per_step / median(sweep_rates(alone[size][variant], path, size + "." + variant));
  };
  for (const SweepSize& s : p.sizes) {
    md << "| " << s.name << " |";
    const double rope = ms_per_step(s.name, kBaseline);
    for (const SweepVariant& v : p.variants) {
      const double ms = ms_per_step(s.name, v.name);
      md << " " << (ms > 0 ? format_number("%.1f", ms) + (rope > 0 ? " (" + format_number("%.2fx", ms / rope) + ")" : "") : "–") << " |";
    }
    md << "\n";
  }
  md << "\n";
}

}  // namespace

void write_scale_report(const std::string& out_dir) {
  const ScaleResults r = read_scale_results(out_dir);
  std::ostringstream md;
  md << "## Scaling study (preset `" << r.plan.name << "`; generated by `phasor sweep`, do not edit)\n\n";
  write_setup(md, r);
  write_loss_tables(md, r);
  write_gaps(md, r, out_dir);
  write_overhead(md, r, out_dir);
  write_text_atomically(out_dir + "/report.md", md.str());
}

}  // namespace phasor
