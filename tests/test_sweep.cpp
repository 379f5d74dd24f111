// `phasor sweep` (app/sweep.h): a tiny plan end to end through the CLI's
// child processes, then resuming, refusing another plan, and the report.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "app/sweep.h"
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
  // A row per variant in the main, difference, long-context, efficiency and overhead tables (rope: not in the difference one).
  CHECK(count_of(report, "| complexformer-rope |") == 5);
  CHECK(count_of(report, "| rope |") == 4);
  CHECK(report.find("| complexformer-small |") != std::string::npos);
  CHECK(std::regex_search(report, std::regex(R"(\| complexformer-rope \| \d+ \| \d\.\d{4} ± \d\.\d{4} \|)")));
  CHECK(report.find("(n=1)") == std::string::npos);
  CHECK(report.find("missing") == std::string::npos);
  const std::string chart = read_text_file((out / "long_context.svg").string());
  CHECK(count_of(chart, "class=\"series\"") == 2);
  CHECK(count_of(chart, "<circle") == 6);  // 2 variants x 3 lengths
  CHECK(fs::exists(out / "loss_curves.svg"));

  // Rerunning does nothing; losing one result reruns that cell only.
  const auto stamp = fs::last_write_time(out / "cells" / cells[0].name / "result.json");
  fs::remove(out / "cells" / cells[1].name / "result.json");
  run_sweep(plan, out.string(), PHASOR_CLI_PATH);
  CHECK(fs::last_write_time(out / "cells" / cells[0].name / "result.json") == stamp);
  CHECK(fs::exists(out / "cells" / cells[1].name / "result.json"));

  // A different plan in the same folder is refused; a missing result shows in the report.
  SweepPlan other = plan;
  other.steps = 5;
  CHECK_THROWS_WITH_AS(run_sweep(other, out.string(), PHASOR_CLI_PATH), doctest::Contains("holds a sweep with another plan"), Error);
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
