// `phasor sweep` (app/sweep.h): a tiny plan end to end through the CLI's
// child processes, then resuming, refusing another plan, and the report.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "app/sweep.h"
#include "app/sweep_stats.h"
#include "models/data/corpus.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

fs::path fresh_temp_dir(const std::string& name) { return fresh_folder(scratch_root("sweep", /*remove_at_exit=*/true) / name); }

// Two variants on the arith corpus (generated, so no package is needed), two
// seeds, a few steps; long-context and efficiency cells on the same task.
SweepPlan tiny_plan() {
  SweepPlan p = sweep_preset("quick");
  p.name = "tiny";
  p.tasks = {"arith"};
  p.variants = {{"complexformer-rope", Position::ComplexFormer, CmhaInit::Rope, 16, 32},
                {"rope", Position::Rope, CmhaInit::Rope, 16, 32}};
  p.efficiency = {{"complexformer-small", Position::ComplexFormer, CmhaInit::Rope, 8, 16}};
  p.efficiency_task = p.long_context_task = "arith";
  p.eval_lengths = {16, 32, 64};
  p.seeds = 2;
  p.n_layers = 1;
  p.n_heads = 2;
  p.steps = 4;
  p.batch = 2;
  p.warmup = 1;
  p.eval_tokens = 256;
  p.arith_problems = 4;
  p.throughput_steps = 4;
  p.throughput_rounds = 1;
  p.jobs = 2;
  p.threads_per_job = 1;
  return p;
}

}  // namespace

TEST_CASE("presets: the main grid is the variant table's variants without a position embedding, complexformer with each init") {
  for (const char* preset : {"quick", "long", "full"}) {
    std::vector<std::string> names;
    for (const SweepVariant& v : sweep_preset(preset).variants) {
      names.push_back(v.name);
      CHECK(v.name.starts_with(position_name(v.position)));  // the table's name, the sweep's init after it
      CHECK(v.name.ends_with(v.position == Position::ComplexFormer ? cmha_init_name(v.cmha_init) : position_name(v.position)));
    }
    CHECK(names == std::vector<std::string>{"complexformer-rope", "complexformer-paper", "rope", "xpos", "alibi", "none"});
  }
}

TEST_CASE("presets: the main grid has equal sizes, and cells are named uniquely") {
  for (const char* name : {"quick", "full"}) {
    const SweepPlan p = sweep_preset(name);
    CHECK(p.variants.size() == 6);
    for (const auto& v : p.variants) CHECK((v.d_model == p.variants[0].d_model && v.d_ff == p.variants[0].d_ff));
    CHECK(p.seeds >= 3);
    CHECK(sweep_plan_from_json(to_json(p)).name == name);
    CHECK(to_json(sweep_plan_from_json(to_json(p))) == to_json(p));
    const auto cells = sweep_cells(p);
    CHECK(cells.size() == (p.tasks.size() * p.variants.size() + p.efficiency.size()) * p.seeds);
    std::set<std::string> names;
    for (const auto& c : cells) names.insert(c.name);
    CHECK(names.size() == cells.size());
    for (const auto& n : names) CHECK(n.find('/') == std::string::npos);
  }
  CHECK_THROWS_WITH_AS(sweep_preset("huge"), doctest::Contains("unknown preset 'huge'"), Error);
}

TEST_CASE("a tiny sweep runs every cell, resumes, and reports means, deviations and plots") {
  const fs::path out = fresh_temp_dir("sweep");
  const SweepPlan plan = tiny_plan();
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);
  write_sweep_report(out.string());

  const auto cells = sweep_cells(plan);
  REQUIRE(cells.size() == 6);
  for (const auto& c : cells) {
    const auto r = nlohmann::json::parse(read_text_file((out / "cells" / c.name / "result.json").string()));
    CHECK(r["steps"] == 4);
    CHECK(r["tokens_trained"] == 4 * 2 * 16);
    CHECK(r["eval"].size() == 3);  // every length: arith is the long-context task here
    CHECK(r["eval"]["64"]["windows"] == 4);  // 256 predictions / 64
    CHECK(r["exact_match"].get<double>() >= 0);
    CHECK(r["exact_match"].get<double>() <= 1);
    CHECK(r["eval"]["16"]["loss"].get<double>() > 0);
  }
  const auto throughput = nlohmann::json::parse(read_text_file((out / "throughput.json").string()));
  CHECK(throughput.size() == 3);
  CHECK(throughput["rope"][0].get<double>() > 0);

  const std::string report = read_text_file((out / "report.md").string());
  // A row per variant in the main, difference, long-context loss and difference, efficiency and overhead tables
  // (rope: not in the difference ones).
  CHECK(count_of(report, "| complexformer-rope |") == 6);
  CHECK(count_of(report, "| rope |") == 4);
  CHECK(report.find("| complexformer-small |") != std::string::npos);
  CHECK(std::regex_search(report, std::regex(R"(\| complexformer-rope \| \d+ \| \d\.\d{4} ± \d\.\d{4} \|)")));
  CHECK(report.find("(n=1)") == std::string::npos);
  CHECK(report.find("missing") == std::string::npos);
  const std::string chart = read_text_file((out / "long_context.svg").string());
  CHECK(count_of(chart, "class=\"series\"") == 2);
  CHECK(count_of(chart, "<circle") == 6);  // 2 variants x 3 lengths
  CHECK(count_of(chart, "class=\"error-bar\"") == 6);  // each with its standard error over the 2 seeds
  // The paired difference with its 95% interval at every length, past the training length too.
  CHECK(std::regex_search(report, std::regex(R"(\| complexformer-rope \|( [+-]\d\.\d{3} ± \d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]\*? \|){3})")));
  const std::string differences = read_text_file((out / "long_context_difference.svg").string());
  CHECK(count_of(differences, "<circle") == 3);
  CHECK(count_of(differences, "class=\"error-bar\"") == 3);
  CHECK(fs::exists(out / "loss_curves.svg"));

  // Rerunning does nothing; losing one result reruns that cell only.
  const auto stamp = fs::last_write_time(out / "cells" / cells[0].name / "result.json");
  fs::remove(out / "cells" / cells[1].name / "result.json");
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);
  CHECK(fs::last_write_time(out / "cells" / cells[0].name / "result.json") == stamp);
  CHECK(fs::exists(out / "cells" / cells[1].name / "result.json"));

  // A different plan in the same folder is refused, naming the field and both values.
  SweepPlan other = plan;
  other.steps = 5;
  CHECK_THROWS_WITH_AS(run_sweep(other, out.string(), PHASOR_CLI_PATH),
                       doctest::Contains("holds a sweep with another plan: steps is 4 there, 5 here"), Error);

  // More seeds and a longer evaluation length grow the plan: the done cells keep their training and gain the new length.
  const std::string kept_hash = nlohmann::json::parse(read_text_file((out / "cells" / cells[0].name / "result.json").string()))["checkpoint_hash"];
  SweepPlan grown = plan;
  grown.seeds = 3;
  grown.eval_lengths = {16, 32, 64, 128};
  run_sweep(grown, out.string(), PHASOR_CLI_PATH);
  CHECK(read_sweep_plan(out.string()).seeds == 3);
  CHECK(sweep_cells(read_sweep_plan(out.string())).size() == 9);
  const auto kept = nlohmann::json::parse(read_text_file((out / "cells" / cells[0].name / "result.json").string()));
  CHECK(kept["checkpoint_hash"] == kept_hash);
  CHECK(kept["eval"].contains("128"));
  CHECK(fs::exists(out / "cells" / "arith-rope-s3" / "result.json"));
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);  // the original request now continues the grown sweep
  CHECK(read_sweep_plan(out.string()).eval_lengths == std::vector<int64_t>{16, 32, 64, 128});
  fs::remove(out / "cells" / cells[2].name / "result.json");
  write_sweep_report(out.string());
  CHECK(read_text_file((out / "report.md").string()).find("**1 missing**") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("a failing cell fails the sweep, naming it, and the others still finish") {
  const fs::path out = fresh_temp_dir("sweep_fail");
  SweepPlan plan = tiny_plan();
  plan.variants = {{"rope", Position::Rope, CmhaInit::Rope, 16, 32},
                   {"bad", Position::Rope, CmhaInit::Rope, 15, 32}};  // 15 % 2 heads: invalid
  plan.efficiency.clear();
  plan.seeds = 1;
  plan.throughput_rounds = 0;
  CHECK_THROWS_WITH_AS(run_sweep(plan, out.string(), PHASOR_CLI_PATH), doctest::Contains("1 cell(s) failed: arith-bad-s1"), Error);
  CHECK(fs::exists(out / "cells" / "arith-rope-s1" / "result.json"));
  CHECK(read_text_file((out / "cells" / "arith-bad-s1.log").string()).find("d_model") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("sweep --data sweeps the user's own texts and --variants a subset; unknown names, missing files and clashing names are refused") {
  const fs::path folder = fresh_temp_dir("own_text");
  const fs::path corpus = write_bytes(folder / "corpus.txt", sample_text(20000));
  SweepPlan plan = sweep_preset("quick");
  choose_sweep_tasks(plan, {}, {corpus.string()}, {"rope", "complexformer-rope"});
  CHECK(plan.tasks == std::vector<std::string>{"corpus"});
  CHECK(plan.data_of("corpus") == fs::absolute(corpus).lexically_normal().string());
  CHECK(plan.data_of("kjv") == "kjv");
  std::vector<std::string> names;
  for (const SweepVariant& v : plan.variants) names.push_back(v.name);
  CHECK(names == std::vector<std::string>{"complexformer-rope", "rope"});  // the preset's order
  CHECK(plan.efficiency.empty());
  CHECK(plan.long_context_task == "corpus");  // the preset's kjv is not swept
  // 20000 bytes hold out 1000 for validation: no window longer than 999.
  CHECK(plan.eval_lengths.front() == sweep_preset("quick").eval_lengths.front());
  for (int64_t length : plan.eval_lengths) CHECK(length + 1 <= 1000);
  CHECK(sweep_cells(plan).size() == 2 * static_cast<size_t>(plan.seeds));
  CHECK(to_json(sweep_plan_from_json(to_json(plan))) == to_json(plan));
  // With --tasks too, both; the preset's tasks otherwise stay as they were.
  SweepPlan both = sweep_preset("quick");
  choose_sweep_tasks(both, {"arith"}, {corpus.string()}, {});
  CHECK(both.tasks == std::vector<std::string>{"arith", "corpus"});
  CHECK(both.variants.size() == sweep_preset("quick").variants.size());

  SweepPlan p = sweep_preset("quick");
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(p, {}, {}, {"nope"}), doctest::Contains("has no variant 'nope' (its variants: complexformer-rope"), Error);
  p = sweep_preset("quick");
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(p, {}, {(folder / "missing.txt").string()}, {}), doctest::Contains("is not a file or a folder of them"), Error);
  p = sweep_preset("quick");
  const fs::path clash = write_bytes(folder / "kjv.txt", sample_text(2000));
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(p, {}, {clash.string()}, {}), doctest::Contains("two tasks would be named 'kjv'"), Error);

  // End to end through the CLI: one variant, one seed, two steps on the user's file.
  const fs::path out = folder / "sweep";
  const Cli r = run_shell(phasor_command() + " sweep --out " + quote(out) + " --data " + quote(corpus) +
                              " --variants rope --steps 2 --seeds 1 --eval-tokens 128 --throughput-rounds 0 --jobs 1",
                          folder);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto result = nlohmann::json::parse(read_text_file((out / "cells" / "corpus-rope-s1" / "result.json").string()));
  CHECK(result["task"] == "corpus");
  CHECK(result["steps"] == 2);
  CHECK(nlohmann::json::parse(read_text_file((out / "cells" / "corpus-rope-s1" / "config.json").string()))["data"] ==
        fs::absolute(corpus).lexically_normal().string());
  CHECK(read_text_file((out / "report.md").string()).find("corpus") != std::string::npos);
}

// ------------------------------------------------------------------ sizes (the scale preset)

namespace {

double rope_parameters(int64_t n_layers, int64_t n_heads, int64_t d_model, int64_t d_ff) {
  ModelConfig c;
  c.position = Position::Rope;
  c.n_layers = n_layers, c.n_heads = n_heads, c.d_model = d_model, c.d_ff = d_ff;
  return c.parameter_count();
}

}  // namespace

TEST_CASE("the scale preset: the quick model, the README's and four times it, four variants, two tasks, one token rule") {
  const SweepPlan p = sweep_preset("scale");
  REQUIRE(p.sizes.size() == 3);
  const SweepPlan quick = sweep_preset("quick");
  CHECK(rope_parameters(p.sizes[0].n_layers, p.sizes[0].n_heads, p.sizes[0].d_model, p.sizes[0].d_ff) ==
        rope_parameters(quick.n_layers, quick.n_heads, quick.variants[0].d_model, quick.variants[0].d_ff));
  const double readme = rope_parameters(4, 4, 128, 352);  // the README's main job
  CHECK(rope_parameters(p.sizes[1].n_layers, p.sizes[1].n_heads, p.sizes[1].d_model, p.sizes[1].d_ff) == readme);
  CHECK(rope_parameters(p.sizes[2].n_layers, p.sizes[2].n_heads, p.sizes[2].d_model, p.sizes[2].d_ff) >= 3.9 * readme);
  std::vector<std::string> names;
  for (const SweepVariant& v : p.variants) names.push_back(v.name);
  CHECK(names == std::vector<std::string>{"complexformer-rope", "complexformer-paper", "rope", "alibi"});
  CHECK(p.tasks == std::vector<std::string>{"kjv", "code"});
  CHECK(p.seeds >= 2);
  CHECK(p.precision == "bf16");
  CHECK(p.eval_lengths == std::vector<int64_t>{p.seq_len(), 4 * p.seq_len(), 16 * p.seq_len()});
  // The token rule, by hand: min(20 x 117,056, 8,192,000) = 2,341,120 tokens = 1143.1 steps of 2048 -> 1144;
  // the larger two reach the cap, 8,192,000 / 2048 = 4000 steps.
  CHECK(p.tokens_per_parameter == 20);
  CHECK(p.max_tokens == 8'192'000);
  CHECK(p.batch * p.seq_len() == 2048);
  CHECK(p.sizes[0].steps == 1144);
  CHECK(p.sizes[1].steps == 4000);
  CHECK(p.sizes[2].steps == 4000);
  for (const SweepSize& s : p.sizes) {
    CHECK(size_parameters(s) == rope_parameters(s.n_layers, s.n_heads, s.d_model, s.d_ff));
    CHECK(s.steps == token_rule_steps(p, size_parameters(s)));
  }

  const auto cells = sweep_cells(p);
  CHECK(cells.size() == p.sizes.size() * static_cast<size_t>(p.seeds) * p.tasks.size() * p.variants.size());
  std::set<std::string> unique;
  for (const auto& c : cells) {
    unique.insert(c.name);
    CHECK(c.name == c.task + "-" + c.size.name + "-" + c.variant.name + "-s" + std::to_string(c.seed));
    CHECK(c.long_context);  // every task at every length
    CHECK((c.variant.d_model == c.size.d_model && c.variant.d_ff == c.size.d_ff && c.size.d_model > 0));
  }
  CHECK(unique.size() == cells.size());
  CHECK(unique.count("code-837k-complexformer-paper-s2") == 1);
  // Smallest size first, its first seed on every task and variant before its second.
  CHECK(cells.front().name == "kjv-117k-complexformer-rope-s1");
  CHECK(cells[8].name == "kjv-117k-complexformer-rope-s2");
  CHECK(cells.back().size.name == p.sizes.back().name);

  const nlohmann::json j = to_json(p);
  CHECK(j["precision"] == "bf16");
  CHECK(j["sizes"].size() == 3);
  CHECK(to_json(sweep_plan_from_json(j)) == j);
  SweepPlan shorter = p;
  set_sweep_steps(shorter, 10);
  for (const SweepSize& s : shorter.sizes) CHECK((s.steps == 10 && s.warmup <= 1));
}

TEST_CASE("the plans of earlier sweeps still read as their presets, so those sweeps still resume") {
  for (const char* preset : {"quick", "long"}) {
    const std::string path = std::string(PHASOR_SOURCE_DIR) + "/docs/results/" + preset + "/plan.json";
    const nlohmann::json kept = nlohmann::json::parse(read_text_file(path));
    const SweepPlan plan = sweep_plan_from_json(kept);
    CHECK(plan.sizes.empty());
    CHECK(plan.precision == "float32");
    CHECK(to_json(plan) == kept);
    CHECK(sweep_cells(plan).front().name == "kjv-complexformer-rope-s1");
  }
}

TEST_CASE("a sweep of two sizes records each cell's config, commit and checkpoint hash, resumes, and stops when told") {
  const fs::path out = fresh_temp_dir("sizes");
  SweepPlan plan = tiny_plan();
  plan.name = "tiny-sizes";
  plan.variants = {{"complexformer-rope", Position::ComplexFormer, CmhaInit::Rope, 0, 0}, {"rope", Position::Rope, CmhaInit::Rope, 0, 0}};
  plan.efficiency.clear();
  plan.eval_lengths = {16, 32};
  plan.long_context_every_task = true;
  plan.seeds = 1;
  plan.n_layers = plan.n_heads = plan.steps = plan.warmup = 0;
  plan.sizes = {{"small", 1, 2, 8, 16, 1, 0}, {"large", 1, 2, 16, 32, 2, 0}};
  plan.tokens_per_parameter = 1;
  plan.max_tokens = 64;
  plan.precision = "bf16";
  plan.throughput_rounds = 0;
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);

  const auto cells = sweep_cells(plan);
  REQUIRE(cells.size() == 4);
  CHECK(cells[0].name == "arith-small-complexformer-rope-s1");
  std::map<std::string, fs::file_time_type> stamps;
  for (const auto& c : cells) {
    const fs::path result = out / "cells" / c.name / "result.json";
    const auto r = nlohmann::json::parse(read_text_file(result.string()));
    CHECK(r["size"] == c.size.name);
    CHECK(r["steps"] == c.size.steps);
    CHECK(r["config"]["model"]["d_model"] == c.size.d_model);
    CHECK(r["config"]["precision"] == "bf16");
    CHECK(r["config"]["seed"] == 1);
    CHECK(r["eval"].size() == 2);
    CHECK(!r["commit"].get<std::string>().empty());
    CHECK(r["checkpoint_hash"] ==
          text_hash(read_text_file((out / "cells" / c.name / r["checkpoint"].get<std::string>() / "model.safetensors").string())));
    stamps[c.name] = fs::last_write_time(result);
  }
  // The second run trains nothing new.
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);
  for (const auto& c : cells) CHECK(fs::last_write_time(out / "cells" / c.name / "result.json") == stamps[c.name]);
  // Stopped at once, a run starts nothing; a cell run again from scratch reproduces its weights and losses bit for bit.
  const auto first = nlohmann::json::parse(read_text_file((out / "cells" / cells[3].name / "result.json").string()));
  fs::remove(out / "cells" / cells[3].name / "result.json");
  run_sweep(plan, out.string(), PHASOR_CLI_PATH, /*stop_after_minutes=*/0);  // --stop-after 0: starts none
  CHECK(!fs::exists(out / "cells" / cells[3].name / "result.json"));
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);
  for (size_t i = 0; i < 3; ++i) CHECK(fs::last_write_time(out / "cells" / cells[i].name / "result.json") == stamps[cells[i].name]);
  const auto again = nlohmann::json::parse(read_text_file((out / "cells" / cells[3].name / "result.json").string()));
  CHECK(again["checkpoint_hash"] == first["checkpoint_hash"]);
  CHECK(again["eval"] == first["eval"]);
  fs::remove_all(out);
}

TEST_CASE("grow_sweep_plan: seeds, lengths, tasks and variants join the folder's plan; another field is refused by name") {
  const SweepPlan there = tiny_plan();
  SweepPlan here = there;
  here.seeds = 5;
  here.eval_lengths = {16, 128, 32};
  here.variants.push_back({"alibi", Position::Alibi, CmhaInit::Rope, 16, 32});
  here.variants.erase(here.variants.begin());  // a subset asked for: the folder's variants stay
  here.jobs = 1;
  const SweepPlan grown = grow_sweep_plan(there, here, "DIR");
  CHECK(grown.seeds == 5);
  CHECK(grown.eval_lengths == std::vector<int64_t>{16, 32, 64, 128});
  REQUIRE(grown.variants.size() == 3);
  CHECK(grown.variants[0].name == "complexformer-rope");
  CHECK(grown.variants[2].name == "alibi");
  CHECK(grown.jobs == 1);
  SweepPlan again = grow_sweep_plan(grown, there, "DIR");  // asking for less continues the whole sweep
  again.jobs = grown.jobs;
  CHECK(to_json(again) == to_json(grown));

  SweepPlan steps = there;
  steps.steps = 5;
  CHECK_THROWS_WITH_AS(grow_sweep_plan(there, steps, "DIR"), "sweep: 'DIR' holds a sweep with another plan: steps is 4 there, 5 here; "
                       "choose another --out, or rerun with the folder's steps", Error);
  SweepPlan length = there;
  length.eval_lengths = {32, 64};
  CHECK_THROWS_WITH_AS(grow_sweep_plan(there, length, "DIR"), doctest::Contains("the training length (eval_lengths[0]) is 16 there, 32 here"), Error);
  SweepPlan width = there;
  width.variants[1].d_model = 32;
  CHECK_THROWS_WITH_AS(grow_sweep_plan(there, width, "DIR"), doctest::Contains("variants 'rope' is {"), Error);
}

TEST_CASE("set_sweep_shape: --d-model, --n-layers, --n-heads, --d-ff and --seq-len override a preset of one size") {
  SweepPlan p = sweep_preset("quick");
  set_sweep_shape(p, {.d_model = 128, .n_layers = 3, .n_heads = 4, .d_ff = 352, .seq_len = 256});
  CHECK(p.n_layers == 3);
  for (const SweepVariant& v : p.variants) CHECK((v.d_model == 128 && v.d_ff == 352));
  REQUIRE(!p.efficiency.empty());
  CHECK(p.efficiency[0].d_model == 96);  // 3/4 of 64 -> 3/4 of 128, whole pairs per head
  CHECK(p.eval_lengths == std::vector<int64_t>{256, 512, 1024, 2048, 4096});
  SweepPlan odd = sweep_preset("quick");
  CHECK_THROWS_WITH_AS(set_sweep_shape(odd, {.d_model = 100}), doctest::Contains("multiple of 2 x n_heads (8)"), Error);
  SweepPlan scale = sweep_preset("scale");
  CHECK_THROWS_WITH_AS(set_sweep_shape(scale, {.n_layers = 2}), doctest::Contains("compares 3 sizes"), Error);
}

TEST_CASE("weighted_line_fit: slope, intercept, their standard errors and chi2 against values worked by hand") {
  // x 0 1 2, y 0 1 3, se 1 1 0.5 (weights 1 1 4): S 6, Sx 9, Sxx 17, Sy 13, Sxy 25, det 6*17 - 81 = 21.
  const LineFit f = weighted_line_fit({0, 1, 2}, {0, 1, 3}, {1, 1, 0.5});
  CHECK(f.slope == doctest::Approx(33.0 / 21));            // (6*25 - 9*13) / 21
  CHECK(f.intercept == doctest::Approx(-4.0 / 21));        // (17*13 - 9*25) / 21
  CHECK(f.slope_se == doctest::Approx(std::sqrt(6.0 / 21)));
  CHECK(f.intercept_se == doctest::Approx(std::sqrt(17.0 / 21)));
  CHECK(f.chi2 == doctest::Approx(4.0 / 21));              // residuals 4/21, -8/21, 1/21 over se 1, 1, 0.5
  CHECK(f.points == 3);
  CHECK(f.slope_distinguishable_from_zero());              // 1.571 > 2 x 0.535
  CHECK(!weighted_line_fit({0, 1}, {0, 1}, {1, 1}).slope_distinguishable_from_zero());  // 1 against 2 x 1.414
  CHECK_THROWS_WITH_AS(weighted_line_fit({1, 1}, {0, 1}, {1, 1}), doctest::Contains("two distinct x"), Error);
  CHECK_THROWS_WITH_AS(weighted_line_fit({0, 1}, {0, 1}, {1, 0}), doctest::Contains("positive"), Error);
  CHECK_THROWS_WITH_AS(weighted_line_fit({0, 1}, {0}, {1, 1}), doctest::Contains("one of each"), Error);
}

TEST_CASE("paired_difference: the per-seed differences' mean, standard error and 95% interval against a hand computation") {
  // Seeds 1-4 of both (in another order for the reference), seed 5 of the variant only: it has no pair.
  SeedStats variant, reference;
  for (auto [seed, value] : std::vector<std::pair<int64_t, double>>{{1, 1.0}, {2, 1.2}, {3, 1.1}, {4, 1.5}, {5, 9.0}}) variant.add(seed, value);
  for (auto [seed, value] : std::vector<std::pair<int64_t, double>>{{4, 1.2}, {3, 1.05}, {2, 1.0}, {1, 0.9}}) reference.add(seed, value);
  // Differences 0.1, 0.2, 0.05, 0.3: mean 0.1625, squared deviations summing to 0.036875, sd sqrt(0.036875 / 3) =
  // 0.110868, se sd / 2 = 0.0554339; t(3 dof) = 3.1824, so the interval is 0.1625 +- 0.176413 = [-0.0139, +0.3389].
  const std::optional<PairedDifference> d = paired_difference(variant, reference);
  REQUIRE(d.has_value());
  CHECK(d->pairs == 4);
  CHECK(d->mean == doctest::Approx(0.1625));
  CHECK(d->se == doctest::Approx(std::sqrt(0.036875 / 3) / 2));
  CHECK(d->half_width == doctest::Approx(3.1824 * std::sqrt(0.036875 / 3) / 2));
  CHECK(!d->excludes_zero());
  CHECK(d->format() == "+0.1625 ± 0.0554 [-0.0139, +0.3389]");
  // The unpaired view of the same numbers (the seeds taken as independent) would differ: what the seeds share cancels here.
  reference.values[0] = 1.4;  // seed 4's reference: differences 0.1, 0.2, 0.05, 0.1 -> 0.1125 +- 3.1824 x 0.0315, above 0
  CHECK(paired_difference(variant, reference)->excludes_zero());
  // One pair: a mean without an interval; no pair, or values without seeds: none.
  SeedStats one, other, unseeded;
  one.add(7, 2.0), other.add(7, 1.5), unseeded.values = {1.0, 2.0};
  CHECK(paired_difference(one, other)->format() == "+0.5000 (n=1)");
  CHECK(!paired_difference(one, reference).has_value());
  CHECK(!paired_difference(unseeded, reference).has_value());
  // The t quantiles: the table's ends, and the expansion past it within 1e-4 of t(40) = 2.0211, t(120) = 1.9799.
  CHECK(t_quantile_975(1) == doctest::Approx(12.7062));
  CHECK(t_quantile_975(30) == doctest::Approx(2.0423));
  CHECK(t_quantile_975(40) == doctest::Approx(2.0211).epsilon(5e-5));
  CHECK(t_quantile_975(120) == doctest::Approx(1.9799).epsilon(5e-5));
  CHECK_THROWS_AS(t_quantile_975(0), Error);
}

TEST_CASE("the scale report: means, standard errors, gaps and their fit from synthetic results, and which cells are done") {
  const fs::path out = fresh_temp_dir("scale_report");
  SweepPlan plan = sweep_preset("scale");
  choose_sweep_tasks(plan, {}, {}, {"complexformer-paper", "rope"});
  plan.seeds = 2;
  fs::create_directories(out / "cells");
  write_bytes(out / "plan.json", to_json(plan).dump(2));
  // Parameters 1e5, 1e6, 1e7 (log10: 5, 6, 7). Two seeds m - d and m + d have
  // mean m and standard error exactly d. rope: 2.1 + d, 2.1 - d (seeds 1, 2) at
  // every size; complexformer-paper: 2.1 + 0.1 i - d, 2.1 + 0.1 i + d at size
  // i, so the paired differences are 0.1 i -+ 2d: the gap is 0, 0.1, 0.2 +- 2d
  // (95% interval +- 12.7062 x 2d, t with 1 dof), a slope of 0.1 per decade
  // with standard error 2d / sqrt(Sxx = 2) = d sqrt(2). kjv: d = 0.1 (slope
  // 0.1 +- 0.1414, not distinguishable); code: d = 0.01 (0.1 +- 0.0141, distinguishable).
  for (const SweepCell& c : sweep_cells(plan)) {
    const size_t i = c.size.name == "117k" ? 0 : c.size.name == "837k" ? 1 : 2;
    const double d = c.task == "kjv" ? 0.1 : 0.01;
    const double mean = 2.1 + (c.variant.name == "rope" ? 0.0 : 0.1 * static_cast<double>(i));
    const double noise = (c.seed == 1 ? -d : d) * (c.variant.name == "rope" ? -1 : 1);
    const double loss = mean + noise;
    nlohmann::json eval;
    for (int64_t l : plan.eval_lengths) eval[std::to_string(l)] = {{"loss", loss + static_cast<double>(l) / 1e4}};
    write_bytes(out / "cells" / c.name / "result.json",
                nlohmann::json{{"eval", eval}, {"parameters", std::pow(10.0, 5.0 + static_cast<double>(i))}, {"train_seconds", 10.0 * (1.0 + i)}}.dump());
  }
  write_bytes(out / "throughput.json", R"({"117k": {"rope": [20480, 10240, 40960], "complexformer-paper": [10240]}})");
  write_sweep_report(out.string());
  std::string report = read_text_file((out / "report.md").string());
  CHECK(report.find("All 24 cells done.") != std::string::npos);
  CHECK(report.find("| 837k | rope | 1000000 | 2.1128 ± 0.1000 | 2.1512 ± 0.1000 | 2.3048 ± 0.1000 |") != std::string::npos);
  CHECK(report.find("| code | 3.3M | 10000000 | 128 | +0.2000 ± 0.0200 [-0.0541, +0.4541] |") != std::string::npos);
  CHECK(report.find("| kjv | complexformer-paper | 3 | +0.1000 ± 0.1414 | 0.00 (1 dof) | not distinguishable from zero |") != std::string::npos);
  CHECK(report.find("| code | complexformer-paper | 3 | +0.1000 ± 0.0141 | 0.00 (1 dof) | **distinguishable from zero** |") != std::string::npos);
  CHECK(report.find("| 117k | 200.0 (2.00x) | 100.0 (1.00x) |") != std::string::npos);  // 2048 tokens a step at 10240 and 20480 tokens/s
  CHECK(report.find("| 117k | 2 | 4 | 64 | 176 | 117056 | 1144 | 57 | 2342912 | 20.0 | 10 s | 8 / 8 |") != std::string::npos);
  const std::string chart = read_text_file((out / "gap_code.svg").string());
  CHECK(count_of(chart, "class=\"error-bar\"") == 3);
  CHECK(count_of(chart, "<circle") == 3);
  CHECK(chart.find(">1M</text>") != std::string::npos);

  // Partial: a missing cell is named, and a size with one seed left drops out of the fit.
  fs::remove(out / "cells" / "kjv-3.3M-rope-s2" / "result.json");
  fs::remove(out / "throughput.json");
  write_sweep_report(out.string());
  report = read_text_file((out / "report.md").string());
  CHECK(report.find("**23 of 24 cells done**") != std::string::npos);  // two points, 0 and 0.1 +- 0.2: slope se 0.2 sqrt(2)
  CHECK(report.find("`kjv-3.3M-rope-s2`") != std::string::npos);
  CHECK(report.find("| 3.3M | rope | 10000000 | 2.2128 ± 0.0000 (n=1) |") != std::string::npos);  // seed 1: 2.1 + 0.1 + 128 / 1e4
  CHECK(report.find("| kjv | complexformer-paper | 2 | +0.1000 ± 0.2828 | – (2 points) |") != std::string::npos);
  // That size's gaps have one pair of seeds: no standard error, and no point in the plot (seed 1: 0.2 - 2 x 0.1).
  CHECK(report.find("| kjv | 3.3M | 10000000 | 128 | +0.0000 (n=1) |") != std::string::npos);
  CHECK(count_of(read_text_file((out / "gap_kjv.svg").string()), "<circle") == 2);
  CHECK(report.find("Not measured yet") != std::string::npos);
  fs::remove_all(out);
}

namespace {

Cli phasor_cli(const std::string& args) { return run_shell(phasor_command() + " " + args, scratch_root("sweep", true)); }

// `phasor <args>` started in the background, its stderr in err_file.
pid_t start_cli(const std::vector<std::string>& args_in, const fs::path& err_file) {
  std::vector<std::string> args = args_in;
  std::string program = PHASOR_CLI_PATH;
  std::vector<char*> argv{program.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

// The pids of the processes whose command line holds `needle`.
std::vector<pid_t> processes_with(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Waits until `pred` holds or `seconds` pass; whether it held.
template <class Pred>
bool wait_for(Pred pred, int seconds) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < give_up) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// A sweep whose one cell trains for a long time, on the CLI, in the background.
pid_t start_long_sweep(const fs::path& out) {
  return start_cli({"sweep", "--preset", "quick", "--out", out.string(), "--tasks", "arith", "--variants", "rope", "--seeds", "1",
                    "--steps", "100000000", "--jobs", "1", "--throughput-rounds", "0"},
                   out.parent_path() / (out.filename().string() + ".stderr"));
}

}  // namespace

TEST_CASE("one sweep folder, one sweep: a second sweep or a hand-started cell is refused; a dead sweep's lock is taken over") {
  const fs::path out = fresh_temp_dir("sweep_lock");
  const pid_t sweep = start_long_sweep(out);
  REQUIRE(wait_for([&] { return !processes_with(out.string() + " --cell").empty(); }, 120));
  const Cli second = phasor_cli("sweep --preset quick --out " + quote(out) + " --tasks arith --variants rope --seeds 1 --steps 100000000 "
                                "--jobs 1 --throughput-rounds 0");
  CHECK(second.status != 0);
  CHECK_MESSAGE(second.err.find("is in use by another sweep (pid " + std::to_string(sweep) + ")") != std::string::npos, second.err);
  const Cli cell = phasor_cli("sweep --out " + quote(out) + " --cell arith-rope-s1");
  CHECK(cell.status != 0);
  CHECK_MESSAGE(cell.err.find("is in use by another sweep") != std::string::npos, cell.err);
  ::kill(sweep, SIGKILL);  // dies holding the lock, leaving its pid in the file
  REQUIRE(::waitpid(sweep, nullptr, 0) == sweep);
  // Its cell stops with it (its parent's death sends it SIGTERM), and the next sweep takes the lock over.
  CHECK(wait_for([&] { return processes_with(out.string() + " --cell").empty(); }, 60));
  const Cli again = phasor_cli("sweep --preset quick --out " + quote(out) + " --tasks arith --variants rope --seeds 1 --steps 100000000 "
                               "--jobs 1 --throughput-rounds 0 --stop-after 0");
  CHECK_MESSAGE(again.status == 0, again.err);
  fs::remove_all(out);
}

TEST_CASE("SIGTERM, SIGINT or SIGHUP to a sweep stops its running cells too: none is left behind with parent 1") {
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
    CAPTURE(sig);
    const fs::path out = fresh_temp_dir("sweep_stop_" + std::to_string(sig));
    const pid_t sweep = start_long_sweep(out);
    REQUIRE(wait_for([&] { return !processes_with(out.string() + " --cell").empty(); }, 120));
    ::kill(sweep, sig);
    int status = 0;
    REQUIRE(::waitpid(sweep, &status, 0) == sweep);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) != 0));
    const std::string err = read_text_file((out.parent_path() / (out.filename().string() + ".stderr")).string());
    CHECK_MESSAGE(err.find("sweep: stopped by signal " + std::to_string(sig)) != std::string::npos, err);
    CHECK(processes_with(out.string() + " --cell").empty());  // already gone: the sweep waited for them
    fs::remove_all(out);
  }
}

TEST_CASE("a tampered plan.json, result.json or throughput.json: every field range-checked with its flag's limits, one line naming the file and field") {
  const fs::path out = fresh_temp_dir("tampered");
  fs::create_directories(out / "cells");
  SweepPlan plan = sweep_preset("quick");
  choose_sweep_tasks(plan, {"arith"}, {}, {"rope"});
  plan.seeds = 1;
  const nlohmann::json good = to_json(plan);
  const std::string plan_file = (out / "plan.json").string();
  const auto check_one_line = [](const std::function<void()>& read, const std::string& expected) {
    try {
      read();
      FAIL("not refused; expected: ", expected);
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
      CHECK(message.find('\n') == std::string::npos);
    }
  };
  const auto refused = [&](const std::function<void(nlohmann::json&)>& change, const std::string& expected) {
    nlohmann::json j = good;
    change(j);
    write_bytes(out / "plan.json", j.dump(2));
    check_one_line([&] { read_sweep_plan(out.string()); }, "sweep: '" + plan_file + "': " + expected);
  };
  // The issue's two: a zero length (SIGFPE in the cell: eval_tokens / 0) and a billion seeds (report-only allocated without bound).
  refused([](nlohmann::json& j) { j["eval_lengths"] = {128, 0}; }, "eval_lengths[1] must be an integer from 1 to 1048576, got 0");
  refused([](nlohmann::json& j) { j["seeds"] = 1'000'000'000; }, "seeds must be an integer from 1 to 100, got 1000000000");
  nlohmann::json billion = good;
  billion["seeds"] = 1'000'000'000;
  write_bytes(out / "plan.json", billion.dump(2));
  check_one_line([&] { write_sweep_report(out.string()); }, "seeds must be an integer from 1 to 100");  // sweep --report-only
  refused([](nlohmann::json& j) { j["seeds"] = 1e9; }, "seeds must be an integer");
  refused([](nlohmann::json& j) { j["seeds"] = "3"; }, "seeds must be an integer from 1 to 100, got \"3\"");
  refused([](nlohmann::json& j) { j["jobs"] = 0; }, "jobs must be an integer from 1 to 256");
  refused([](nlohmann::json& j) { j["jobs"] = 1u << 31; }, "jobs must be an integer from 1 to 256");
  refused([](nlohmann::json& j) { j["steps"] = 0; }, "steps must be an integer from 1 to 1000000000000");
  refused([](nlohmann::json& j) { j["steps"] = 18446744073709551615u; }, "steps must be an integer");
  refused([](nlohmann::json& j) { j["eval_tokens"] = 0; }, "eval_tokens must be an integer from 1 to 2147483648");
  refused([](nlohmann::json& j) { j["arith_problems"] = -1; }, "arith_problems must be an integer from 0 to 100000");
  refused([](nlohmann::json& j) { j["throughput_rounds"] = 101; }, "throughput_rounds must be an integer from 0 to 100");
  refused([](nlohmann::json& j) { j["threads_per_job"] = 5000; }, "threads_per_job must be an integer from 0 to 1024");
  refused([](nlohmann::json& j) { j["batch"] = 0; }, "batch must be an integer from 1");
  refused([](nlohmann::json& j) { j["batch"] = int64_t{1} << 40; }, "batch 1099511627776 x eval_lengths[0] 128 is more than 2^31 tokens per step");
  refused([](nlohmann::json& j) { j["lr"] = nullptr; }, "lr must be a number from 0 to 1, got null");
  refused([](nlohmann::json& j) { j["lr"] = 0; }, "lr must be above 0");
  refused([](nlohmann::json& j) { j["min_lr"] = 0.5; }, "min_lr must be a number from 0 to");
  refused([](nlohmann::json& j) { j["device"] = "tpu"; }, "device must be cpu or cuda");
  refused([](nlohmann::json& j) { j["precision"] = "fp8"; }, "precision must be float32 or bf16");
  refused([](nlohmann::json& j) { j["tasks"] = {"../../etc"}; }, "task '../../etc' is neither a built-in corpus");
  refused([](nlohmann::json& j) { j["variants"][0]["d_model"] = -5; }, "variants[0].d_model must be an integer from 1");
  refused([](nlohmann::json& j) { j["variants"][0]["name"] = std::string("a\nb"); }, "variants[0].name must be a non-empty string without control bytes");
  refused([](nlohmann::json& j) { j.erase("warmup"); }, "warmup is missing");
  write_bytes(out / "plan.json", "[1, 2]");
  check_one_line([&] { read_sweep_plan(out.string()); }, "sweep: '" + plan_file + "' must hold a JSON object");

  // result.json: a good one reads; each tampered field is refused by the report.
  write_bytes(out / "plan.json", good.dump(2));
  const std::vector<SweepCell> cells = sweep_cells(plan);
  REQUIRE(cells.size() == 1);
  const fs::path cell_dir = out / "cells" / cells[0].name;
  write_bytes(cell_dir / "log.jsonl", "{\"step\": 1, \"loss\": 2.0}\n");
  nlohmann::json eval;
  for (int64_t l : plan.eval_lengths) eval[std::to_string(l)] = {{"loss", 1.5}};
  const nlohmann::json result = {{"eval", eval}, {"parameters", 1000}, {"train_seconds", 10.0}, {"tokens_trained", 5000}, {"exact_match", 0.5}};
  write_bytes(cell_dir / "result.json", result.dump());
  REQUIRE_NOTHROW(write_sweep_report(out.string()));
  const std::string result_file = (cell_dir / "result.json").string();
  const auto result_refused = [&](const std::function<void(nlohmann::json&)>& change, const std::string& expected) {
    nlohmann::json j = result;
    change(j);
    write_bytes(cell_dir / "result.json", j.dump());
    check_one_line([&] { write_sweep_report(out.string()); }, "sweep: '" + result_file + "': " + expected);
  };
  const std::string first = std::to_string(plan.eval_lengths.front());
  result_refused([&](nlohmann::json& j) { j["eval"][first]["loss"] = "low"; }, "eval." + first + ".loss must be a number from 0 to 1e+06, got \"low\"");
  result_refused([&](nlohmann::json& j) { j["eval"][first]["loss"] = -1; }, "eval." + first + ".loss must be a number");
  result_refused([&](nlohmann::json& j) { j["eval"].erase(first); }, "eval." + first + " is missing");
  result_refused([](nlohmann::json& j) { j["parameters"] = -1; }, "parameters must be a number from 1 to");
  result_refused([](nlohmann::json& j) { j["train_seconds"] = nullptr; }, "train_seconds must be a number from 0 to");
  result_refused([](nlohmann::json& j) { j["exact_match"] = 2; }, "exact_match must be a number from 0 to 1");
  result_refused([](nlohmann::json& j) { j["tokens_trained"] = -5; }, "tokens_trained must be a number");
  result_refused([](nlohmann::json& j) { j.erase("parameters"); }, "parameters is missing");
  write_bytes(cell_dir / "result.json", result.dump());

  // throughput.json: lists of 1 to 100 positive rates.
  const std::string throughput_file = (out / "throughput.json").string();
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"rope": []})", "rope must be a list of 1 to 100 rates"},
           {R"({"rope": [100, -3]})", "rope[1] must be a number from"},
           {R"({"rope": "fast"})", "rope must be a list of 1 to 100 rates"}}) {
    write_bytes(out / "throughput.json", text);
    check_one_line([&] { write_sweep_report(out.string()); }, "sweep: '" + throughput_file + "': " + expected);
  }
  write_bytes(out / "throughput.json", R"({"rope": [100, 200]})");
  CHECK_NOTHROW(write_sweep_report(out.string()));
  fs::remove_all(out);
}

TEST_CASE("the length preset: every variant on the four tasks, rope also with PI and YaRN, and its plan reads back") {
  const SweepPlan p = sweep_preset("length");
  std::vector<std::string> names;
  for (const SweepVariant& v : p.variants) names.push_back(v.name);
  CHECK(names == std::vector<std::string>{"complexformer-rope", "complexformer-paper", "complexformer-seed", "rope", "xpos", "alibi", "pope",
                                          "carope", "none"});
  CHECK(p.tasks == std::vector<std::string>{"copy", "flipflop", "passkey", "recall"});  // the quickest first
  CHECK(p.eval_variants == std::vector<std::string>{"rope+pi", "rope+yarn"});
  CHECK(p.eval_lengths == std::vector<int64_t>{128, 256, 512, 1024, 2048});
  CHECK(p.seeds == 3);
  CHECK(sweep_cells(p).size() == 4 * 9 * 3);
  CHECK(to_json(sweep_plan_from_json(to_json(p))) == to_json(p));
  CHECK(to_json(p).at("task_examples") == 100);
  CHECK(!to_json(sweep_preset("quick")).contains("task_examples"));  // earlier plans write what they wrote
  CHECK(p.scalings_of(p.variants[3]) == std::vector<std::string>{"pi", "yarn"});
  CHECK(p.scalings_of(p.variants[0]).empty());
  // Steps per task: the ones learned quickly get fewer.
  for (const SweepCell& c : sweep_cells(p)) CHECK(c.size.steps == (c.task == "copy" ? 2000 : c.task == "flipflop" ? 4000 : c.task == "recall" ? 6000 : 8000));
  SweepPlan some = p;
  choose_sweep_tasks(some, {"passkey", "copy"}, {}, {});
  CHECK(some.task_steps == std::map<std::string, int64_t>{{"copy", 2000}});  // recall's and flipflop's dropped with their tasks
  CHECK(to_json(sweep_plan_from_json(to_json(some))) == to_json(some));
  set_sweep_steps(some, 50);  // --steps: every cell
  for (const SweepCell& c : sweep_cells(some)) CHECK(c.size.steps == 50);
  nlohmann::json j = to_json(p);
  j["task_steps"]["kjv"] = 10;
  CHECK_THROWS_WITH_AS(sweep_plan_from_json(j, "plan.json"), doctest::Contains("task_steps names 'kjv', which is not one of the plan's tasks"), Error);
  j = to_json(p);
  j["task_steps"]["copy"] = 0;
  CHECK_THROWS_WITH_AS(sweep_plan_from_json(j, "plan.json"), doctest::Contains("task_steps.copy must be an integer from 1"), Error);
}

TEST_CASE("--variants names evaluation-time entries such as rope+ntk, and the unknown-name error lists them") {
  SweepPlan p = sweep_preset("length");
  choose_sweep_tasks(p, {}, {}, {"rope+ntk", "alibi"});
  REQUIRE(p.variants.size() == 2);
  CHECK(p.variants[0].name == "rope");  // trained for its entry
  CHECK(p.variants[1].name == "alibi");
  CHECK(p.eval_variants == std::vector<std::string>{"rope+ntk"});
  CHECK(p.scalings_of(p.variants[0]) == std::vector<std::string>{"ntk"});
  CHECK(to_json(sweep_plan_from_json(to_json(p))) == to_json(p));

  SweepPlan only_rope = sweep_preset("length");
  choose_sweep_tasks(only_rope, {}, {}, {"rope"});  // the preset's entries of the variants named stay
  CHECK(only_rope.eval_variants == std::vector<std::string>{"rope+pi", "rope+yarn"});
  SweepPlan no_rope = sweep_preset("length");
  choose_sweep_tasks(no_rope, {}, {}, {"alibi"});
  CHECK(no_rope.eval_variants.empty());

  SweepPlan bad = sweep_preset("length");
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(bad, {}, {}, {"alibi+yarn"}),
                       doctest::Contains("the preset 'length' has no variant 'alibi+yarn' (its variants: complexformer-rope, "), Error);
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(bad, {}, {}, {"carope+yarn"}), doctest::Contains("pope+yarn, carope+pi)"), Error);  // carope: PI only
  CHECK_THROWS_WITH_AS(choose_sweep_tasks(bad, {}, {}, {"rope+yarn2"}), doctest::Contains("rope+ntk, rope+yarn"), Error);

  // The rivals preset's blanket extensions: naming an entry keeps that entry alone.
  SweepPlan rivals = sweep_preset("rivals");
  choose_sweep_tasks(rivals, {}, {}, {"rope+pi"});
  CHECK(rivals.eval_scalings.empty());
  CHECK(rivals.eval_variants == std::vector<std::string>{"rope+pi"});
  SweepPlan rivals_rope = sweep_preset("rivals");
  choose_sweep_tasks(rivals_rope, {}, {}, {"rope"});
  CHECK(rivals_rope.eval_scalings == std::vector<std::string>{"pi", "yarn"});  // as before

  // A tampered plan: an entry of a variant it lacks.
  nlohmann::json j = to_json(sweep_preset("length"));
  j["eval_variants"] = {"learned+pi"};
  CHECK_THROWS_WITH_AS(sweep_plan_from_json(j, "plan.json"), doctest::Contains("eval_variants: 'learned+pi' is not an evaluation-time entry"), Error);
  j = to_json(sweep_preset("length"));
  j["task_examples"] = 0;
  CHECK_THROWS_WITH_AS(sweep_plan_from_json(j, "plan.json"), doctest::Contains("task_examples must be an integer from 1 to 1000000, got 0"), Error);
}

TEST_CASE("a tiny length sweep scores its tasks by exact match and reports accuracy against length and passkey's depth maps") {
  const fs::path out = fresh_temp_dir("length");
  SweepPlan p = sweep_preset("length");
  p.name = "tiny-length";
  p.tasks = {"passkey", "flipflop"};
  p.variants = {{"rope", Position::Rope, CmhaInit::Rope, 16, 32}, {"alibi", Position::Alibi, CmhaInit::Rope, 16, 32}};
  p.eval_variants = {"rope+yarn"};
  p.eval_lengths = {110, 220};
  p.seeds = 2;
  p.n_layers = 1;
  p.n_heads = 2;
  p.steps = 3;
  p.task_steps = {{"flipflop", 4}};
  p.batch = 2;
  p.warmup = 1;
  p.task_examples = 10;
  run_sweep(p, out.string(), PHASOR_CLI_PATH);
  write_sweep_report(out.string());

  const auto rope = nlohmann::json::parse(read_text_file((out / "cells" / "passkey-rope-s1" / "result.json").string()));
  CHECK(rope["eval"].size() == 3);  // 110, 220 and 220+yarn
  CHECK(rope["eval"]["220+yarn"]["factor"] == 2.0);
  CHECK(rope["eval"]["110"]["examples"] == 10);
  CHECK(rope["eval"]["110"]["depths"].size() == 5);
  CHECK(rope["eval"]["110"]["loss"] == rope["eval"]["110"]["answer_log_loss"]);
  const auto alibi = nlohmann::json::parse(read_text_file((out / "cells" / "flipflop-alibi-s2" / "result.json").string()));
  CHECK(alibi["eval"].size() == 2);
  CHECK(alibi["steps"] == 4);
  CHECK(rope["steps"] == 3);
  CHECK(!alibi["eval"]["220"].contains("depths"));
  CHECK(alibi["eval"]["220"]["accuracy"].get<double>() >= 0);

  const std::string report = read_text_file((out / "report.md").string());
  CHECK(report.find("# Length generalisation report") != std::string::npos);
  CHECK(report.find("trained 3 (flipflop 4) steps of 2 x 110 bytes") != std::string::npos);
  CHECK(count_of(report, "| rope+yarn |") == 2);  // one table per task
  CHECK(count_of(report, "| alibi |") == 2);
  CHECK(std::regex_search(report, std::regex(R"(\| rope \| \d\.\d\d ± \d\.\d\d \|)")));
  CHECK(report.find("missing") == std::string::npos);
  CHECK(fs::exists(out / "length_passkey.svg"));
  CHECK(fs::exists(out / "length_flipflop.svg"));
  const std::string map = read_text_file((out / "passkey_depth_rope_yarn.svg").string());
  CHECK(count_of(map, "<rect") == 5 * 2 + 1);  // depths x lengths, and the background
  CHECK(fs::exists(out / "passkey_depth_alibi.svg"));

  // One seed of a cell gone: its points say n=1 and carry no error bar.
  fs::remove(out / "cells" / "flipflop-rope-s2" / "result.json");
  write_sweep_report(out.string());
  const std::string partial = read_text_file((out / "report.md").string());
  CHECK(partial.find("(n=1)") != std::string::npos);
  CHECK(partial.find("1 missing") != std::string::npos);
}
