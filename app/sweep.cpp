#include "app/sweep.h"

#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/evaluate.h"
#include "app/train.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "tensor/error.h"

extern char** environ;

namespace phasor {

namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------ presets

// The variants the issue compares, all of one size (only complexformer adds
// parameters: delta, phase_bias and beta, under 1% of the model): every
// variant of the table (models/config.h) that leaves the token embeddings
// alone, so the grid compares what attention does with positions (a `learned`
// table could not be evaluated past its training length either). The sweep's
// own choice: complexformer twice, with each initialisation of CMHA.
static std::vector<SweepVariant> main_grid(int64_t d_model, int64_t d_ff) {
  std::vector<SweepVariant> grid;
  for (const PositionVariant& v : kPositionVariants) {
    if (v.embedding != PositionEmbedding::None) continue;
    if (v.position != Position::ComplexFormer) {
      grid.push_back({std::string(v.name), v.position, CmhaInit::Rope, d_model, d_ff});
      continue;
    }
    for (CmhaInit init : {CmhaInit::Rope, CmhaInit::Paper})
      grid.push_back({std::string(v.name) + "-" + std::string(cmha_init_name(init)), v.position, init, d_model, d_ff});
  }
  return grid;
}

SweepPlan sweep_preset(const std::string& name) {
  SweepPlan p;
  p.name = name;
  p.tasks = {"kjv", "code", "arith"};
  if (name == "quick") {
    // d_model 64, 2 layers, 4 heads of width 16: about 100k parameters, trained
    // on 1.2M tokens (600 steps of 16 x 128); two single-threaded cells at once.
    p.variants = main_grid(64, 176);
    p.efficiency = {{"complexformer-rope-3/4", Position::ComplexFormer, CmhaInit::Rope, 48, 128}};
    p.eval_lengths = {128, 256, 512, 1024, 2048};
    p.n_layers = 2;
    p.n_heads = 4;
    p.steps = 600;
    p.batch = 16;
    p.warmup = 30;
    p.eval_tokens = 16384;
    p.arith_problems = 300;
    p.throughput_steps = 100;
    p.throughput_rounds = 5;
    p.jobs = 2;
    p.threads_per_job = 1;
  } else if (name == "full") {
    // The README's model width on ten times the tokens: for a GPU machine or a
    // long CPU run (phasor sweep --preset full --jobs N).
    p.variants = main_grid(128, 352);
    p.efficiency = {{"complexformer-rope-3/4", Position::ComplexFormer, CmhaInit::Rope, 96, 256}};
    p.eval_lengths = {256, 512, 1024, 2048, 4096};
    p.n_layers = 4;
    p.n_heads = 4;
    p.steps = 4000;
    p.batch = 32;
    p.warmup = 200;
    p.lr = 2e-3;
    p.min_lr = 2e-4;
    p.eval_tokens = 262144;
    p.arith_problems = 2000;
    p.throughput_steps = 100;
    p.throughput_rounds = 3;
    p.jobs = 1;
    p.threads_per_job = 0;
  } else if (name == "long") {
    // Long context on a 2-core CPU in about an hour: the quick preset's model,
    // trained at 512 positions on kjv and evaluated at every power of two up to
    // 65,536 (the fused attention holds such a window in O(N) memory). The
    // same 65,536 tokens are scored at every length. 18 cells, two at a time.
    p.tasks = {"kjv"};
    p.variants = main_grid(64, 176);
    p.efficiency = {};
    p.eval_lengths = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    p.n_layers = 2;
    p.n_heads = 4;
    p.steps = 600;  // 2.5M tokens a cell, twice the quick preset's
    p.batch = 8;
    p.warmup = 30;
    p.eval_tokens = 65536;
    p.arith_problems = 0;
    p.throughput_steps = 30;
    p.throughput_rounds = 1;
    p.jobs = 2;
    p.threads_per_job = 1;
  } else {
    fail("sweep: unknown preset '", name, "' (quick, long or full)");
  }
  return p;
}

static json to_json(const SweepVariant& v) {
  return {{"name", v.name},
          {"position", std::string(position_name(v.position))},
          {"cmha_init", std::string(cmha_init_name(v.cmha_init))},
          {"d_model", v.d_model},
          {"d_ff", v.d_ff}};
}
static SweepVariant variant_from_json(const json& j) {
  return {j.at("name"), parse_position(j.at("position").get<std::string>()), parse_cmha_init(j.at("cmha_init").get<std::string>()),
          j.at("d_model"), j.at("d_ff")};
}

json to_json(const SweepPlan& p) {
  json variants = json::array(), efficiency = json::array();
  for (const auto& v : p.variants) variants.push_back(to_json(v));
  for (const auto& v : p.efficiency) efficiency.push_back(to_json(v));
  json j = {{"name", p.name}, {"tasks", p.tasks}, {"variants", variants}, {"efficiency", efficiency},
          {"efficiency_task", p.efficiency_task}, {"long_context_task", p.long_context_task}, {"eval_lengths", p.eval_lengths},
          {"seeds", p.seeds}, {"n_layers", p.n_layers}, {"n_heads", p.n_heads}, {"steps", p.steps}, {"batch", p.batch},
          {"warmup", p.warmup}, {"lr", p.lr}, {"min_lr", p.min_lr}, {"eval_tokens", p.eval_tokens},
          {"arith_problems", p.arith_problems}, {"throughput_steps", p.throughput_steps},
          {"throughput_rounds", p.throughput_rounds}, {"jobs", p.jobs}, {"threads_per_job", p.threads_per_job},
          {"device", p.device}};
  if (!p.task_files.empty()) j["task_files"] = p.task_files;  // plans without them read as before
  return j;
}

SweepPlan sweep_plan_from_json(const json& j) {
  try {
    SweepPlan p;
    j.at("name").get_to(p.name);
    j.at("tasks").get_to(p.tasks);
    for (const auto& v : j.at("variants")) p.variants.push_back(variant_from_json(v));
    for (const auto& v : j.at("efficiency")) p.efficiency.push_back(variant_from_json(v));
    j.at("efficiency_task").get_to(p.efficiency_task);
    j.at("long_context_task").get_to(p.long_context_task);
    j.at("eval_lengths").get_to(p.eval_lengths);
    j.at("seeds").get_to(p.seeds);
    j.at("n_layers").get_to(p.n_layers);
    j.at("n_heads").get_to(p.n_heads);
    j.at("steps").get_to(p.steps);
    j.at("batch").get_to(p.batch);
    j.at("warmup").get_to(p.warmup);
    j.at("lr").get_to(p.lr);
    j.at("min_lr").get_to(p.min_lr);
    j.at("eval_tokens").get_to(p.eval_tokens);
    j.at("arith_problems").get_to(p.arith_problems);
    j.at("throughput_steps").get_to(p.throughput_steps);
    j.at("throughput_rounds").get_to(p.throughput_rounds);
    j.at("jobs").get_to(p.jobs);
    j.at("threads_per_job").get_to(p.threads_per_job);
    j.at("device").get_to(p.device);
    if (j.contains("task_files")) j.at("task_files").get_to(p.task_files);
    PHASOR_CHECK(!p.eval_lengths.empty() && !p.tasks.empty() && !p.variants.empty() && p.seeds > 0,
                 "sweep: the plan needs tasks, variants, seeds and evaluation lengths");
    return p;
  } catch (const json::exception& e) {
    fail("sweep: plan.json is malformed (", e.what(), ")");
  }
}

void choose_sweep_tasks(SweepPlan& plan, const std::vector<std::string>& tasks, const std::vector<std::string>& files,
                        const std::vector<std::string>& variants) {
  if (!tasks.empty() || !files.empty()) plan.tasks = tasks;
  for (const std::string& file : files) {
    PHASOR_CHECK(fs::is_regular_file(file) || fs::is_directory(file), "sweep: --data '", file, "' is not a file or a folder of them");
    const std::string name = fs::path(file).stem().string();
    PHASOR_CHECK(!name.empty() && std::find(plan.tasks.begin(), plan.tasks.end(), name) == plan.tasks.end() &&
                     name != "kjv" && name != "code" && name != "arith",
                 "sweep: two tasks would be named '", name, "' (a task is named by its file's stem); rename one of the files");
    plan.tasks.push_back(name);
    plan.task_files[name] = data_location(file);
  }
  // The long-context evaluation, the efficiency variants and the throughput
  // run on the preset's task where it is swept, else on the first task.
  for (std::string* task : {&plan.long_context_task, &plan.efficiency_task})
    if (std::find(plan.tasks.begin(), plan.tasks.end(), *task) == plan.tasks.end()) *task = plan.tasks.front();
  // A user's text may hold too little held-out text for the longest evaluations:
  // those lengths are left out of the plan (the training length stays).
  if (plan.task_files.contains(plan.long_context_task)) {
    const auto bytes = static_cast<double>(load_text(plan.task_files.at(plan.long_context_task)).size());
    const auto held_out = static_cast<int64_t>(bytes * TrainOptions{}.val_fraction);  // as split_tokens holds it out
    std::erase_if(plan.eval_lengths, [&](int64_t length) { return length != plan.seq_len() && held_out < length + 1; });
  }
  if (variants.empty()) return;
  std::string known;
  for (const auto* group : {&plan.variants, &plan.efficiency})
    for (const SweepVariant& v : *group) known += (known.empty() ? "" : ", ") + v.name;
  for (const std::string& name : variants) {
    const auto named = [&](const SweepVariant& v) { return v.name == name; };
    PHASOR_CHECK(std::ranges::any_of(plan.variants, named) || std::ranges::any_of(plan.efficiency, named), "sweep: the preset '", plan.name,
                 "' has no variant '", name, "' (its variants: ", known, ")");
  }
  const auto unchosen = [&](const SweepVariant& v) { return std::find(variants.begin(), variants.end(), v.name) == variants.end(); };
  std::erase_if(plan.variants, unchosen);
  std::erase_if(plan.efficiency, unchosen);
  PHASOR_CHECK(!plan.variants.empty(), "sweep: --variants chose only efficiency variants; name at least one of the main grid's");
}

std::vector<SweepCell> sweep_cells(const SweepPlan& plan) {
  std::vector<SweepCell> cells;
  const auto add = [&](const std::string& task, const SweepVariant& v) {
    for (int64_t seed = 1; seed <= plan.seeds; ++seed) {
      std::string name = task + "-" + v.name + "-s" + std::to_string(seed);
      std::replace(name.begin(), name.end(), '/', '_');  // "3/4" in a variant name
      cells.push_back({name, task, v, seed, task == plan.long_context_task});
    }
  };
  for (const auto& task : plan.tasks)
    for (const auto& v : plan.variants) add(task, v);
  if (std::find(plan.tasks.begin(), plan.tasks.end(), plan.efficiency_task) != plan.tasks.end())
    for (const auto& v : plan.efficiency) add(plan.efficiency_task, v);
  return cells;
}

json read_sweep_json(const std::string& path) {
  try {
    return json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail("sweep: '", path, "' is not valid JSON (", e.what(), ")");
  }
}

SweepPlan read_sweep_plan(const std::string& out_dir) { return sweep_plan_from_json(read_sweep_json(out_dir + "/plan.json")); }

// ------------------------------------------------------------------ one cell

namespace {

TrainOptions cell_options(const SweepPlan& plan, const SweepCell& cell, const std::string& run_dir) {
  TrainOptions o;
  o.model.position = cell.variant.position;
  o.model.cmha_init = cell.variant.cmha_init;
  o.model.d_model = cell.variant.d_model;
  o.model.d_ff = cell.variant.d_ff;
  o.model.n_layers = plan.n_layers;
  o.model.n_heads = plan.n_heads;
  o.model.max_seq_len = *std::max_element(plan.eval_lengths.begin(), plan.eval_lengths.end());
  o.data = plan.data_of(cell.task);
  o.run_dir = run_dir;
  o.seq_len = plan.seq_len();
  o.batch = plan.batch;
  o.steps = plan.steps;
  o.warmup = plan.warmup;
  o.lr = plan.lr;
  o.min_lr = plan.min_lr;
  o.seed = static_cast<uint64_t>(cell.seed);
  o.eval_every = 0;  // validation once, at the end
  o.eval_windows = 64;
  o.threads = plan.threads_per_job;
  o.device = plan.device;
  return o;
}

// The median tokens/s of a run's logged windows after the first (warm-up).
double median_tokens_per_second(const std::string& run_dir) {
  std::istringstream in(read_text_file(run_dir + "/log.jsonl", "1 GiB for a log"));
  std::vector<double> rates;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("tokens_per_s")) rates.push_back(j["tokens_per_s"].get<double>());
  }
  PHASOR_CHECK(rates.size() >= 2, "sweep: '", run_dir, "/log.jsonl' holds too few timed windows");
  rates.erase(rates.begin());
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

void run_sweep_cell(const std::string& out_dir, const std::string& cell_name) {
  const SweepPlan plan = read_sweep_plan(out_dir);
  const std::vector<SweepCell> cells = sweep_cells(plan);
  const auto it = std::find_if(cells.begin(), cells.end(), [&](const SweepCell& c) { return c.name == cell_name; });
  PHASOR_CHECK(it != cells.end(), "sweep: the plan in '", out_dir, "' has no cell '", cell_name, "'");
  const SweepCell& cell = *it;
  const std::string run_dir = out_dir + "/cells/" + cell.name;
  fs::remove_all(run_dir);  // an interrupted attempt starts over

  const auto start = std::chrono::steady_clock::now();
  const TrainSummary summary = train(cell_options(plan, cell, run_dir));
  PHASOR_CHECK(!summary.interrupted, "sweep: cell ", cell.name, " was interrupted");
  const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const auto model = load_model(latest_checkpoint(run_dir) + "/model.safetensors");
  if (plan.device == "cuda") model->to(cuda(0));
  const std::vector<int64_t> validation = ByteTokenizer().encode(read_text_file(run_dir + "/validation.txt"));
  json eval = json::object();
  const std::vector<int64_t> lengths = cell.long_context ? plan.eval_lengths : std::vector<int64_t>{plan.seq_len()};
  for (int64_t length : lengths) {
    const int64_t windows = std::max<int64_t>(1, plan.eval_tokens / length);
    const EvalResult r = evaluate(*model, validation, length, windows, std::max<int64_t>(1, 2048 / length));
    eval[std::to_string(length)] = {{"loss", r.loss}, {"windows", r.windows}, {"tokens", r.tokens}};
  }
  json result = {{"cell", cell.name},
                 {"task", cell.task},
                 {"variant", cell.variant.name},
                 {"seed", cell.seed},
                 {"parameters", model->parameter_count()},
                 {"steps", summary.steps_done},
                 {"tokens_trained", summary.steps_done * plan.batch * plan.seq_len()},
                 {"train_seconds", train_seconds},
                 {"final_train_loss", summary.final_loss},
                 {"skipped_steps", summary.skipped_steps},
                 {"eval", eval}};
  if (cell.task == "arith" && plan.arith_problems > 0)
    result["exact_match"] = arith_exact_match(*model, static_cast<size_t>(plan.arith_problems));
  write_text_atomically(run_dir + "/result.json", result.dump(2) + "\n");
}

// ------------------------------------------------------------------ the sweep

namespace {

// Starts `phasor sweep --out DIR --cell NAME` with its output in log_path.
pid_t spawn_cell(const std::string& self_exe, const std::string& out_dir, const std::string& cell, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // O_NOFOLLOW: a symlink planted at the cell's log is refused, not written through (no O_CLOEXEC: this is the child's stdout).
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = {self_exe, "sweep", "--out", out_dir, "--cell", cell};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self_exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  PHASOR_CHECK(rc == 0, "sweep: cannot start '", self_exe, "' for cell ", cell, " (error ", rc, ")");
  return pid;
}

// Each variant trained alone, in rounds, variants interleaved so that a
// disturbance of the machine spreads over all of them.
json measure_throughput(const SweepPlan& plan, const std::string& out_dir) {
  std::vector<SweepVariant> variants = plan.variants;
  variants.insert(variants.end(), plan.efficiency.begin(), plan.efficiency.end());
  std::map<std::string, std::vector<double>> rates;
  for (int64_t round = 1; round <= plan.throughput_rounds; ++round) {
    for (const SweepVariant& v : variants) {
      SweepCell cell{"throughput", plan.long_context_task, v, round, false};
      const std::string run_dir = out_dir + "/throughput/run";
      fs::remove_all(run_dir);
      TrainOptions o = cell_options(plan, cell, run_dir);
      o.steps = plan.throughput_steps;  // same threads as a cell: a tiny model gains little from more
      o.log_every = std::max<int64_t>(1, plan.throughput_steps / 6);
      std::fprintf(stderr, "sweep: throughput of %s, round %ld/%ld\n", v.name.c_str(), static_cast<long>(round),
                   static_cast<long>(plan.throughput_rounds));
      train(o);
      rates[v.name].push_back(median_tokens_per_second(run_dir));
    }
  }
  fs::remove_all(out_dir + "/throughput");
  json out = json::object();
  for (auto& [name, r] : rates) out[name] = r;
  return out;
}

}  // namespace

void run_sweep(const SweepPlan& plan, const std::string& out_dir, const std::string& self_exe) {
  fs::create_directories(out_dir + "/cells");
  const std::string plan_path = out_dir + "/plan.json";
  if (fs::exists(plan_path))
    PHASOR_CHECK(read_sweep_json(plan_path) == to_json(plan), "sweep: '", out_dir, "' holds a sweep with another plan (preset '",
                 read_sweep_plan(out_dir).name, "'); choose another --out");
  else
    write_text_atomically(plan_path, to_json(plan).dump(2) + "\n");

  const std::vector<SweepCell> cells = sweep_cells(plan);
  std::vector<SweepCell> todo;
  for (const SweepCell& c : cells)
    if (!fs::exists(out_dir + "/cells/" + c.name + "/result.json")) todo.push_back(c);
  const size_t total = cells.size();
  std::fprintf(stderr, "sweep: %zu of %zu cells to run, %d at a time (logs in %s/cells/<cell>.log)\n", todo.size(), total,
               plan.jobs, out_dir.c_str());

  std::map<pid_t, std::string> running;
  std::vector<std::string> failed;
  size_t next = 0, finished = total - todo.size();
  const auto start = std::chrono::steady_clock::now();
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && running.size() < static_cast<size_t>(std::max(1, plan.jobs))) {
      const SweepCell& c = todo[next++];
      running[spawn_cell(self_exe, out_dir, c.name, out_dir + "/cells/" + c.name + ".log")] = c.name;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) failed.push_back(it->second);
    ++finished;
    const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;
    std::fprintf(stderr, "sweep: [%zu/%zu] %s %s (%.1f min)\n", finished, total, it->second.c_str(), ok ? "done" : "FAILED", minutes);
    running.erase(it);
  }
  if (!failed.empty()) {
    std::string names;
    for (const auto& f : failed) names += (names.empty() ? "" : ", ") + f;
    fail("sweep: ", failed.size(), " cell(s) failed: ", names, " (see ", out_dir, "/cells/<cell>.log; rerun to retry them)");
  }
  const std::string throughput_path = out_dir + "/throughput.json";
  if (!fs::exists(throughput_path) && plan.throughput_rounds > 0)
    write_text_atomically(throughput_path, measure_throughput(plan, out_dir).dump(2) + "\n");
}

}  // namespace phasor
