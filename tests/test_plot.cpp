// Loss-curve plots of training runs, and the per-head statistics charts of --log-heads runs (app/plot.h).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/plot.h"
#include "models/data/corpus.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

fs::path fresh_temp_dir(const std::string& name) { return fresh_folder(scratch_root("plot", /*remove_at_exit=*/true) / name); }

// A run folder whose log looks like the trainer's: a decaying train loss,
// a validation line every `every` steps, and a key the plot must ignore.
fs::path write_fake_run(const fs::path& parent, const std::string& name, double floor, int every) {
  const fs::path dir = parent / name;
  fs::create_directories(dir);
  std::ofstream log(dir / "log.jsonl");
  log << "{\"config\": {\"d_model\": 64}}\n";
  for (int step = 0; step <= 400; step += 10) {
    const double loss = floor + 4.0 * std::exp(-step / 80.0);
    log << "{\"step\": " << step << ", \"loss\": " << loss << ", \"lr\": 0.001, \"tokens_per_s\": 12345.6}\n";
    if (step % every == 0) log << "{\"step\": " << step << ", \"val_loss\": " << loss + 0.1 << "}\n";
  }
  return dir;
}

}  // namespace

TEST_CASE("plot_runs draws a train and a validation series per run") {
  const fs::path dir = fresh_temp_dir("plot");
  const fs::path a = write_fake_run(dir, "complexformer", 1.2, 50);
  const fs::path b = write_fake_run(dir, "rope", 1.4, 100);
  const std::string out = (dir / "loss.svg").string();
  plot_runs({a.string(), b.string() + "/"}, out);

  const std::string svg = read_text_file(out);
  CHECK(svg.starts_with("<svg"));
  CHECK(svg.find_last_not_of(" \n") == svg.rfind("</svg>") + 5);  // nothing after the closing tag
  CHECK(count_of(svg, "<svg") == 1);
  CHECK(svg.find(">complexformer</text>") != std::string::npos);
  CHECK(svg.find(">rope</text>") != std::string::npos);
  CHECK(count_of(svg, "<polyline class=\"train\"") == 2);
  CHECK(count_of(svg, "<polyline class=\"validation\"") == 2);
  CHECK(svg.find("loss (nats/token)") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(count_of(svg, "<text") == count_of(svg, "</text>"));
  CHECK(count_of(svg, "<g") == count_of(svg, "</g>"));
  CHECK(svg.find("nan") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("read_run_log keeps the latest value of a repeated step and skips null losses") {
  const fs::path dir = fresh_temp_dir("plot_resume") / "run";
  fs::create_directories(dir);
  std::ofstream(dir / "log.jsonl") << "{\"step\": 0, \"loss\": 5.0}\n{\"step\": 10, \"loss\": 4.0}\n\n"
                                   << "{\"step\": 20, \"loss\": null}\n"
                                   << "{\"step\": 10, \"loss\": 3.5}\n{\"step\": 10, \"val_loss\": 3.9}\n";
  const RunLog run = read_run_log(dir.string());
  CHECK(run.name == "run");
  REQUIRE(run.train.size() == 2);
  CHECK(run.train[1].step == 10);
  CHECK(run.train[1].loss == 3.5);
  REQUIRE(run.validation.size() == 1);
  CHECK(run.validation[0].loss == 3.9);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("plot errors name the missing folder, the empty log and the malformed line") {
  const fs::path dir = fresh_temp_dir("plot_errors");
  const std::string out = (dir / "out.svg").string();
  CHECK_THROWS_WITH_AS(plot_runs({(dir / "missing").string()}, out), doctest::Contains("does not exist"), Error);

  fs::create_directories(dir / "no_log");
  CHECK_THROWS_WITH_AS(plot_runs({(dir / "no_log").string()}, out), doctest::Contains("log.jsonl' not found"), Error);

  fs::create_directories(dir / "no_data");
  std::ofstream(dir / "no_data" / "log.jsonl") << "{\"step\": 1, \"lr\": 0.1}\n";
  CHECK_THROWS_WITH_AS(plot_runs({(dir / "no_data").string()}, out), doctest::Contains("has no loss or val_loss"),
                       Error);

  fs::create_directories(dir / "broken");
  // A malformed line before other lines is an error (only the last one may be a write cut short).
  std::ofstream(dir / "broken" / "log.jsonl") << "{\"step\": 1, \"loss\": 2.0}\n{\"step\": 2, \"loss\": \n{\"step\": 3, \"loss\": 1.0}\n";
  CHECK_THROWS_WITH_AS(plot_runs({(dir / "broken").string()}, out),
                       doctest::Contains("broken/log.jsonl:2: malformed JSON"), Error);

  std::ofstream(dir / "broken" / "log.jsonl") << "{\"loss\": 2.0}\n";
  CHECK_THROWS_WITH_AS(plot_runs({(dir / "broken").string()}, out), doctest::Contains(":1: a loss line needs"), Error);
  CHECK_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

namespace {

// A log as `train --log-heads` writes it: every 10 steps, per layer, one
// number per head for each statistic; the gradient norms fall over training.
fs::path write_fake_head_run(const fs::path& parent, int layers, int heads, bool with_grad_norms = true) {
  const fs::path dir = parent / "cmha";
  fs::create_directories(dir);
  std::ofstream log(dir / "log.jsonl");
  for (int step = 10; step <= 100; step += 10) {
    nlohmann::json per_layer = nlohmann::json::array();
    for (int l = 0; l < layers; ++l) {
      nlohmann::json stats;
      for (const char* key : {"delta_mean", "phase_bias_mean", "beta", "q_grad_r_norm", "q_grad_phi_norm", "k_grad_r_norm", "k_grad_phi_norm"}) {
        if (!with_grad_norms && std::string(key).ends_with("_norm")) continue;
        std::vector<double> values;
        for (int h = 0; h < heads; ++h) values.push_back(std::string(key).ends_with("_norm") ? 0.5 / step + h * 1e-3 : 1.0 + 0.01 * step * (h - l));
        stats[key] = values;
      }
      per_layer.push_back(stats);
    }
    log << nlohmann::json{{"step", step}, {"loss", 3.0}, {"heads", per_layer}}.dump() << "\n";
    log << "{\"step\": " << step << ", \"val_loss\": 3.1}\n";
  }
  return dir;
}

}  // namespace

TEST_CASE("plot_heads draws one line per layer and head in a panel per statistic") {
  const fs::path dir = fresh_temp_dir("plot_heads");
  const fs::path run = write_fake_head_run(dir, 2, 3);
  const HeadLog log = read_head_log(run.string());
  CHECK(log.layers == 2);
  CHECK(log.heads == 3);
  REQUIRE(log.metrics.size() == 7);
  CHECK(log.metrics[0].key == "delta_mean");
  CHECK(log.metrics[1].key == "beta");
  REQUIRE(log.metrics[0].series.size() == 6);
  CHECK(log.metrics[0].series[5].layer == 1);
  CHECK(log.metrics[0].series[5].head == 2);
  REQUIRE(log.metrics[0].series[5].points.size() == 10);
  CHECK(log.metrics[0].series[5].points[9].loss == doctest::Approx(2.0));  // 1 + 0.01 * 100 * (2 - 1)

  const std::string out = (dir / "heads.svg").string();
  plot_heads(run.string(), out);
  const std::string svg = read_text_file(out);
  CHECK(svg.starts_with("<svg"));
  CHECK(count_of(svg, "<polyline class=\"head\"") == 7 * 2 * 3);
  CHECK(count_of(svg, "data-metric=\"k_grad_phi_norm\" data-layer=\"1\" data-head=\"2\"") == 1);
  CHECK(svg.find("keys: |dL/dphi|") != std::string::npos);
  CHECK(svg.find("log10 norm") != std::string::npos);
  CHECK(svg.find(">head 2</text>") != std::string::npos);
  CHECK(svg.find(">layer 1</text>") != std::string::npos);
  CHECK(count_of(svg, "<text") == count_of(svg, "</text>"));
  CHECK(svg.find("nan") == std::string::npos);

  // An older log without gradient norms: three panels.
  const fs::path older = write_fake_head_run(fresh_temp_dir("plot_heads_old"), 1, 2, false);
  CHECK(count_of(head_statistics_svg(read_head_log(older.string())), "<polyline class=\"head\"") == 3 * 1 * 2);
  fs::remove_all(dir);
  fs::remove_all(older.parent_path());
}

TEST_CASE("plot_heads refuses a log without per-head statistics, and a malformed heads entry") {
  const fs::path dir = fresh_temp_dir("plot_heads_errors");
  const fs::path plain = write_fake_run(dir, "rope", 1.4, 100);
  const std::string out = (dir / "heads.svg").string();
  CHECK_THROWS_WITH_AS(plot_heads(plain.string(), out), doctest::Contains("has no per-head statistics"), Error);

  fs::create_directories(dir / "ragged");
  std::ofstream(dir / "ragged" / "log.jsonl") << "{\"step\": 1, \"heads\": [{\"beta\": [1, 2]}]}\n"
                                              << "{\"step\": 2, \"heads\": [{\"beta\": [1, 2, 3]}]}\n";
  CHECK_THROWS_WITH_AS(plot_heads((dir / "ragged").string(), out), doctest::Contains("log.jsonl:2: layer 0 'beta' has 3 heads"), Error);
  CHECK_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST_CASE("a malformed last line of log.jsonl (a write cut short) is skipped by plot; repair_run_log drops it, completes a whole one") {
  const fs::path dir = fresh_temp_dir("cut_last_line");
  fs::create_directories(dir / "run");
  const fs::path log = dir / "run" / "log.jsonl";
  const std::string whole = "{\"step\": 1, \"loss\": 2.0}\n{\"step\": 2, \"loss\": 1.5}\n";
  for (const std::string& cut : {std::string("{\"step\": 3, \"lo"), std::string("{\"step\": 3, \"loss\": \n"), std::string("\0\xff junk\n", 8)}) {
    CAPTURE(cut);
    std::ofstream(log, std::ios::binary | std::ios::trunc) << whole << cut;
    RunLog run;
    REQUIRE_NOTHROW(run = read_run_log((dir / "run").string()));
    CHECK(run.train.size() == 2);
    const std::string note = repair_run_log(log.string());
    CHECK(note.find("dropped the last line of") != std::string::npos);
    CHECK(note.find(std::to_string(cut.size()) + " bytes") != std::string::npos);
    CHECK(note.find('\n') == std::string::npos);
    CHECK(read_text_file(log.string()) == whole);
  }
  // Whole logs are left as they are; a whole last line without its '\n' gets one; a missing log stays missing.
  CHECK(repair_run_log(log.string()).empty());
  CHECK(read_text_file(log.string()) == whole);
  std::ofstream(log, std::ios::binary | std::ios::trunc) << whole << "{\"step\": 3, \"loss\": 1.0}";
  CHECK(repair_run_log(log.string()).empty());
  CHECK(read_text_file(log.string()) == whole + "{\"step\": 3, \"loss\": 1.0}\n");
  CHECK(repair_run_log((dir / "run" / "absent.jsonl").string()).empty());
  CHECK_FALSE(fs::exists(dir / "run" / "absent.jsonl"));
  // A symlink at the log is refused, not followed (as AppendFile refuses it).
  fs::create_symlink(log, dir / "run" / "link.jsonl");
  CHECK_THROWS_AS(repair_run_log((dir / "run" / "link.jsonl").string()), Error);
  fs::remove_all(dir);
}
