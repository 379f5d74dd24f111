#pragma once
// `phasor sweep`: the experiments of docs/RESULTS.md as one resumable command.
// Every position variant is trained on every task with several seeds under the
// same budget, evaluated at the training length (and, on one task, at longer
// ones), and timed alone; the report turns the results into tables and plots.
//
// Folder layout of a sweep (--out DIR):
//   DIR/plan.json                  the plan, fixed at the first run
//   DIR/cells/<cell>/              the cell's training run (log.jsonl, checkpoints, validation.txt)
//   DIR/cells/<cell>/result.json   written last, atomically: a cell with it is done
//   DIR/cells/<cell>.log           the cell's stdout and stderr
//   DIR/throughput.json            tokens/s of every variant (of every size), trained alone
//   DIR/report.md, DIR/*.svg       written by write_sweep_report
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"

namespace phasor {

struct SweepVariant {
  std::string name;      // as the tables print it, e.g. "complexformer-paper"
  Position position = Position::ComplexFormer;
  CmhaInit cmha_init = CmhaInit::Rope;
  int64_t d_model = 0;
  int64_t d_ff = 0;
};

// One model size of a plan that compares sizes (the scale preset): the shape of
// every variant's model at that size, and how long it trains.
struct SweepSize {
  std::string name;  // in cell names, <task>-<size>-<variant>-s<seed>; e.g. "837k" (parameters)
  int64_t n_layers = 0, n_heads = 0, d_model = 0, d_ff = 0;
  int64_t steps = 0, warmup = 0;
};

struct SweepPlan {
  std::string name;
  std::vector<std::string> tasks;          // built-in corpora (kjv, code, arith) and the names of task_files
  std::map<std::string, std::string> task_files;  // a user's text as a task: its name (the file's stem) -> absolute path
  std::vector<SweepVariant> variants;      // the main grid: every task x variant x seed
  std::vector<SweepVariant> efficiency;    // extra variants, trained on efficiency_task only
  std::string efficiency_task = "kjv";
  std::string long_context_task = "kjv";   // evaluated at every eval_lengths entry
  std::vector<int64_t> eval_lengths;       // the first is the training length
  int64_t seeds = 3;
  // A plan of one size: these, and each variant's d_model and d_ff.
  int64_t n_layers = 2, n_heads = 4;
  int64_t steps = 0, batch = 0, warmup = 0;
  // In a plan of one size: the steps of a task's cells where they differ from
  // `steps` (the length preset gives the tasks that take longer to learn more).
  std::map<std::string, int64_t> task_steps;
  // A plan of several sizes: each cell takes its shape, steps and warm-up from
  // its size (the variants' own d_model and d_ff are 0). The sizes' steps follow
  // one token rule, recorded here: tokens = min(tokens_per_parameter x parameters, max_tokens).
  std::vector<SweepSize> sizes;
  double tokens_per_parameter = 0;
  int64_t max_tokens = 0;
  bool long_context_every_task = false;  // every task's cells evaluated at every eval_lengths entry
  // Context extensions (pi, ntk, yarn: models/rotary_scaling.h) evaluated
  // beside every variant that takes them at each length past the training
  // one, with S = length / seq_len: "rope+yarn" in the report.
  std::vector<std::string> eval_scalings;
  // Evaluation-time entries named one by one: "rope+yarn" is the trained rope
  // model evaluated with YaRN at each length past the training one (S = length
  // / seq_len); its cells are rope's. Each names a variant of `variants` and a
  // method (pi, ntk, yarn) the variant takes.
  std::vector<std::string> eval_variants;
  // Examples per evaluation length of a built-in task (passkey, copy, recall,
  // flipflop), scored by exact match (app/evaluate.h); passkey's spread over
  // the depths 0, 25, 50, 75 and 100%.
  int64_t task_examples = 100;
  std::string precision = "float32";     // of training (float32, bf16); evaluation is float32
  double lr = 3e-3, min_lr = 3e-4;
  int64_t eval_tokens = 0;     // predictions scored per evaluation length (windows = eval_tokens / L)
  int64_t arith_problems = 0;  // held-out problems for exact match on the arith task
  int64_t throughput_steps = 0, throughput_rounds = 0;
  int jobs = 1;                // cells trained at once, each with threads_per_job threads
  int threads_per_job = 1;     // 0: every core
  std::string device = "cpu";  // cpu or cuda

  int64_t seq_len() const { return eval_lengths.front(); }
  int64_t steps_of(const std::string& task) const {
    const auto it = task_steps.find(task);
    return it == task_steps.end() ? steps : it->second;
  }
  bool long_context(const std::string& task) const { return long_context_every_task || task == long_context_task; }
  // The context extensions (pi, ntk, yarn) a variant's cells are evaluated
  // with: eval_scalings that its position takes, and its eval_variants entries.
  std::vector<std::string> scalings_of(const SweepVariant& v) const;
  // Whether a task is a built-in length-generalisation task (not a user's file of that name).
  bool is_builtin_task(const std::string& task) const;
  // What a task trains on: its file, or the built-in corpus of that name.
  std::string data_of(const std::string& task) const {
    const auto it = task_files.find(task);
    return it == task_files.end() ? task : it->second;
  }
};

// The plan with the user's choices: `files` (texts to sweep, each a task named
// by its stem, in place of the preset's tasks unless `tasks` names some too),
// `tasks` (a subset of the preset's; or a built-in task, passkey, copy, recall,
// flipflop, among `files`) and `variants` (a subset of its variant names, and
// evaluation-time entries "VARIANT+METHOD" such as rope+yarn: naming one keeps
// only the entries named and trains their variants; naming only trained
// variants keeps the preset's entries of those variants).
// The long-context lengths a user's text cannot evaluate (too little held-out
// text) are left out. Refuses an unknown variant, a missing file and two tasks of one name.
void choose_sweep_tasks(SweepPlan& plan, const std::vector<std::string>& tasks, const std::vector<std::string>& files,
                        const std::vector<std::string>& variants);

// "quick" (a 2-core CPU in under 40 minutes), "long" (long context: trained at
// 512, evaluated up to 65,536 positions, a 2-core CPU in about an hour), "full"
// (sized for a GPU), "scale" (three model sizes, 117k to 3.3M parameters, in
// bf16: a 2-core CPU in at most 6 hours, run in pieces) or "rivals"
// (ComplexFormer beside its newer rivals at quick's size, every task at 1x, 4x
// and 16x the training length, with and without PI and YaRN) or "length" (the
// four built-in tasks, every position variant trained at 128 and scored by
// exact match at 1x to 16x that length: a 2-core CPU in at most 6 hours, run
// in pieces).

SweepPlan sweep_preset(const std::string& name);
// The parameters of RoPE's model at a size: what the token rule counts (the
// other variants differ by under 0.1%: complexformer adds its angles, alibi nothing).
double size_parameters(const SweepSize& size);
// The training steps the plan's token rule gives a model of `parameters`:
// min(tokens_per_parameter x parameters, max_tokens) tokens, rounded up to whole steps.
int64_t token_rule_steps(const SweepPlan& plan, double parameters);
// --steps N: every size's (or the plan's, and every task's) steps, the warm-up cut to at most a tenth of them.
void set_sweep_steps(SweepPlan& plan, int64_t steps);
// --d-model, --n-layers, --n-heads, --d-ff, --seq-len (0: the preset's): one
// model size for a plan of one size. The efficiency variants keep their ratio
// to the main grid's width (rounded to whole rotated pairs per head), the
// evaluation lengths their ratio to the training length. Refuses a plan of
// several sizes and a width that is not a multiple of 2 x n_heads.
struct SweepShape {
  int64_t d_model = 0, n_layers = 0, n_heads = 0, d_ff = 0, seq_len = 0;
  bool any() const { return d_model > 0 || n_layers > 0 || n_heads > 0 || d_ff > 0 || seq_len > 0; }
};
void set_sweep_shape(SweepPlan& plan, const SweepShape& shape);
// The plan of a sweep folder grown by a rerun's request: more seeds, more
// evaluation lengths (the same training length), more tasks, variants or
// evaluation-time entries join it, in the folder's order first; the cells
// already done are kept (and evaluated at the lengths they lack); --jobs
// follows the request. Anything else is refused, naming the field and both
// values: "sweep: 'DIR' holds a sweep with another plan: steps is 600 there, 5 here; ...".
SweepPlan grow_sweep_plan(const SweepPlan& existing, const SweepPlan& requested, const std::string& out_dir);
nlohmann::json to_json(const SweepPlan& plan);
// Every field range-checked with the limits of its flag (sweep's, else train's):
// phasor::Error "sweep: '<file>': seeds must be an integer from 1 to 100, got 1000000000".
SweepPlan sweep_plan_from_json(const nlohmann::json& j, const std::string& file = "plan.json");

// A field of a sweep's file (plan.json, result.json, throughput.json), checked
// as it is read: each throws phasor::Error naming the file and the field
// (`field`, e.g. "eval.128.loss") if it is missing or out of [lo, hi].
const nlohmann::json& sweep_field(const nlohmann::json& j, std::string_view key, const std::string& file, const std::string& field);
int64_t sweep_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& file, const std::string& field);
double sweep_number(const nlohmann::json& v, double lo, double hi, const std::string& file, const std::string& field);
std::string sweep_string(const nlohmann::json& v, const std::string& file, const std::string& field);

// A cell's result.json, every field the reports read range-checked as above:
// each eval entry's loss ("128", "512+yarn"; 0 to 1e6 nats), parameters (1 to
// 2^31), train_seconds (0 to 1e9), tokens_trained (0 to 9.2e18) and
// exact_match (0 to 1) where present; a task's eval entries also accuracy (0
// to 1) and, for passkey, depths.<d>.accuracy (d 0 to 100).
struct CellResult {
  std::string path;
  std::map<std::string, double> loss;  // by eval key
  std::map<std::string, double> accuracy;                 // by eval key, a task's cells only
  std::map<std::string, std::map<int, double>> depth_accuracy;  // by eval key, then passkey depth
  double parameters = 0, train_seconds = 0;
  std::optional<double> tokens_trained, exact_match;
  double loss_at(const std::string& key) const;  // phasor::Error naming the file if it lacks the key
};
CellResult read_cell_result(const std::string& path);
// The tokens/s of a variant's throughput rounds in throughput.json: 1 to 100 positive numbers.
std::vector<double> sweep_rates(const nlohmann::json& v, const std::string& file, const std::string& field);

struct SweepCell {
  std::string name;  // <task>-<variant>-s<seed>, or <task>-<size>-<variant>-s<seed> in a plan of sizes
  std::string task;
  SweepVariant variant;  // its d_model and d_ff those of the cell's model
  SweepSize size;        // the cell's shape and training length (name "" in a plan of one size)
  int64_t seed = 1;
  bool long_context = false;
};
std::vector<SweepCell> sweep_cells(const SweepPlan& plan);

// Runs every cell without a result.json (restarting interrupted ones), `jobs`
// at a time as child processes of `self_exe` (`phasor sweep --cell NAME`), then
// measures throughput if not done yet. Throws naming the cells that failed.
// stop_after_minutes >= 0: no cell starts after that many minutes (the running
// ones finish; 0: none starts, only the plan is written), so a long sweep runs
// in pieces; the throughput waits for the last piece. Negative: no limit.
void run_sweep(const SweepPlan& plan, const std::string& out_dir, const std::string& self_exe, double stop_after_minutes = -1);
// Trains and evaluates one cell in this process, writing its result.json.
void run_sweep_cell(const std::string& out_dir, const std::string& cell_name);

// A JSON file of a sweep folder; phasor::Error names the file if it is not valid JSON.
nlohmann::json read_sweep_json(const std::string& path);
// The plan fixed in out_dir/plan.json.
SweepPlan read_sweep_plan(const std::string& out_dir);

// Reads the plan and results under out_dir and writes report.md and its plots there.
void write_sweep_report(const std::string& out_dir);
// The report of a plan of several sizes (app/sweep_scale_report.cpp), which
// write_sweep_report writes for one: loss per size and variant, the
// complexformer - rope gap against parameters, its trend, the overhead per step.
void write_scale_report(const std::string& out_dir);
// The report of a plan of built-in tasks (the length preset, app/sweep_length_report.cpp):
// exact-match accuracy against evaluation length per task and variant, and passkey's depth x length maps.
void write_length_report(const std::string& out_dir);

}  // namespace phasor
