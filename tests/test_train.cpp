// The `phasor` command line, run as a user would: exact resume, eval's JSON
// and its windows, refusals (one line on stderr, a non-zero exit, no partial
// files), info, seeded generation and plotting. Every run uses a tiny model
// and a few KB of text so the whole suite takes seconds.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/model_io.h"
#include "app/train.h"
#include "models/transformer.h"
#include "nn/checkpoint.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path scratch() { return scratch_root("train", /*remove_at_exit=*/true); }

fs::path fresh_dir(const std::string& name) { return fresh_folder(scratch() / name); }

Cli phasor_cli(const std::string& args) { return run_shell(phasor_command() + " " + args, scratch()); }

// A failure as the design asks: non-zero exit, exactly one non-empty line on stderr.
void check_clear_failure(const Cli& r, const std::string& must_mention = "") {
  check_one_line_failure(r, must_mention);
  CHECK_MESSAGE(!r.err.empty(), "stderr is empty");
  CHECK_MESSAGE(r.err.size() > 10, "stderr: ", r.err);
}

const fs::path& data_file() {
  static const fs::path p = write_bytes(scratch() / "data.txt", sample_text(4096));
  return p;
}

// The tiny model and run of every training test; `overrides` replaces flags
// (CLI11 refuses a flag given twice), `extra` adds more.
std::string train_args(const fs::path& run_dir, const std::string& extra, const std::map<std::string, std::string>& overrides = {}) {
  std::map<std::string, std::string> flags{{"--d-model", "32"}, {"--n-layers", "1"}, {"--n-heads", "2"}, {"--d-ff", "64"},
                                           {"--seq-len", "32"}, {"--batch", "4"},    {"--threads", "1"}, {"--log-every", "5"},
                                           {"--data", quote(data_file())}, {"--run-dir", quote(run_dir)}};
  for (const auto& [k, v] : overrides) flags[k] = v;
  std::string args = "train";
  for (const auto& [k, v] : flags) args += " " + k + " " + v;
  return args + " " + extra;
}

ModelConfig tiny_config(Position position) {
  return model_config(position, {.d_model = 32, .n_layers = 1, .n_heads = 2, .d_ff = 64, .max_seq_len = 64});
}

fs::path saved_model(const std::string& name, const ModelConfig& c, uint64_t seed = 1) {
  const fs::path p = scratch() / (name + ".safetensors");
  if (!fs::exists(p)) save_model(p.string(), CausalLM(c, seed));
  return p;
}

}  // namespace

// ============================================================== train and resume

TEST_CASE("resume is exact: 10 steps then --resume to 20 equals 20 steps in one go, bit for bit") {
  // Warm-up covers all 20 steps, so the learning rate of a step does not depend
  // on the total the first run was given.
  const std::string common = "--warmup 20 --seed 3";
  const fs::path whole = fresh_dir("whole") / "run", split = fresh_dir("split") / "run";
  const Cli a = phasor_cli(train_args(whole, common + " --steps 20"));
  REQUIRE_MESSAGE(a.status == 0, a.err);
  CHECK(a.out.find("trained 20 steps") != std::string::npos);
  const Cli b1 = phasor_cli(train_args(split, common + " --steps 10"));
  REQUIRE_MESSAGE(b1.status == 0, b1.err);
  CHECK(latest_folder(split).filename() == "ckpt-00000010");
  const Cli b2 = phasor_cli("train --resume " + quote(split) + " --steps 20");
  REQUIRE_MESSAGE(b2.status == 0, b2.err);

  const fs::path fa = latest_folder(whole), fb = latest_folder(split);
  CHECK(fa.filename() == "ckpt-00000020");
  CHECK(fb.filename() == "ckpt-00000020");
  check_same_tensors(fa / "model.safetensors", fb / "model.safetensors");
  check_same_tensors(fa / "optimizer.safetensors", fb / "optimizer.safetensors");
  const Json sa = Json::parse(read_bytes(fa / "state.json")), sb = Json::parse(read_bytes(fb / "state.json"));
  CHECK(sa.at("step") == 20);
  CHECK(sa.at("step") == sb.at("step"));
  CHECK(sa.at("sampler_offset") == sb.at("sampler_offset"));
  // And training did something: the model moved away from its initialisation.
  const auto trained = load_model((fa / "model.safetensors").string());
  const CausalLM init(trained->config(), 3);
  CHECK(trained->state_dict().at("tok_emb.weight").to_vector<float>() != init.state_dict().at("tok_emb.weight").to_vector<float>());
}

TEST_CASE("resume is exact through the cosine decay when the total stays the same") {
  const fs::path whole = fresh_dir("cosine") / "run";
  const Cli a = phasor_cli(train_args(whole, "--warmup 3 --steps 20 --ckpt-every 10 --seed 5 --lr 1e-2"));
  REQUIRE_MESSAGE(a.status == 0, a.err);
  REQUIRE(fs::exists(whole / "ckpt-00000010" / "state.json"));
  // A second run folder that holds only the step-10 checkpoint of the first.
  const fs::path copy = fresh_dir("cosine_copy") / "run";
  fs::create_directories(copy);
  fs::copy(whole / "ckpt-00000010", copy / "ckpt-00000010", fs::copy_options::recursive);
  write_bytes(copy / "latest", "ckpt-00000010\n");
  const Cli b = phasor_cli("train --resume " + quote(copy));
  REQUIRE_MESSAGE(b.status == 0, b.err);
  CHECK(latest_folder(copy).filename() == "ckpt-00000020");
  check_same_tensors(whole / "ckpt-00000020" / "model.safetensors", copy / "ckpt-00000020" / "model.safetensors");
  check_same_tensors(whole / "ckpt-00000020" / "optimizer.safetensors", copy / "ckpt-00000020" / "optimizer.safetensors");
}

TEST_CASE("a lengthened run schedules its added steps as --extend says, and says which applies") {
  const auto lrs = [](const fs::path& run) {
    std::vector<double> out;
    std::istringstream log(read_bytes(run / "log.jsonl"));
    for (std::string line; std::getline(log, line);)
      if (const Json j = Json::parse(line); j.contains("lr")) out.push_back(j.at("lr").get<double>());
    return out;
  };
  const std::string common = "--warmup 2 --lr 1e-2 --min-lr 1e-3 --eval-every 0";
  std::map<std::string, std::vector<double>> added;
  for (const char* mode : {"stretch", "hold", "restart"}) {
    const fs::path run = fresh_dir(std::string("extend_") + mode) / "run";
    REQUIRE(phasor_cli(train_args(run, common + " --steps 10", {{"--log-every", "1"}})).status == 0);
    const Cli r = phasor_cli("train --resume " + quote(run) + " --steps 16 --extend " + mode);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(r.err.find("resume: 10 -> 16 steps; --extend " + std::string(mode)) == 0);
    const std::vector<double> all = lrs(run);
    REQUIRE(all.size() == 16);
    added[mode] = std::vector<double>(all.begin() + 10, all.end());
    CHECK(Json::parse(read_bytes(run / "config.json")).at("steps") == 16);  // config.json says what the run now is
  }
  // stretch: the schedule of a 16-step run (the lr rises again); hold: min_lr; restart: warm-up, then a new cosine.
  const fs::path one_go = fresh_dir("extend_one_go") / "run";
  REQUIRE(phasor_cli(train_args(one_go, common + " --steps 16", {{"--log-every", "1"}})).status == 0);
  const std::vector<double> whole = lrs(one_go);
  CHECK(added["stretch"] == std::vector<double>(whole.begin() + 10, whole.end()));
  for (double lr : added["hold"]) CHECK(lr == 1e-3);
  CHECK(added["restart"][0] == doctest::Approx(0.5e-2).epsilon(1e-12));  // warm-up step 1 of 2
  CHECK(added["restart"][1] == doctest::Approx(1e-2).epsilon(1e-12));
  CHECK(added["restart"][2] == doctest::Approx(1e-2).epsilon(1e-12));  // the cosine's first step is its peak
  for (size_t i = 3; i < added["restart"].size(); ++i) CHECK(added["restart"][i] < added["restart"][i - 1]);
  CHECK(added["restart"].back() > 1e-3);  // its cosine runs to the new total
  check_clear_failure(phasor_cli(train_args(fresh_dir("extend_fresh") / "run", "--steps 2 --extend hold")), "--extend");
}

TEST_CASE("a run records its text's absolute path, size and hash: it resumes from any folder, --data finds moved text, other text is refused") {
  const fs::path folder = fresh_dir("moving"), run = folder / "run";
  const std::string text = sample_text(4096);
  write_bytes(folder / "corpus.txt", text);
  // A relative --data, given in the run's parent folder.
  const Cli first = run_shell("cd " + quote(folder) + " && " + phasor_command() + " " + train_args(run, "--steps 4", {{"--data", "corpus.txt"}}),
                              scratch());
  REQUIRE_MESSAGE(first.status == 0, first.err);
  const Json config = Json::parse(read_bytes(run / "config.json"));
  CHECK(config.at("data") == fs::absolute(folder / "corpus.txt").lexically_normal().string());
  CHECK(config.at("data_bytes") == static_cast<int64_t>(text.size()));
  CHECK(config.at("data_hash").get<std::string>().starts_with("fnv1a64:"));
  CHECK(config.at("data_hash") == Json::parse(read_bytes(latest_folder(run) / "state.json")).at("options").at("data_hash"));

  // From another folder: the recorded absolute path is found.
  const fs::path elsewhere = fresh_dir("elsewhere");
  const Cli r1 = run_shell("cd " + quote(elsewhere) + " && " + phasor_command() + " train --resume " + quote(run) + " --steps 6", elsewhere);
  REQUIRE_MESSAGE(r1.status == 0, r1.err);
  CHECK(latest_folder(run).filename() == "ckpt-00000006");

  // The text moved: refused until --data says where it is; other text is refused.
  fs::rename(folder / "corpus.txt", folder / "moved.txt");
  check_clear_failure(phasor_cli("train --resume " + quote(run) + " --steps 8"), "give --data with the same text");
  std::string other = text;
  other[100] = other[100] == 'a' ? 'b' : 'a';
  write_bytes(folder / "other.txt", other);
  check_clear_failure(phasor_cli("train --resume " + quote(run) + " --steps 8 --data " + quote(folder / "other.txt")),
                      "is not the text the run trained on");
  CHECK(latest_folder(run).filename() == "ckpt-00000006");  // the refusals changed nothing
  const Cli r2 = phasor_cli("train --resume " + quote(run) + " --steps 8 --data " + quote(folder / "moved.txt"));
  REQUIRE_MESSAGE(r2.status == 0, r2.err);
  CHECK(latest_folder(run).filename() == "ckpt-00000008");
  CHECK(Json::parse(read_bytes(run / "config.json")).at("data") == fs::absolute(folder / "moved.txt").lexically_normal().string());
}

TEST_CASE("--data FOLDER trains on the text of all its files, recorded as the folder") {
  const fs::path folder = fresh_dir("data_folder"), texts = folder / "texts";
  write_bytes(texts / "1.txt", sample_text(3000));
  write_bytes(texts / "2" / "more.txt", sample_text(2000));
  const fs::path run = folder / "run";
  const Cli r = phasor_cli(train_args(run, "--steps 2", {{"--data", quote(texts)}}));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json config = Json::parse(read_bytes(run / "config.json"));
  CHECK(config.at("data") == fs::absolute(texts).lexically_normal().string());
  CHECK(config.at("data_bytes") == static_cast<int64_t>(load_text(texts.string()).size()));
  CHECK(config.at("data_bytes") > 5000);  // both files
}

TEST_CASE("--val-data validates on its own text, all of --data trains, and a resumed run reads the copy in its folder") {
  const fs::path folder = fresh_dir("val_data"), run = folder / "run";
  const std::string validation = sample_text(1500).substr(700);
  write_bytes(folder / "held_out.txt", validation);
  const Cli r = phasor_cli(train_args(run, "--steps 4 --eval-every 2 --val-data " + quote(folder / "held_out.txt")));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json config = Json::parse(read_bytes(run / "config.json"));
  CHECK(config.at("val_fraction") == 0.0);
  CHECK(config.at("val_data") == fs::absolute(folder / "held_out.txt").lexically_normal().string());
  CHECK(read_bytes(run / "validation.txt") == validation);
  CHECK(read_bytes(run / "log.jsonl").find("\"val_loss\"") != std::string::npos);
  // Resumed after the file is gone: the run's own copy.
  fs::remove(folder / "held_out.txt");
  const Cli resumed = phasor_cli("train --resume " + quote(run) + " --steps 6");
  REQUIRE_MESSAGE(resumed.status == 0, resumed.err);
  CHECK(latest_folder(run).filename() == "ckpt-00000006");

  write_bytes(folder / "held_out.txt", validation);
  check_clear_failure(phasor_cli(train_args(fresh_dir("val_data_both") / "run", "--val-fraction 0.1 --val-data " + quote(folder / "held_out.txt"))),
                      "--val-fraction must be 0");
  check_clear_failure(phasor_cli(train_args(fresh_dir("val_data_none") / "run", "--val-fraction 0")), "give --val-data");
  write_bytes(folder / "tiny.txt", "too short");
  check_clear_failure(phasor_cli(train_args(fresh_dir("val_data_short") / "run", "--val-data " + quote(folder / "tiny.txt"))), "validation text");
}

TEST_CASE("train --precision bf16: finite losses near float32's, float32 checkpoints, resumed in float32 and back") {
  const std::string common = "--warmup 5 --seed 4 --lr 1e-2";
  const fs::path f32 = fresh_dir("prec_f32") / "run", bf16 = fresh_dir("prec_bf16") / "run";
  REQUIRE_MESSAGE(phasor_cli(train_args(f32, common + " --steps 10")).status == 0, "float32 run");
  const Cli a = phasor_cli(train_args(bf16, common + " --steps 10 --precision bf16"));
  REQUIRE_MESSAGE(a.status == 0, a.err);
  auto losses = [](const fs::path& run) {
    std::vector<double> out;
    std::istringstream log(read_bytes(run / "log.jsonl"));
    for (std::string line; std::getline(log, line);)
      if (const Json j = Json::parse(line); j.contains("loss") && j.contains("step")) out.push_back(j.at("loss").get<double>());
    return out;
  };
  const std::vector<double> l32 = losses(f32), l16 = losses(bf16);
  REQUIRE(l32.size() == l16.size());
  REQUIRE(!l16.empty());
  for (size_t i = 0; i < l16.size(); ++i) {
    CHECK(std::isfinite(l16[i]));
    CHECK(std::abs(l16[i] - l32[i]) / l32[i] < 2e-2);
  }
  CHECK(l16 != l32);  // the bfloat16 GEMMs ran
  CHECK(Json::parse(read_bytes(latest_folder(bf16) / "state.json")).at("options").at("precision") == "bf16");
  // The checkpoint is float32: resume in float32, then back in bf16.
  const Cli b = phasor_cli("train --resume " + quote(bf16) + " --steps 15 --precision float32");
  REQUIRE_MESSAGE(b.status == 0, b.err);
  // float32, the default, is left out: the config is byte for byte what earlier versions wrote.
  CHECK(!Json::parse(read_bytes(latest_folder(bf16) / "state.json")).at("options").contains("precision"));
  const Cli c = phasor_cli("train --resume " + quote(bf16) + " --steps 20 --precision bf16");
  REQUIRE_MESSAGE(c.status == 0, c.err);
  CHECK(latest_folder(bf16).filename() == "ckpt-00000020");
  // eval and generate take the flag too; bf16's loss is float32's within bfloat16's rounding.
  const std::string model = quote(latest_folder(bf16) / "model.safetensors");
  const Cli e32 = phasor_cli("eval --checkpoint " + model + " --data " + quote(data_file()) + " --seq-len 32 --json");
  const Cli e16 = phasor_cli("eval --checkpoint " + model + " --data " + quote(data_file()) + " --seq-len 32 --json --precision bf16");
  REQUIRE_MESSAGE(e32.status == 0, e32.err);
  REQUIRE_MESSAGE(e16.status == 0, e16.err);
  const double v32 = Json::parse(e32.out).at("loss").get<double>(), v16 = Json::parse(e16.out).at("loss").get<double>();
  CHECK(v16 != v32);
  CHECK(std::abs(v16 - v32) / v32 < 1e-2);
  const Cli g = phasor_cli("generate --checkpoint " + model + " --prompt abc --tokens 8 --precision bf16");
  CHECK_MESSAGE(g.status == 0, g.err);
  // Refusals: an unknown precision.
  check_clear_failure(phasor_cli(train_args(fresh_dir("prec_bad") / "run", "--steps 2 --precision fp16")), "precision");
}

// ============================================================== eval

TEST_CASE("eval --json: keys, the spec's window count and the loss") {
  const ModelConfig c = tiny_config(Position::Rope);
  const fs::path model_path = saved_model("eval_rope", c);
  // T = 1024 and L = 32: floor((T - 1) / L) = 31 (not T / L = 32).
  const std::string text = sample_text(1024);
  const fs::path data = scratch() / "eval.txt";
  write_bytes(data, text);
  const Cli r = phasor_cli("eval --checkpoint " + quote(model_path) + " --data " + quote(data) + " --seq-len 32 --json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json j = Json::parse(r.out);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"loss", "ppl", "tokens", "windows", "seq_len"});
  CHECK(j.at("windows") == 31);
  CHECK(j.at("seq_len") == 32);
  CHECK(j.at("tokens") == 31 * 32);
  const double loss = j.at("loss").get<double>();
  CHECK(j.at("ppl").get<double>() == doctest::Approx(std::exp(loss)).epsilon(1e-9));

  // The same loss computed here: mean next-token cross-entropy over the 31 windows.
  const auto model = load_model(model_path.string());
  std::vector<int64_t> inputs, targets;
  for (int64_t w = 0; w < 31; ++w)
    for (int64_t i = 0; i < 32; ++i) {
      inputs.push_back(static_cast<unsigned char>(text[w * 32 + i]));
      targets.push_back(static_cast<unsigned char>(text[w * 32 + i + 1]));
    }
  const double want = model->loss(from_vector(inputs, {31, 32}), from_vector(targets, {31, 32})).item<double>();
  CHECK(loss == doctest::Approx(want).epsilon(1e-5));

  const Cli capped = phasor_cli("eval --checkpoint " + quote(model_path) + " --data " + quote(data) + " --seq-len 32 --max-windows 5 --json");
  REQUIRE_MESSAGE(capped.status == 0, capped.err);
  CHECK(Json::parse(capped.out).at("windows") == 5);
  CHECK(Json::parse(capped.out).at("tokens") == 5 * 32);

  const Cli plain = phasor_cli("eval --checkpoint " + quote(model_path) + " --data " + quote(data) + " --seq-len 100");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  CHECK(plain.out.find("10 windows") != std::string::npos);  // floor(1023 / 100)
}

TEST_CASE("eval with --seq-len beyond a 'learned' model's max_seq_len fails cleanly") {
  ModelConfig c = tiny_config(Position::Learned);
  c.max_seq_len = 16;
  const fs::path model_path = saved_model("eval_learned", c);
  const Cli bad = phasor_cli("eval --checkpoint " + quote(model_path) + " --data " + quote(data_file()) + " --seq-len 32 --json");
  check_clear_failure(bad, "max_seq_len");
  CHECK(bad.out.empty());
  const Cli ok = phasor_cli("eval --checkpoint " + quote(model_path) + " --data " + quote(data_file()) + " --seq-len 16 --json");
  CHECK_MESSAGE(ok.status == 0, ok.err);
}

// ============================================================== flags

TEST_CASE("train --help: a flag for every field of the option tables, with the row's help") {
  const Cli r = phasor_cli("train --help");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto line_of = [&](std::string_view name) {
    std::string flag = "--" + std::string(name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    const size_t at = r.out.find("  " + flag + " ");
    return at == std::string::npos ? std::string() : r.out.substr(at, r.out.find('\n', at) - at);
  };
  // Each line ends with the field's default, as a config file writes it.
  const auto default_of = [](const Json& j, std::string_view name) {
    const Json& v = j.at(std::string(name));
    return "default " + (v.is_string() ? (v.get<std::string>().empty() ? "none" : v.get<std::string>()) : v.dump()) + ")";
  };
  const Json model_defaults = fields_to_json(ModelConfig{}, kModelConfigFields);
  const Json train_defaults = fields_to_json(TrainOptions{}, kTrainOptionFields);
  for (const auto& f : kModelConfigFields) {
    CAPTURE(f.name);
    CHECK(line_of(f.name).ends_with(default_of(model_defaults, f.name)));
  }
  for (const auto& f : kTrainOptionFields) {
    CAPTURE(f.name);
    const std::string line = line_of(f.name);
    CHECK(!line.empty());
    const std::string_view help = f.help.ends_with(")") ? f.help.substr(0, f.help.size() - 1) : f.help;  // "(note; default X)"
    CHECK(line.find(help) != std::string::npos);
    CHECK(line.ends_with(default_of(train_defaults, f.name)));
  }
  CHECK(line_of("steps").find("(at most 10^12; default 300)") != std::string::npos);
  CHECK(line_of("lr").find("(AdamW; in (0, 1]; default 0.003)") != std::string::npos);
  CHECK(line_of("position").find("TEXT") != std::string::npos);
  CHECK(line_of("position").find(position_names("|")) != std::string::npos);
  CHECK(line_of("cmha_init").find("rope|paper") != std::string::npos);
  CHECK(line_of("seed").find("UINT") != std::string::npos);
  CHECK(line_of("tie_embeddings").find("BOOLEAN") != std::string::npos);
  CHECK(line_of("log_heads").find("BOOLEAN") == std::string::npos);  // a switch: --log-heads alone
}

TEST_CASE("a flag overrides its key in a config file; an enum flag is read as a name") {
  const fs::path config = scratch() / "override.json", run = scratch() / "override_run";
  fs::remove_all(run);
  write_bytes(config, R"({"model": {"position": "learned", "cmha_init": "paper", "d_model": 16, "n_layers": 1, "n_heads": 2,)"
                      R"( "d_ff": 32}, "steps": 1, "seq_len": 16, "batch": 2})");
  const Cli r = phasor_cli("train --config " + quote(config) + " --data " + quote(data_file()) + " --run-dir " + quote(run) +
                           " --position xpos --seq-len 8");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const TrainOptions o = train_options_from_json(nlohmann::json::parse(read_bytes(run / "config.json")));
  CHECK(o.model.position == Position::XPos);      // the flag
  CHECK(o.model.cmha_init == CmhaInit::Paper);    // the file
  CHECK(o.seq_len == 8);
  CHECK(o.model.d_model == 16);
}

// ============================================================== refusals

TEST_CASE("bad train inputs: one line on stderr, non-zero exit, no run folder left behind") {
  const fs::path empty = scratch() / "empty.txt";
  write_bytes(empty, "");
  struct Bad {
    std::string name, extra;
    std::map<std::string, std::string> overrides;
    std::string mention;
  };
  const std::vector<Bad> cases{
      {"unknown flag", "--no-such-flag 3", {}, "no-such-flag"},
      {"unknown position", "--position bogus", {}, "bogus"},
      {"d_model not divisible by n_heads", "", {{"--n-heads", "3"}}, "n_heads"},
      {"odd head width with rope", "--position rope", {{"--d-model", "6"}}, "even"},
      {"odd head width with complexformer", "--position complexformer", {{"--d-model", "10"}}, "even"},
      {"empty data file", "", {{"--data", quote(empty)}}, "empty"},
      {"missing data file", "", {{"--data", quote(scratch() / "no_such_file.txt")}}, "no_such_file.txt"},
      {"seq_len beyond a learned model's max_seq_len", "--position learned --max-seq-len 16", {}, "max_seq_len"},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.name);
    const fs::path run = scratch() / "bad_runs" / "run";
    fs::remove_all(run.parent_path());
    fs::create_directories(run.parent_path());
    const Cli r = phasor_cli(train_args(run, "--steps 2 " + b.extra, b.overrides));
    check_clear_failure(r, b.mention);
    CHECK_MESSAGE(!fs::exists(run), "left behind: ", run.string());
  }
}

TEST_CASE("a checkpoint that is not a Phasor model is refused by eval, info and generate") {
  const fs::path dir = fresh_dir("not_a_model");
  const fs::path foreign = dir / "foreign.safetensors", text = dir / "text.safetensors";
  nn::save_tensors(foreign.string(), {{"w", ones({2, 2})}}, {{"format", "pt"}});
  write_bytes(text, "this is not a safetensors file at all, just some words\n");
  for (const fs::path& p : {foreign, text}) {
    CAPTURE(p);
    check_clear_failure(phasor_cli("eval --checkpoint " + quote(p) + " --data " + quote(data_file()) + " --seq-len 16"), p.filename().string());
    check_clear_failure(phasor_cli("info " + quote(p)), p.filename().string());
    const Cli g = phasor_cli("generate --checkpoint " + quote(p) + " --prompt hi --tokens 5");
    check_clear_failure(g, p.filename().string());
  }
  CHECK(phasor_cli("info " + quote(foreign)).err.find("not a Phasor model") != std::string::npos);
  check_clear_failure(phasor_cli("info " + quote(dir / "absent.safetensors")), "absent.safetensors");
}

TEST_CASE("train into a run folder that already holds a run is refused and changes nothing") {
  const fs::path run = fresh_dir("occupied") / "run";
  const Cli first = phasor_cli(train_args(run, "--steps 2"));
  REQUIRE_MESSAGE(first.status == 0, first.err);
  const std::map<std::string, std::string> before = tree_bytes(run);
  REQUIRE(before.count("latest") == 1);
  const Cli again = phasor_cli(train_args(run, "--steps 3 --seed 9"));
  check_clear_failure(again, "already holds a run");
  CHECK(tree_bytes(run) == before);
  // --resume on a folder without a run is refused too.
  const fs::path empty_run = fresh_dir("no_run");
  check_clear_failure(phasor_cli("train --resume " + quote(empty_run)), "no checkpoint");
  CHECK(fs::is_empty(empty_run));
}

// ============================================================== info, generate, plot

TEST_CASE("--checkpoint takes the model file, its checkpoint folder, or a run folder (its latest checkpoint)") {
  const fs::path run = fresh_dir("checkpoint_folders");
  const Cli trained = phasor_cli(train_args(run, "--steps 4 --ckpt-every 2 --eval-every 0", {{"--log-every", "100"}}));
  REQUIRE_MESSAGE(trained.status == 0, trained.err);
  REQUIRE(read_bytes(run / "latest") == "ckpt-00000004\n");
  const auto eval_json = [&](const fs::path& checkpoint) {
    const Cli r = phasor_cli("eval --checkpoint " + quote(checkpoint) + " --data " + quote(data_file()) + " --seq-len 32 --json");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    return Json::parse(r.out);
  };
  const Json by_file = eval_json(run / "ckpt-00000004" / "model.safetensors");
  CHECK(eval_json(run / "ckpt-00000004") == by_file);
  CHECK(eval_json(run) == by_file);
  CHECK(eval_json(run / "ckpt-00000002") != by_file);  // a folder means its own checkpoint, not the run's latest

  const std::string sample = "generate --prompt And --tokens 8 --seed 3 --checkpoint ";
  const Cli from_run = phasor_cli(sample + quote(run)), from_file = phasor_cli(sample + quote(run / "ckpt-00000004" / "model.safetensors"));
  REQUIRE_MESSAGE(from_run.status == 0, from_run.err);
  CHECK(from_run.out == from_file.out);
  const Cli info = phasor_cli("info " + quote(run / "ckpt-00000002"));
  REQUIRE_MESSAGE(info.status == 0, info.err);
  CHECK(info.out.find("parameters: ") != std::string::npos);
}

TEST_CASE("a run's first line names its model, parameter count, steps and folder") {
  const fs::path run = fresh_dir("announced");
  const Cli r = phasor_cli(train_args(run, "--steps 4 --eval-every 0", {{"--log-every", "2"}}));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string first = r.err.substr(0, r.err.find('\n'));
  const ModelConfig c = model_config(Position::ComplexFormer, {.d_model = 32, .n_layers = 1, .n_heads = 2, .d_ff = 64});
  CHECK(first == "complexformer model (d_model 32, n_layers 1, n_heads 2, d_ff 64), " + std::to_string(parameter_count(c)) +
                     " parameters; steps 1 to 4, 4 x 32 tokens each, cpu, float32; run folder " + run.string());
  CHECK(r.err.find("step 2/4 |") > r.err.find(first));
}

TEST_CASE("eval of a run's checkpoint scores its held-out text by default, and says when --data is its training text") {
  const fs::path run = fresh_dir("eval_default");
  REQUIRE(phasor_cli(train_args(run, "--steps 2 --eval-every 0")).status == 0);
  const Cli held_out = phasor_cli("eval --checkpoint " + quote(run) + " --seq-len 32 --json");
  REQUIRE_MESSAGE(held_out.status == 0, held_out.err);
  CHECK(held_out.err.find("eval: scoring the run's held-out text, " + (fs::absolute(run) / "validation.txt").string()) == 0);
  const Cli given = phasor_cli("eval --checkpoint " + quote(run) + " --seq-len 32 --json --data " + quote(run / "validation.txt"));
  REQUIRE_MESSAGE(given.status == 0, given.err);
  CHECK(Json::parse(held_out.out) == Json::parse(given.out));
  CHECK(given.err.empty());  // the held-out text is not what it trained on: no note
  const Cli training = phasor_cli("eval --checkpoint " + quote(run) + " --seq-len 32 --json --data " + quote(data_file()));
  REQUIRE_MESSAGE(training.status == 0, training.err);
  CHECK(training.err.find("is the text this run trained on") != std::string::npos);
  CHECK(Json::parse(training.out).at("loss") != Json::parse(given.out).at("loss"));
  // A model file outside any run has no held-out text to fall back on.
  const fs::path lone = scratch() / "lone.safetensors";
  fs::copy_file(run / "ckpt-00000002" / "model.safetensors", lone, fs::copy_options::overwrite_existing);
  check_clear_failure(phasor_cli("eval --checkpoint " + quote(lone) + " --seq-len 32"), "give --data");
}

TEST_CASE("the validation line says how many windows it scored; eval defaults --seq-len to the run's training length and says so") {
  const fs::path run = fresh_dir("val_label");
  const Cli trained = phasor_cli(train_args(run, "--steps 2 --eval-every 0 --eval-windows 2"));
  REQUIRE_MESSAGE(trained.status == 0, trained.err);
  CHECK(std::regex_search(trained.err, std::regex(R"(step 2: validation loss \d+\.\d{4} \(first 2 windows\))")));
  CHECK(std::regex_search(trained.out, std::regex(R"(validation loss \d+\.\d{4} \(first 2 windows\))")));
  const fs::path all = fresh_dir("val_label_all");
  const Cli every = phasor_cli(train_args(all, "--steps 2 --eval-every 0 --eval-windows 0"));
  REQUIRE_MESSAGE(every.status == 0, every.err);
  CHECK(std::regex_search(every.out, std::regex(R"(validation loss \d+\.\d{4} \(all \d+ windows\))")));

  const Cli e = phasor_cli("eval --checkpoint " + quote(run) + " --json");  // trained at 32 (train_args), not eval's old 128
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.err.find("eval: --seq-len 32, the run's training length") != std::string::npos);
  CHECK(Json::parse(e.out).at("seq_len") == 32);
  const Cli given = phasor_cli("eval --checkpoint " + quote(run) + " --seq-len 16 --json");
  REQUIRE_MESSAGE(given.status == 0, given.err);
  CHECK(given.err.find("training length") == std::string::npos);
  CHECK(Json::parse(given.out).at("seq_len") == 16);
}

TEST_CASE("info --json prints one JSON object: the config and the parameter count") {
  const ModelConfig c = tiny_config(Position::Rope);
  const fs::path p = saved_model("info_json_model", c);
  const Cli r = phasor_cli("info --json " + quote(p));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const Json j = Json::parse(r.out);  // the whole of stdout
  CHECK(j.at("parameters").get<int64_t>() == CausalLM(c).parameter_count());
  CHECK(j.at("config").at("position") == "rope");
  CHECK(j.at("config").at("d_model") == 32);
}

TEST_CASE("info prints the config and the parameter count") {
  ModelConfig c = tiny_config(Position::ComplexFormer);
  c.tie_embeddings = false;
  const fs::path p = saved_model("info_model", c);
  const Cli r = phasor_cli("info " + quote(p));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const int64_t V = 256, D = 32, F = 64, H = 2, P = 8;
  const int64_t want = 2 * V * D + (2 * D + 4 * D * D + 3 * D * F + 2 * H * P + H) + D;
  CHECK(CausalLM(c).parameter_count() == want);
  CHECK_MESSAGE(r.out.find("parameters: " + std::to_string(want) + "\n") != std::string::npos, r.out);
  CHECK(r.out.find("\"complexformer\"") != std::string::npos);
  CHECK(r.out.find("\"tie_embeddings\": false") != std::string::npos);
}

TEST_CASE("generate streams N bytes after the prompt and is reproducible with --seed") {
  const fs::path p = saved_model("gen_model", tiny_config(Position::ComplexFormer));
  const std::string base = "generate --checkpoint " + quote(p) + " --prompt 'In the beginning' --tokens 40 --temperature 1.0";
  const Cli a = phasor_cli(base + " --seed 7"), b = phasor_cli(base + " --seed 7"), c = phasor_cli(base + " --seed 8");
  REQUIRE_MESSAGE(a.status == 0, a.err);
  REQUIRE_MESSAGE(c.status == 0, c.err);
  const std::string prompt = "In the beginning";
  CHECK(a.out.size() == prompt.size() + 40 + 1);  // prompt, 40 bytes, newline
  CHECK(a.out.compare(0, prompt.size(), prompt) == 0);
  CHECK(a.out.back() == '\n');
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);  // the seed is used
  CHECK(c.out.size() == prompt.size() + 41);

  const Cli none = phasor_cli("generate --checkpoint " + quote(p) + " --prompt abc --tokens 0");
  REQUIRE_MESSAGE(none.status == 0, none.err);
  CHECK(none.out == "abc\n");
  // Greedy decoding ignores the seed.
  const std::string greedy = "generate --checkpoint " + quote(p) + " --prompt abc --tokens 12 --temperature 0";
  const Cli g1 = phasor_cli(greedy + " --seed 1"), g2 = phasor_cli(greedy + " --seed 2");
  REQUIRE_MESSAGE(g1.status == 0, g1.err);
  CHECK(g1.out == g2.out);
  CHECK(g1.out.size() == 3 + 12 + 1);
}

TEST_CASE("generate --repetition-penalty, --stop and --prompt-file") {
  const fs::path p = saved_model("gen_model", tiny_config(Position::ComplexFormer));
  const std::string untimed = "generate --checkpoint " + quote(p) + " --temperature 0", greedy = untimed + " --tokens 40";
  const Cli plain = phasor_cli(greedy + " --prompt abc");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  // A penalty of 1 changes nothing; a strong one keeps greedy decoding off the bytes it has used (here, every byte once,
  // as an untrained model's greedy choice otherwise repeats).
  CHECK(phasor_cli(greedy + " --prompt abc --repetition-penalty 1").out == plain.out);
  const Cli penalised = phasor_cli(untimed + " --prompt abc --repetition-penalty 1000 --tokens 20");
  REQUIRE_MESSAGE(penalised.status == 0, penalised.err);
  const std::string continuation = penalised.out.substr(3, penalised.out.size() - 4);
  std::set<char> distinct(continuation.begin(), continuation.end());
  CHECK_MESSAGE(distinct.size() >= continuation.size() - 1, penalised.out);  // a byte reused at most once: logits near 0 shrink little
  CHECK(continuation.find_first_of("abc") == std::string::npos);
  // --stop: the sample ends where it produces the text, which is not printed.
  const std::string generated = plain.out.substr(3, plain.out.size() - 4);
  CHECK(std::set<char>(generated.begin(), generated.end()).size() < 20);  // without the penalty greedy decoding repeats itself
  const std::string stop = generated.substr(5, 2);
  REQUIRE(stop.find('\0') == std::string::npos);
  const size_t at = generated.find(stop);
  const Cli stopped = phasor_cli(greedy + " --prompt abc --stop " + quote(stop));
  REQUIRE_MESSAGE(stopped.status == 0, stopped.err);
  CHECK(stopped.out == "abc" + generated.substr(0, at) + "\n");
  const Cli never = phasor_cli(greedy + " --prompt abc --stop 'text it never writes'");
  CHECK(never.out == plain.out);  // a stop string's first bytes, held back while they might begin it, are printed after all
  // --prompt-file: the file's bytes are the prompt.
  const fs::path prompt = scratch() / "prompt.txt";
  write_bytes(prompt, "abc");
  CHECK(phasor_cli(greedy + " --prompt-file " + quote(prompt)).out == plain.out);
  check_clear_failure(phasor_cli(greedy + " --prompt-file " + quote(prompt) + " --prompt abc"), "give --prompt or --prompt-file, not both");
  check_clear_failure(phasor_cli(greedy + " --prompt-file " + quote(scratch() / "missing.txt")), "missing.txt");
  check_clear_failure(phasor_cli(greedy + " --stop ''"), "--stop '' is empty");
}

TEST_CASE("unknown flags: 'did you mean', and other tools' names (nanoGPT's --max-new-tokens) read as Phasor's") {
  const fs::path p = saved_model("gen_model", tiny_config(Position::ComplexFormer));
  const std::string greedy = "generate --checkpoint " + quote(p) + " --prompt abc --temperature 0";
  const Cli own = phasor_cli(greedy + " --tokens 7");
  const Cli nano = phasor_cli(greedy + " --max-new-tokens 7"), underscored = phasor_cli(greedy + " --max_new_tokens=7");
  REQUIRE_MESSAGE(nano.status == 0, nano.err);
  CHECK(nano.out == own.out);
  CHECK(underscored.out == own.out);
  CHECK(nano.err == "phasor: generate --max-new-tokens read as --tokens\n");
  const Cli typo = phasor_cli(greedy + " --max-new-token 7");
  CHECK(typo.status == 2);
  CHECK(typo.err == "phasor: generate: unknown flag --max-new-token; did you mean --tokens? (see phasor generate --help)\n");
  CHECK(phasor_cli(greedy + " --tokenz 7").err.find("unknown flag --tokenz; did you mean --tokens?") != std::string::npos);
  CHECK(phasor_cli("train --max-iter 5").err.find("unknown flag --max-iter; did you mean --steps?") != std::string::npos);
  const Cli nothing_near = phasor_cli(greedy + " --zzzzzzzz 7");
  CHECK(nothing_near.status == 2);
  CHECK(nothing_near.err == "phasor: generate: unknown flag --zzzzzzzz (see phasor generate --help)\n");
  // An alias of a flag the command lacks stays unknown: eval has no --tokens.
  CHECK(phasor_cli("eval --checkpoint " + quote(p) + " --max-new-tokens 5").err.find("unknown flag --max-new-tokens") != std::string::npos);
}

TEST_CASE("generate --top-p, --num-samples and an empty prompt") {
  const fs::path p = saved_model("gen_model", tiny_config(Position::ComplexFormer));
  const std::string base = "generate --checkpoint " + quote(p) + " --prompt abc --tokens 30 --temperature 1.0 --seed 5";
  const Cli plain = phasor_cli(base), whole = phasor_cli(base + " --top-p 1");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  CHECK(whole.out == plain.out);  // 1: no cut, the same draws
  // A nucleus smaller than any token's probability keeps the likeliest token alone: greedy decoding.
  const Cli narrow = phasor_cli(base + " --top-p 1e-9");
  const Cli greedy = phasor_cli("generate --checkpoint " + quote(p) + " --prompt abc --tokens 30 --temperature 0");
  REQUIRE_MESSAGE(narrow.status == 0, narrow.err);
  CHECK(narrow.out == greedy.out);
  const Cli half = phasor_cli(base + " --top-p 0.5");
  REQUIRE_MESSAGE(half.status == 0, half.err);
  CHECK(half.out.size() == plain.out.size());
  CHECK(half.out != plain.out);  // an untrained model's distribution is flat: half its mass is a real cut
  check_clear_failure(phasor_cli(base + " --top-p 0"), "--top-p");
  check_clear_failure(phasor_cli(base + " --top-p 1.5"), "--top-p");

  // Sample i uses seed S + i, after a header line.
  const Cli two = phasor_cli(base + " --num-samples 2");
  REQUIRE_MESSAGE(two.status == 0, two.err);
  const Cli next = phasor_cli("generate --checkpoint " + quote(p) + " --prompt abc --tokens 30 --temperature 1.0 --seed 6");
  CHECK(two.out == "--- sample 1 of 2 (seed 5)\n" + plain.out + "--- sample 2 of 2 (seed 6)\n" + next.out);

  // An empty prompt starts a new line, which is not echoed.
  const Cli empty = phasor_cli("generate --checkpoint " + quote(p) + " --tokens 10 --temperature 0");
  const Cli newline = phasor_cli("generate --checkpoint " + quote(p) + " --prompt '\n' --tokens 10 --temperature 0");  // a newline inside the shell's quotes
  REQUIRE_MESSAGE(empty.status == 0, empty.err);
  REQUIRE_MESSAGE(newline.status == 0, newline.err);
  CHECK(empty.out.size() == 10 + 1);
  CHECK("\n" + empty.out == newline.out);
}

TEST_CASE("plot writes an SVG of a run's loss curve") {
  const fs::path run = fresh_dir("plot") / "run";
  const Cli t = phasor_cli(train_args(run, "--steps 10 --eval-every 5"));
  REQUIRE_MESSAGE(t.status == 0, t.err);
  REQUIRE(fs::exists(run / "log.jsonl"));
  const fs::path svg = run.parent_path() / "loss.svg";
  const Cli r = phasor_cli("plot " + quote(run) + " --out " + quote(svg));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const std::string doc = read_bytes(svg);
  CHECK(doc.find("<svg") != std::string::npos);
  CHECK(doc.find("</svg>") != std::string::npos);
  CHECK(doc.find("run") != std::string::npos);  // the run is named in the legend

  const fs::path svg2 = run.parent_path() / "nothing.svg";
  check_clear_failure(phasor_cli("plot " + quote(run.parent_path() / "absent") + " --out " + quote(svg2)), "absent");
  CHECK(!fs::exists(svg2));

  // Two runs both named `run`: the legend tells them apart by their parent folders, or by --label.
  const fs::path other = fresh_dir("plot_other") / "run";
  REQUIRE(phasor_cli(train_args(other, "--steps 10 --eval-every 5")).status == 0);
  const fs::path both = run.parent_path() / "both.svg";
  REQUIRE(phasor_cli("plot " + quote(run) + " " + quote(other) + " --out " + quote(both)).status == 0);
  const std::string two = read_bytes(both);
  CHECK(two.find(">plot/run</text>") != std::string::npos);
  CHECK(two.find(">plot_other/run</text>") != std::string::npos);
  const Cli labelled = phasor_cli("plot " + quote(run) + " " + quote(other) + " --label 'lr 1e-3' baseline --out " + quote(both));
  REQUIRE_MESSAGE(labelled.status == 0, labelled.err);
  const std::string named = read_bytes(both);
  CHECK(named.find(">lr 1e-3</text>") != std::string::npos);
  CHECK(named.find(">baseline</text>") != std::string::npos);
  check_clear_failure(phasor_cli("plot " + quote(run) + " " + quote(other) + " --label one --out " + quote(both)), "one per run");
}

TEST_CASE("a log.jsonl whose last line a full disk cut short: resume drops the line and says so, plot skips it with a warning") {
  const fs::path run = fresh_dir("cut_log") / "run";
  const Cli t = phasor_cli(train_args(run, "--steps 5"));
  REQUIRE_MESSAGE(t.status == 0, t.err);
  const std::string whole = read_bytes(run / "log.jsonl");
  REQUIRE(!whole.empty());
  REQUIRE(whole.back() == '\n');
  const std::string partial = "{\"step\": 6, \"loss\": 5.5, \"l";  // a write that stopped part-way
  write_bytes(run / "log.jsonl", whole + partial);

  // plot: the cut line is skipped, with one line of warning naming it.
  const fs::path svg = run.parent_path() / "cut.svg";
  const Cli p = phasor_cli("plot " + quote(run) + " --out " + quote(svg));
  REQUIRE_MESSAGE(p.status == 0, p.err);
  CHECK(fs::exists(svg));
  CHECK(p.err.find("warning") != std::string::npos);
  CHECK(p.err.find("log.jsonl:") != std::string::npos);
  CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);

  // resume: the cut line is dropped (one line says so), and the new lines follow the whole ones.
  const Cli r = phasor_cli("train --resume " + quote(run) + " --steps 10");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const size_t note = r.err.find("dropped the last line of");
  CHECK_MESSAGE(note != std::string::npos, r.err);
  if (note != std::string::npos) CHECK(r.err.substr(note, r.err.find('\n', note) - note).find(std::to_string(partial.size()) + " bytes") != std::string::npos);
  const std::string after = read_bytes(run / "log.jsonl");
  CHECK(after.substr(0, whole.size()) == whole);
  CHECK(after.find(partial) == std::string::npos);
  std::istringstream lines(after);
  int steps_logged = 0;
  for (std::string line; std::getline(lines, line);) {
    Json j;
    CHECK_NOTHROW(j = Json::parse(line));
    if (j.is_object() && j.contains("step") && j.at("step").get<int64_t>() > 5) ++steps_logged;
  }
  CHECK(steps_logged > 0);
  const Cli p2 = phasor_cli("plot " + quote(run) + " --out " + quote(svg));
  REQUIRE_MESSAGE(p2.status == 0, p2.err);
  CHECK(p2.err.find("warning") == std::string::npos);

  // A whole log: resume says nothing about it.
  const Cli r2 = phasor_cli("train --resume " + quote(run) + " --steps 12");
  REQUIRE_MESSAGE(r2.status == 0, r2.err);
  CHECK(r2.err.find("dropped") == std::string::npos);
}

// ============================================================== the rivals' options

namespace {
// The "position_scaling" a model file records, or null.
Json recorded_scaling(const fs::path& model_file) {
  std::map<std::string, std::string> metadata;
  nn::load_tensors(model_file.string(), &metadata);
  const auto it = metadata.find("position_scaling");
  return it == metadata.end() ? Json() : Json::parse(it->second);
}
double eval_loss(const fs::path& model_file, const std::string& flags) {
  const Cli e = phasor_cli("eval --checkpoint " + quote(model_file) + " --data " + quote(data_file()) + " --seq-len 64 --max-windows 4 --json " +
                           flags);
  REQUIRE_MESSAGE(e.status == 0, e.err);
  return Json::parse(e.out).at("loss").get<double>();
}
}  // namespace

TEST_CASE("--angle-warmup 0 trains bit for bit as without it; a warm-up changes training, never what the checkpoint means") {
  const fs::path plain = fresh_dir("warm_plain") / "run", zero = fresh_dir("warm_zero") / "run", warm = fresh_dir("warm_on") / "run";
  const std::string common = "--position rope --steps 6 --seed 4";
  REQUIRE(phasor_cli(train_args(plain, common)).status == 0);
  REQUIRE(phasor_cli(train_args(zero, common + " --angle-warmup 0")).status == 0);
  const Cli w = phasor_cli(train_args(warm, common + " --angle-warmup 4"));
  REQUIRE_MESSAGE(w.status == 0, w.err);
  check_same_tensors(latest_folder(plain) / "model.safetensors", latest_folder(zero) / "model.safetensors");
  const auto a = load_model((latest_folder(plain) / "model.safetensors").string());
  const auto b = load_model((latest_folder(warm) / "model.safetensors").string());
  CHECK(a->state_dict().at("tok_emb.weight").to_vector<float>() != b->state_dict().at("tok_emb.weight").to_vector<float>());
  // The checkpoint records the trained length and no warm-up; the run's config records the option.
  const Json s = recorded_scaling(latest_folder(warm) / "model.safetensors");
  CHECK(s.at("method") == "none");
  CHECK(s.at("original_length") == 32);
  CHECK(!s.contains("warmup"));
  CHECK(Json::parse(read_bytes(warm / "config.json")).at("angle_warmup") == 4);
  CHECK(!Json::parse(read_bytes(plain / "config.json")).contains("angle_warmup"));
}

TEST_CASE("eval --rope-scaling: pi, ntk and yarn change a rope model's loss past its length; the default is the checkpoint's own") {
  const fs::path run = fresh_dir("scaled_eval") / "run";
  REQUIRE(phasor_cli(train_args(run, "--position rope --steps 4 --seed 2")).status == 0);
  const fs::path model = latest_folder(run) / "model.safetensors";
  const double plain = eval_loss(model, "");
  CHECK(eval_loss(model, "--rope-scaling none") == plain);
  for (const char* method : {"pi", "ntk", "yarn"}) {
    CAPTURE(method);
    CHECK(eval_loss(model, std::string("--rope-scaling ") + method + " --rope-factor 2") != plain);
  }
  // yarn reads the trained length the checkpoint records (32): --original-length 64 is another model.
  CHECK(eval_loss(model, "--rope-scaling yarn --rope-factor 2") != eval_loss(model, "--rope-scaling yarn --rope-factor 2 --original-length 64"));
}

TEST_CASE("train --init-from --rope-scaling pi fine-tunes at a longer length and records the scaling, which eval then applies") {
  const fs::path base = fresh_dir("ft_base") / "run", tuned = fresh_dir("ft_tuned") / "run";
  REQUIRE(phasor_cli(train_args(base, "--position complexformer --steps 3 --seed 6")).status == 0);
  const fs::path base_model = latest_folder(base) / "model.safetensors";
  const Cli t = phasor_cli(train_args(tuned, "--steps 2 --seed 6 --init-from " + quote(base_model) + " --rope-scaling pi --rope-factor 2",
                                      {{"--seq-len", "64"}}));
  REQUIRE_MESSAGE(t.status == 0, t.err);
  const fs::path tuned_model = latest_folder(tuned) / "model.safetensors";
  const Json s = recorded_scaling(tuned_model);
  CHECK(s.at("method") == "pi");
  CHECK(s.at("factor") == 2.0);
  CHECK(s.at("original_length") == 32);  // the base model's training length, not the fine-tuning's
  CHECK(eval_loss(tuned_model, "") == eval_loss(tuned_model, "--rope-scaling pi --rope-factor 2"));
  CHECK(eval_loss(tuned_model, "") != eval_loss(tuned_model, "--rope-scaling none"));
}

TEST_CASE("context extension: bad input is one line on stderr, a non-zero exit, and nothing written") {
  const fs::path run = fresh_dir("scaled_bad") / "run";
  REQUIRE(phasor_cli(train_args(run, "--position alibi --steps 2")).status == 0);
  const fs::path model = latest_folder(run) / "model.safetensors";
  const auto refused = [](const std::string& args, const std::string& message) {
    const Cli c = phasor_cli(args);
    CHECK(c.status != 0);
    CHECK_MESSAGE(c.err.find(message) != std::string::npos, c.err);
    CHECK_MESSAGE(std::count(c.err.begin(), c.err.end(), '\n') == 1, c.err);
  };
  const std::string eval = "eval --checkpoint " + quote(model) + " --data " + quote(data_file()) + " --seq-len 64 ";
  refused(eval + "--rope-scaling pi --rope-factor 2", "--rope-scaling pi does not apply to a 'alibi' model");
  const Cli unknown = phasor_cli(eval + "--rope-scaling linear");  // CLI11's refusal of a value outside the list
  CHECK(unknown.status != 0);
  CHECK(unknown.err.find("--rope-scaling: linear not in {none,pi,ntk,yarn}") != std::string::npos);
  refused(eval + "--rope-factor 0.5 --rope-scaling pi", "--rope-factor");
  const fs::path none_run = fresh_dir("scaled_bad_out") / "run";
  refused(train_args(none_run, "--position none --angle-warmup 5 --steps 2"), "--angle-warmup applies to the variants whose positions are rotary phases");
  CHECK(!fs::exists(none_run));
  refused(train_args(none_run, "--position carope --rope-scaling yarn --rope-factor 2 --steps 2"),
          "--rope-scaling yarn does not apply to a 'carope' model");
  CHECK(!fs::exists(none_run));
}

// ============================================================== training windows

TEST_CASE("text trains on windows drawn anywhere exactly as before: row i starts at below(T - L) of the i-th draw") {
  std::vector<int64_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i);
  BatchSampler sampler(tokens, 8, 16, 42);
  CHECK(sampler.window_starts() == WindowStarts::Anywhere);  // the default
  Generator draws(42);
  for (int step = 0; step < 3; ++step) {
    const Batch b = sampler.next();
    for (int64_t row = 0; row < b.batch; ++row)
      CHECK(b.inputs[static_cast<size_t>(row * 16)] == static_cast<int64_t>(uniform_below(draws, 1000 - 16)));
  }
  CHECK(sampler.offset() == draws.offset());
}

TEST_CASE("train --data TASK draws example-aligned windows and holds out whole examples; the same bytes from a file train as text") {
  const fs::path folder = fresh_dir("task_windows");
  const fs::path same_bytes = write_bytes(folder / "copy.txt", load_text("copy", 48));  // 41,667 examples of 48 bytes
  const auto trained_model = [&folder](const std::string& name, const std::string& data) {
    const fs::path run = folder / name;
    const Cli c = phasor_cli(train_args(run, "--steps 3 --eval-every 0", {{"--data", data}, {"--seq-len", "48"}}));
    REQUIRE_MESSAGE(c.status == 0, c.err);
    return read_bytes(latest_folder(run) / "model.safetensors");
  };
  const std::string task = trained_model("task", "copy");
  CHECK(task == trained_model("task_again", "copy"));  // deterministic
  CHECK(task != trained_model("file", quote(same_bytes)));
  // The held-out part is whole examples, so its evaluation windows are examples too.
  const std::string held_out = read_bytes(folder / "task" / "validation.txt");
  CHECK(held_out.size() == 99'984);  // 5% of 2,000,016 bytes is 100,000: 2,083 examples and 16 bytes
  CHECK(held_out.front() == '\n');
  CHECK(read_bytes(folder / "file" / "validation.txt").size() == 100'000);
}
