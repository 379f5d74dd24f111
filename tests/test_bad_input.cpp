// Bad input, row by row as in docs/bad-input.md: every kind of malformed or
// hostile input the `phasor` command line accepts (model files, config files,
// data files, flag values, prompts, run folders), each run through the CLI.
// A refusal must be exactly one line on stderr and a non-zero exit, with
// nothing on stdout and nothing lost: a run folder made beforehand stays byte
// for byte as it was and no partial file (*.tmp.*) or run folder appears.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/data/dataset.h"
#include "models/model_io.h"
#include "models/transformer.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path scratch() { return scratch_root("bad_input"); }

const fs::path& data_file() {
  static const fs::path p = write_bytes(scratch() / "data.txt", sample_text(4096));
  return p;
}

// A bound on each run: a command that should be refused must not hang the suite.
Cli phasor_cli(const std::string& args) { return run_shell("timeout -s KILL 600 " + phasor_command() + " " + args, scratch()); }

// The tiny run of every training command here: `extra` adds flags and
// replaces the defaults it names (CLI11 refuses a flag given twice).
std::string train_args(const fs::path& run_dir, const std::string& extra = "--steps 2") {
  const std::vector<std::pair<std::string, std::string>> defaults{
      {"--d-model", "16"}, {"--n-layers", "1"}, {"--n-heads", "2"}, {"--d-ff", "32"},     {"--seq-len", "16"},
      {"--batch", "2"},    {"--threads", "1"},  {"--log-every", "1000"}, {"--eval-every", "0"}, {"--eval-windows", "2"},
      {"--data", quote(data_file())}, {"--run-dir", quote(run_dir)}};
  std::string args = "train";
  for (const auto& [flag, value] : defaults)
    if ((" " + extra + " ").find(" " + flag + " ") == std::string::npos) args += " " + flag + " " + value;
  return args + " " + extra;
}

// A run made before any bad input is tried: nothing may touch it.
const fs::path& guard_run() {
  static const fs::path run = [] {
    const fs::path r = scratch() / "guard" / "run";
    const Cli c = phasor_cli(train_args(r));
    REQUIRE_MESSAGE(c.status == 0, c.err);
    return r;
  }();
  return run;
}

const std::map<std::string, std::string>& guard_snapshot() {
  static const std::map<std::string, std::string> snapshot = tree_bytes(guard_run());
  return snapshot;
}

void check_nothing_lost() {
  CHECK(tree_bytes(guard_run()) == guard_snapshot());
  for (const std::string& t : temporaries(scratch())) CHECK_MESSAGE(false, "partial file left: ", t);
}

// The refusal the design asks for: non-zero exit, one line on stderr naming
// the problem, nothing on stdout, nothing lost.
void check_refused(const Cli& r, const std::string& must_mention) {
  check_one_line_failure(r, must_mention);
  CHECK_MESSAGE(r.err.starts_with("phasor: "), "stderr: ", r.err);
  CHECK_MESSAGE(r.out.empty(), "stdout: ", r.out);
  check_nothing_lost();
}

// A training command refused before it made anything.
void check_train_refused(const std::string& extra, const std::string& must_mention) {
  const fs::path run = scratch() / "refused" / "run";
  fs::remove_all(run.parent_path());
  fs::create_directories(run.parent_path());
  check_refused(phasor_cli(train_args(run, extra)), must_mention);
  CHECK_MESSAGE(!fs::exists(run), "run folder left behind: ", run.string());
}

// ---------------------------------------------------------------- model files

fs::path model_file(const std::string& name, const ModelConfig& c = tiny_cli_config()) {
  const fs::path p = scratch() / "models" / (name + ".safetensors");
  if (!fs::exists(p)) {
    fs::create_directories(p.parent_path());
    save_model(p.string(), CausalLM(c, 1));
  }
  return p;
}

// A valid model file's header and data, to break one thing at a time.
struct Parts {
  Json header;
  std::string data;
};

Parts model_parts() {
  const std::string file = read_bytes(model_file("valid"));
  const uint64_t n = read_le64(file);
  return {Json::parse(file.substr(8, n)), file.substr(8 + n)};
}

std::string assemble(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }
std::string assemble(const Parts& p) { return assemble(p.header.dump(), p.data); }

// A model file of these tensors and this metadata, written by Phasor's own serializer.
std::string model_bytes(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  return safetensors::serialize(nn::to_contents(tensors, metadata));
}

// Every command that reads a model file refuses it the same way.
void check_model_refused(const std::string& bytes, const std::string& must_mention, bool all_commands = false) {
  const fs::path p = scratch() / "bad" / "model.safetensors";
  write_bytes(p, bytes);
  check_refused(phasor_cli("info " + quote(p)), must_mention);
  if (all_commands) {
    check_refused(phasor_cli("eval --checkpoint " + quote(p) + " --data " + quote(data_file()) + " --seq-len 16"), must_mention);
    check_refused(phasor_cli("generate --checkpoint " + quote(p) + " --prompt hi --tokens 4"), must_mention);
  }
}

// The first tensor entry of a header (not __metadata__).
std::string first_tensor(const Json& header) {
  for (const auto& [k, v] : header.items())
    if (k != "__metadata__") return k;
  return "";
}

}  // namespace

// ============================================================== S: model files (safetensors)

TEST_CASE("S1 model file: empty, or shorter than the 8-byte header length") {
  check_model_refused("", "too short for the 8-byte header length", true);
  check_model_refused("12345", "too short for the 8-byte header length");
}

TEST_CASE("S2 model file: huge header length") {
  check_model_refused(le64(~uint64_t{0}) + "{}", "past the end of the file", true);
  check_model_refused(le64(uint64_t{1} << 62) + "{}", "past the end of the file");
}

TEST_CASE("S3 model file: header length over the 100 MB cap") {
  // A sparse file: the header length is in bounds, the header is not read.
  const fs::path p = scratch() / "bad" / "huge_header.safetensors";
  write_bytes(p, le64(100'000'008) + "{");
  fs::resize_file(p, 100'000'016);
  check_refused(phasor_cli("info " + quote(p)), "exceeds the limit of 100000000 bytes");
  fs::remove(p);
}

TEST_CASE("S4 model file: header not JSON, or JSON but not an object") {
  check_model_refused(assemble("{not json at all", ""), "header is not valid JSON", true);
  check_model_refused(assemble("[1, 2, 3]", ""), "header is not a JSON object");
  check_model_refused(assemble("{\"a\": 1e999}", ""), "header is not valid JSON");
}

TEST_CASE("S5 model file: deeply nested header") {
  const std::string deep = "{\"a\":" + std::string(200000, '[') + std::string(200000, ']') + "}";
  check_model_refused(assemble(deep, ""), "entry must be a JSON object");
}

TEST_CASE("S6 model file: data_offsets past the end of the data section") {
  Parts p = model_parts();
  const std::string t = first_tensor(p.header);
  p.header[t]["data_offsets"][1] = p.data.size() + 4;
  check_model_refused(assemble(p), "past the end of the data section", true);
}

TEST_CASE("S7 model file: data_offsets that end before they begin") {
  Parts p = model_parts();
  const std::string t = first_tensor(p.header);
  p.header[t]["data_offsets"] = {8, 4};
  check_model_refused(assemble(p), "end before they begin");
}

TEST_CASE("S8 model file: overlapping tensors") {
  Parts p = model_parts();
  // The second tensor starts 4 bytes early (and ends 4 bytes early, keeping its size).
  std::vector<std::string> names;
  for (const auto& [k, v] : p.header.items())
    if (k != "__metadata__") names.push_back(k);
  REQUIRE(names.size() >= 2);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return p.header[a]["data_offsets"][0].get<uint64_t>() < p.header[b]["data_offsets"][0].get<uint64_t>();
  });
  Json& offsets = p.header[names[1]]["data_offsets"];
  offsets = {offsets[0].get<uint64_t>() - 4, offsets[1].get<uint64_t>() - 4};
  check_model_refused(assemble(p), "overlap", true);
}

TEST_CASE("S9 model file: bytes that belong to no tensor (a gap, or trailing bytes)") {
  Parts p = model_parts();
  p.data += "trailing";
  check_model_refused(assemble(p), "gap in the data section");
}

TEST_CASE("S10 model file: shape and byte count disagree") {
  Parts p = model_parts();
  const std::string t = first_tensor(p.header);
  p.header[t]["shape"].push_back(2);
  check_model_refused(assemble(p), "do not match dtype", true);
}

TEST_CASE("S11 model file: unknown dtype, or a dtype Phasor does not load") {
  Parts p = model_parts();
  const std::string t = first_tensor(p.header);
  p.header[t]["dtype"] = "Q7";
  check_model_refused(assemble(p), "unknown dtype 'Q7'", true);
  // F16 is a safetensors dtype, but not one a Phasor model holds.
  const std::string f16 = assemble("{\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", "abcd");
  check_model_refused(f16, "which Phasor does not load");
}

TEST_CASE("S12 model file: negative, fractional or overflowing shape") {
  check_model_refused(assemble("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", ""),
                      "shape must hold non-negative integers");
  check_model_refused(assemble("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", ""),
                      "shape must hold non-negative integers");
  check_model_refused(assemble("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904],\"data_offsets\":[0,0]}}", ""),
                      "is too large");
  // Empty (a zero dimension), but the other dimensions' strides overflow: the
  // regression seed fuzz/corpus/safetensors/regression_zero_dim_huge_strides.
  check_model_refused(assemble("{\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4611686018427387904],"
                               "\"data_offsets\":[0,0]}}", ""),
                      "too large to index");
}

TEST_CASE("S13 model file: a tensor entry without data_offsets, or not an object") {
  check_model_refused(assemble("{\"w\":{\"dtype\":\"F32\",\"shape\":[0]}}", ""), "has no data_offsets");
  check_model_refused(assemble("{\"w\":[1,2]}", ""), "entry must be a JSON object");
}

TEST_CASE("S14 model file: the same tensor name twice") {
  // JSON keeps the last of two equal keys: the first one's bytes belong to no tensor.
  const std::string h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  check_model_refused(assemble(h, std::string(8, '\0')), "gap in the data section");
}

TEST_CASE("S15 model file: __metadata__ that is not an object of strings") {
  Parts p = model_parts();
  p.header["__metadata__"]["format"] = 7;
  check_model_refused(assemble(p), "must be a string");
}

TEST_CASE("S16 model file: a safetensors file that is not a Phasor model") {
  check_model_refused(model_bytes({{"w", ones({2, 2})}}, {{"format", "pt"}}), "not a Phasor model", true);
}

TEST_CASE("S17 model file: config in __metadata__ that is not JSON, invalid, or too large") {
  const nn::StateDict tensors = CausalLM(tiny_cli_config(), 1).state_dict();
  check_model_refused(model_bytes(tensors, {{"format", "phasor-model"}, {"config", "{d_model: 16"}}), "is not valid JSON");
  Json c = to_json(tiny_cli_config());
  c["n_heads"] = 3;
  check_model_refused(model_bytes(tensors, {{"format", "phasor-model"}, {"config", c.dump()}}), "not divisible by n_heads");
  c = to_json(tiny_cli_config());
  c["no_such_key"] = 1;
  check_model_refused(model_bytes(tensors, {{"format", "phasor-model"}, {"config", c.dump()}}), "unknown key 'no_such_key'");
  // A config that claims a huge model, whatever the tensors: refused before anything is allocated.
  c = to_json(tiny_cli_config());
  c["d_model"] = int64_t{1} << 40;
  c["n_heads"] = 2;
  check_model_refused(model_bytes(tensors, {{"format", "phasor-model"}, {"config", c.dump()}}), "more than the limit of 2^31", true);
}

TEST_CASE("S18 model file: tensor names that do not match the model (missing, unexpected, renamed)") {
  nn::StateDict tensors = CausalLM(tiny_cli_config(), 1).state_dict();
  const auto meta = model_metadata(tiny_cli_config());
  nn::StateDict missing = tensors;
  missing.erase(missing.begin());
  check_model_refused(model_bytes(missing, meta), "missing", true);
  nn::StateDict extra = tensors;
  extra.emplace("evil\nname", ones({1}));  // a newline in a name must not break the one line
  check_model_refused(model_bytes(extra, meta), "unexpected evil\\x0aname");
  nn::StateDict renamed;
  for (const auto& [k, v] : tensors) renamed.emplace("model." + k, v);
  check_model_refused(model_bytes(renamed, meta), "unexpected model.");
}

TEST_CASE("S19 model file: a tensor of the wrong shape or dtype") {
  nn::StateDict tensors = CausalLM(tiny_cli_config(), 1).state_dict();
  const auto meta = model_metadata(tiny_cli_config());
  nn::StateDict wrong_shape = tensors;
  wrong_shape.begin()->second = ones({3, 3});
  check_model_refused(model_bytes(wrong_shape, meta), "shape mismatch", true);
  nn::StateDict wrong_dtype = tensors;
  wrong_dtype.begin()->second = wrong_dtype.begin()->second.to(DType::Float64);
  check_model_refused(model_bytes(wrong_dtype, meta), "a Phasor model stores F32");
  // BF16 loads as a tensor (nn/checkpoint.cpp), but a model holds F32 only.
  wrong_dtype.begin()->second = tensors.begin()->second.to(DType::BFloat16);
  check_model_refused(model_bytes(wrong_dtype, meta), "is bfloat16; a Phasor model stores F32", true);
}

TEST_CASE("S20 model file: weights holding NaN or Inf") {
  nn::StateDict tensors = CausalLM(tiny_cli_config(), 1).state_dict();
  for (const float bad : {NAN, INFINITY}) {
    nn::StateDict t = tensors;
    Tensor w = t.begin()->second.contiguous().clone();
    w.data<float>()[0] = bad;
    t.begin()->second = w;
    check_model_refused(model_bytes(t, model_metadata(tiny_cli_config())), "holds NaN or Inf values", true);
  }
}

TEST_CASE("S21 model file: truncated (a save that never finished, copied by hand)") {
  const std::string whole = read_bytes(model_file("valid"));
  check_model_refused(whole.substr(0, whole.size() / 2), "past the end");
  check_model_refused(whole.substr(0, 20), "past the end of the file");
}

TEST_CASE("S22 model file: missing, or a folder") {
  check_refused(phasor_cli("info " + quote(scratch() / "absent.safetensors")), "No such file");
  // A folder stands for its model.safetensors, or a run's latest checkpoint; any other folder is refused.
  const fs::path empty = fresh_folder(scratch() / "no_checkpoint");
  check_refused(phasor_cli("eval --checkpoint " + quote(empty) + " --data " + quote(data_file())), "neither a model.safetensors");
  check_refused(phasor_cli("info " + quote(empty)), "neither a model.safetensors");
  const fs::path run = fresh_folder(scratch() / "dangling_run");
  write_bytes(run / "latest", "ckpt-00000040\n");
  check_refused(phasor_cli("generate --checkpoint " + quote(run) + " --prompt hi --tokens 4"), "names ckpt-00000040");
  write_bytes(run / "latest", "../../elsewhere\n");
  check_refused(phasor_cli("generate --checkpoint " + quote(run) + " --prompt hi --tokens 4"), "does not name a checkpoint folder");
}

// ============================================================== C: config files (train --config)

namespace {
// Only --config and --run-dir: flags would override what the file says.
void check_config_refused(const std::string& text, const std::string& must_mention) {
  const fs::path p = scratch() / "configs" / "config.json";
  write_bytes(p, text);
  const fs::path run = scratch() / "refused" / "run";
  fs::remove_all(run.parent_path());
  fs::create_directories(run.parent_path());
  check_refused(phasor_cli("train --config " + quote(p) + " --run-dir " + quote(run)), must_mention);
  CHECK_MESSAGE(!fs::exists(run), "run folder left behind: ", run.string());
}
}  // namespace

TEST_CASE("C1 config file: missing, or a folder") {
  check_train_refused("--config " + quote(scratch() / "absent.json"), "cannot be read");
  fs::create_directories(scratch() / "a_folder.json");
  check_train_refused("--config " + quote(scratch() / "a_folder.json"), "a_folder.json' is a folder");
}

TEST_CASE("C2 config file: empty, binary, or not valid JSON") {
  check_config_refused("", "is not valid JSON");
  check_config_refused(std::string("\x00\xff\xfe\x01\n\x7f", 6), "is not valid JSON");
  check_config_refused("{\"steps\": 3,,}", "is not valid JSON");
}

TEST_CASE("C3 config file: JSON that is not an object") {
  check_config_refused("[1, 2]", "expected a JSON object");
  check_config_refused("{\"model\": 5}", "expected a JSON object");
}

TEST_CASE("C4 config file: unknown key") {
  check_config_refused("{\"stpes\": 3}", "unknown key 'stpes'");
  check_config_refused("{\"model\": {\"dmodel\": 3}}", "unknown key 'dmodel'");
  // A model field at the top level: the error says where it belongs.
  check_config_refused("{\"d_model\": 64}", "'d_model' is a model field: it goes under \"model\"");
}

TEST_CASE("C5 config file: a value of the wrong type") {
  check_config_refused("{\"lr\": \"fast\"}", "'lr' must be a number");
  check_config_refused("{\"seed\": -1}", "'seed' must be a non-negative integer");
  check_config_refused("{\"model\": {\"d_model\": 1.5}}", "'d_model' must be an integer");
  check_config_refused("{\"model\": {\"tie_embeddings\": 1}}", "'tie_embeddings' must be true or false");
}

TEST_CASE("C6 config file: values out of range") {
  check_config_refused("{\"model\": {\"d_model\": 16, \"n_heads\": 3}}", "not divisible by n_heads");
  check_config_refused("{\"val_fraction\": 1.5}", "val_fraction must be in [0, 1)");
  check_config_refused("{\"model\": {\"position\": \"bogus\"}}", "unknown position 'bogus'");
}

TEST_CASE("C7 config file: sizes too large to build") {
  check_config_refused("{\"model\": {\"n_layers\": 100000000}}", "more than the limit of 2^31");
  check_config_refused("{\"model\": {\"vocab_size\": 9223372036854775807}}", "more than the limit of 2^31");
}

// ============================================================== D: data files

TEST_CASE("D1 data file: empty") {
  write_bytes(scratch() / "empty.txt", "");
  check_train_refused("--steps 2 --data " + quote(scratch() / "empty.txt"), "is empty");
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(scratch() / "empty.txt")), "is empty");
}

TEST_CASE("D2 data file: binary bytes are accepted (every byte is a token)") {
  std::string bytes;
  for (int i = 0; i < 4096; ++i) bytes += static_cast<char>((i * 167 + i / 256) & 0xff);
  write_bytes(scratch() / "binary.bin", bytes);
  const fs::path run = scratch() / "binary_run";
  const Cli t = phasor_cli(train_args(run, "--steps 2 --data " + quote(scratch() / "binary.bin")));
  CHECK_MESSAGE(t.status == 0, t.err);
  const Cli e = phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(scratch() / "binary.bin") + " --seq-len 16 --json");
  CHECK_MESSAGE(e.status == 0, e.err);
  check_nothing_lost();
}

TEST_CASE("D3 data file: larger than the 1 GiB limit") {
  const fs::path huge = scratch() / "huge.txt";  // sparse: takes no disk space
  write_bytes(huge, "x");
  fs::resize_file(huge, (uintmax_t{1} << 30) + 1);
  check_train_refused("--steps 2 --data " + quote(huge), "more than the limit of 1 GiB");
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(huge)), "more than the limit of 1 GiB");
  fs::remove(huge);
}

TEST_CASE("D4 data file: too short for one window, or for the validation part") {
  write_bytes(scratch() / "short.txt", "In the beginning");
  check_train_refused("--steps 2 --data " + quote(scratch() / "short.txt"), "needs 17");
  check_train_refused("--steps 2 --val-fraction 0.001", "validation part has 4 tokens");
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(scratch() / "short.txt") + " --seq-len 16"),
                "hold no window");
}

TEST_CASE("D5 data: a folder without text, or neither a file nor a built-in corpus") {
  fs::create_directories(scratch() / "no_text" / "empty_sub");
  check_train_refused("--steps 2 --data " + quote(scratch() / "no_text"), "holds no text");
  check_train_refused("--steps 2 --data no_such_corpus", "neither a file nor a built-in corpus");
}

// ============================================================== F: flag values

TEST_CASE("F1 flags: unknown flag, missing required option, no subcommand, a flag given twice") {
  check_refused(phasor_cli("eval --checkpoint x --data y --bogus 1"), "--bogus");
  check_refused(phasor_cli("eval --data " + quote(data_file())), "--checkpoint is required");
  check_refused(phasor_cli(""), "subcommand");
  check_train_refused("--steps 2 --steps 3", "--steps");
}

TEST_CASE("F2 flags: not a number, or out of the integer range") {
  check_train_refused("--steps abc", "Could not convert: --steps = abc");
  // CLI11 alone clamps this to 2^63-1, and the run trains forever.
  check_train_refused("--steps 99999999999999999999", "value 99999999999999999999 is out of the 64-bit integer range");
  check_train_refused("--steps 2 --seed 18446744073709551616", "out of the 64-bit integer range");
  check_refused(phasor_cli("generate --checkpoint " + quote(model_file("valid")) + " --prompt hi --tokens 1.5"), "--tokens");
}

TEST_CASE("F3 flags: zero, negative or NaN where the command needs otherwise") {
  const std::string m = quote(model_file("valid"));
  check_refused(phasor_cli("eval --checkpoint " + m + " --data " + quote(data_file()) + " --seq-len 0"), "--seq-len");
  check_refused(phasor_cli("eval --checkpoint " + m + " --data " + quote(data_file()) + " --batch 0"), "--batch");
  check_refused(phasor_cli("eval --checkpoint " + m + " --data " + quote(data_file()) + " --max-windows -1"), "--max-windows");
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --tokens -1"), "--tokens");
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --top-k -1"), "--top-k");
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --temperature nan"), "temperature");
  check_train_refused("--steps -1", "steps must be non-negative");
  check_train_refused("--steps 2 --batch 0", "batch must be positive");
  check_train_refused("--steps 2 --lr 0", "lr > 0");
  check_train_refused("--steps 2 --lr nan", "lr > 0");
  check_train_refused("--steps 2 --val-fraction 1", "val_fraction must be in [0, 1)");
  check_train_refused("--steps 2 --val-fraction 0", "give --val-data");
  check_train_refused("--steps 2 --beta1 1", "beta1 must be in [0, 1)");
  check_train_refused("--steps 2 --grad-clip -1", "grad_clip");
  check_train_refused("--steps 2 --max-bad-steps 0", "max_bad_steps must be positive");
  check_train_refused("--steps 2 --threads -1", "threads must be non-negative");
  check_train_refused("--steps 2 --rope-base nan", "rope_base");
}

TEST_CASE("F4 flags: sizes too large to build") {
  check_train_refused("--steps 2 --batch 9223372036854775807", "tokens per step");
  check_train_refused("--steps 2 --n-layers 100000000", "more than the limit of 2^31");
  check_train_refused("--steps 2 --d-model 1099511627776", "more than the limit of 2^31");
  check_refused(phasor_cli("generate --checkpoint " + quote(model_file("valid")) + " --prompt hi --tokens 9223372036854775807"),
                "limit of 1048576 positions");
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(data_file()) +
                           " --seq-len 9223372036854775807"),
                "eval: --seq-len 9223372036854775807 exceeds the 1048576 positions Phasor supports");
}

TEST_CASE("F5 flags: a value holding a newline or control bytes stays on one line") {
  check_train_refused("--steps 2 --position \"$(printf 'bo\\ngus\\001')\"", "unknown position 'bo\\x0agus\\x01'");
  check_train_refused("--steps 2 --data \"$(printf 'no\\nsuch')\"", "'no\\x0asuch' is neither a file");
}

// ============================================================== P: prompts

TEST_CASE("P1 prompt: longer than a 'learned' model's context, alone or with --tokens") {
  ModelConfig c = tiny_cli_config(Position::Learned);
  c.max_seq_len = 16;
  const fs::path m = model_file("learned16", c);
  check_refused(phasor_cli("generate --checkpoint " + quote(m) + " --prompt " + quote(std::string(40, 'a')) + " --tokens 1"),
                "exceeds max_seq_len 16");
  check_refused(phasor_cli("generate --checkpoint " + quote(m) + " --prompt abcd --tokens 13"), "exceeds max_seq_len 16");
  const Cli ok = phasor_cli("generate --checkpoint " + quote(m) + " --prompt abcd --tokens 12");
  CHECK_MESSAGE(ok.status == 0, ok.err);
  CHECK(ok.out.size() == 4 + 12 + 1);
}

TEST_CASE("P2 prompt: bytes outside the model's vocabulary; an empty prompt starts a new line") {
  const Cli empty = phasor_cli("generate --checkpoint " + quote(model_file("valid")) + " --prompt '' --tokens 3");
  CHECK_MESSAGE(empty.status == 0, empty.err);
  CHECK(empty.out.size() == 3 + 1);  // the newline it starts from is not echoed
  ModelConfig c = tiny_cli_config();
  c.vocab_size = 128;
  check_refused(phasor_cli("generate --checkpoint " + quote(model_file("vocab128", c)) + " --prompt \"$(printf 'caf\\303\\251')\""),
                "outside the model's vocabulary of 128");
}

TEST_CASE("P3 prompt: longer than max_seq_len on a model without a hard limit is accepted") {
  const Cli r = phasor_cli("generate --checkpoint " + quote(model_file("valid")) + " --prompt " + quote(std::string(60, 'a')) +
                           " --tokens 5 --seed 1");
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.size() == 60 + 5 + 1);
}

// ============================================================== E: evaluation

TEST_CASE("E1 eval: --seq-len beyond a 'learned' model's max_seq_len") {
  ModelConfig c = tiny_cli_config(Position::Learned);
  c.max_seq_len = 16;
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("learned16", c)) + " --data " + quote(data_file()) + " --seq-len 17"),
                "exceeds max_seq_len 16");
}

TEST_CASE("E2 eval: --seq-len longer than the data") {
  check_refused(phasor_cli("eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(data_file()) + " --seq-len 5000"),
                "hold no window");
}

// ============================================================== R: run folders, resume, plot

TEST_CASE("R1 run folder: already holds a run") {
  const std::map<std::string, std::string> before = tree_bytes(guard_run());
  check_refused(phasor_cli(train_args(guard_run(), "--steps 3")), "already holds a run");
  CHECK(tree_bytes(guard_run()) == before);
}

TEST_CASE("R2 run folder: under a regular file") {
  write_bytes(scratch() / "plain_file", "x");
  check_refused(phasor_cli(train_args(scratch() / "plain_file" / "run")), "cannot create run folder");
  CHECK(read_bytes(scratch() / "plain_file") == "x");
}

namespace {
// A copy of the guard run broken by `breakage`; --resume must refuse it and leave it as it was.
void check_resume_refused(const std::function<void(const fs::path&)>& breakage, const std::string& must_mention,
                          const std::string& extra = "--steps 4") {
  const fs::path run = scratch() / "broken" / "run";
  fs::remove_all(run.parent_path());
  fs::create_directories(run.parent_path());
  fs::copy(guard_run(), run, fs::copy_options::recursive);
  breakage(run);
  const std::map<std::string, std::string> before = tree_bytes(run);
  check_refused(phasor_cli("train --resume " + quote(run) + " " + extra), must_mention);
  CHECK(tree_bytes(run) == before);
}
std::string latest_of(const fs::path& run) {
  std::string s = read_bytes(run / "latest");
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}
}  // namespace

TEST_CASE("R3 resume: no run, or `latest` naming a missing folder") {
  fs::create_directories(scratch() / "not_a_run");
  check_refused(phasor_cli("train --resume " + quote(scratch() / "not_a_run")), "no checkpoint");
  check_resume_refused([](const fs::path& run) { fs::remove_all(run / latest_of(run)); }, "does not exist");
}

TEST_CASE("R4 resume: a truncated or corrupt checkpoint file") {
  check_resume_refused([](const fs::path& run) {
    const fs::path m = run / latest_of(run) / "model.safetensors";
    const std::string b = read_bytes(m);
    write_bytes(m, b.substr(0, b.size() - 10));
  }, "model.safetensors");
  check_resume_refused([](const fs::path& run) { write_bytes(run / latest_of(run) / "optimizer.safetensors", "junk"); },
                       "optimizer.safetensors");
  check_resume_refused([](const fs::path& run) { write_bytes(run / latest_of(run) / "state.json", "{\"step\": "); }, "invalid JSON");
  check_resume_refused([](const fs::path& run) {
    const fs::path s = run / latest_of(run) / "state.json";
    Json j = Json::parse(read_bytes(s));
    j.erase("sampler_offset");
    write_bytes(s, j.dump());
  }, "missing or malformed training state");
  check_resume_refused([](const fs::path& run) {
    const fs::path s = run / latest_of(run) / "state.json";
    Json j = Json::parse(read_bytes(s));
    j["options"]["lr"] = "fast";
    write_bytes(s, j.dump());
  }, "'lr' must be a number");
}

TEST_CASE("R5 resume: --steps not beyond the steps already done") {
  check_resume_refused([](const fs::path&) {}, "has done 2 of its 2 steps", "");
  check_resume_refused([](const fs::path&) {}, "has done 2 of its 1 steps", "--steps 1");
}

TEST_CASE("R6 plot: a missing run, a corrupt log, an unwritable output") {
  check_refused(phasor_cli("plot " + quote(scratch() / "absent_run")), "does not exist");
  const fs::path run = scratch() / "corrupt_log";
  // A corrupt line before others (a corrupt last line alone is skipped with a warning: a write cut short).
  write_bytes(run / "log.jsonl", "{\"step\": 1, \"loss\": 2}\n" + std::string(1, '\0') + "\xff junk\n{\"step\": 2, \"loss\": 1}\n");
  check_refused(phasor_cli("plot " + quote(run) + " --out " + quote(scratch() / "out.svg")), "log.jsonl");
  CHECK(!fs::exists(scratch() / "out.svg"));
  write_bytes(scratch() / "plain_file2", "x");
  check_refused(phasor_cli("plot " + quote(guard_run()) + " --out " + quote(scratch() / "plain_file2" / "out.svg")), "out.svg");
}

// ============================================================== regressions found by fuzzing and review

TEST_CASE("regression: seq_len = 2^63-1 is refused without overflowing (fuzz/corpus/data/regression_seq_len_overflow.bin)") {
  // Each message used to compute seq_len + 1 in int64 (undefined behaviour, reported by UBSan).
  const std::vector<int64_t> tokens(100, 7);
  const int64_t huge = INT64_MAX;
  CHECK_THROWS_WITH_AS(split_tokens(tokens, 0.1, huge), doctest::Contains("needs 9223372036854775808"), Error);
  CHECK_THROWS_WITH_AS(EvalWindows(tokens, huge), doctest::Contains("needs at least 9223372036854775808"), Error);
  CHECK_THROWS_AS(BatchSampler(tokens, 2, huge, 1), Error);
  // And a batch whose size overflows is refused by the sampler itself.
  CHECK_THROWS_WITH_AS(BatchSampler(tokens, INT64_MAX / 2, 8, 1, 0, 4), doctest::Contains("too large a batch"), Error);
}

TEST_CASE("regression: an empty tensor whose other dimensions overflow the strides (fuzz/corpus/safetensors/regression_zero_dim_huge_strides.safetensors)") {
  safetensors::Contents c;
  c.tensors.push_back({"empty", {"F32", {0, int64_t{1} << 62, int64_t{1} << 62}, ""}});
  CHECK_THROWS_WITH_AS(nn::from_contents(safetensors::parse(safetensors::serialize(c), "x"), "x"),
                       doctest::Contains("too large to index"), Error);
  c.tensors[0].second.shape = {0, 3, 5};  // an ordinary empty tensor still loads
  CHECK(nn::from_contents(c, "x").at("empty").shape() == Dims({0, 3, 5}));
}

// ============================================================== issue 27: runs that end, numbers, outputs, special files

namespace {

// A command with a shorter bound than phasor_cli's: a hang (a FIFO opened for
// reading waits for a writer) fails the case in seconds, not minutes.
Cli phasor_cli_within(int seconds, const std::string& args, const std::string& env = "") {
  return run_shell(env + " timeout -s KILL " + std::to_string(seconds) + " " + phasor_command() + " " + args, scratch());
}

// A FIFO at p (a fresh one): nothing ever writes to it.
fs::path make_fifo(const fs::path& p) {
  fs::create_directories(p.parent_path());
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  return p;
}

// A gradient file of the guard run's model, as `phasor grad` writes it (F32,
// the model's own parameter names and shapes).
fs::path gradient_file() {
  const fs::path out = scratch() / "grad" / "window0.safetensors";
  if (!fs::exists(out)) {
    fs::create_directories(out.parent_path());
    const Cli g = phasor_cli("grad --checkpoint " + quote(latest_folder(guard_run()) / "model.safetensors") + " --data " + quote(data_file()) +
                             " --seq-len 16 --out " + quote(out));
    REQUIRE_MESSAGE(g.status == 0, g.err);
  }
  return out;
}

}  // namespace

TEST_CASE("R7 train: a NaN or Inf step at the last step, at a checkpoint step, or --steps 0 still ends with a checkpoint") {
  // The last of 2 steps gives a NaN loss: the run saves its checkpoint (the
  // default --ckpt-every 0 saves only at the end) and reports the validation it computed.
  for (const std::string kind : {"loss", "inf", "grad"}) {
    const fs::path run = fresh_folder(scratch() / "nan_last") / "run";
    const Cli r = run_shell("PHASOR_FAULT_NAN_AT_STEP=1,1," + kind + " timeout -s KILL 600 " + phasor_command() + " " + train_args(run),
                            scratch());
    CHECK_MESSAGE(r.status == 0, r.err);
    CHECK(latest_name(run) == "ckpt-00000002");
    CHECK(r.out.find("validation loss 0.0000") == std::string::npos);
    CHECK(phasor_cli("info " + quote(run / "ckpt-00000002" / "model.safetensors")).status == 0);
    const Json state = Json::parse(read_bytes(run / "ckpt-00000002" / "state.json"));
    CHECK(state.at("skipped_steps") == 1);
    CHECK(state.at("step") == 2);
  }
  // A --ckpt-every save that falls on a skipped step is taken at the next good
  // step (not into the bad step, not lost): steps 1 skipped, so 3 rather than 2.
  const fs::path periodic = fresh_folder(scratch() / "nan_period") / "run";
  const Cli p = run_shell("PHASOR_FAULT_NAN_AT_STEP=1 timeout -s KILL 600 " + phasor_command() + " " +
                              train_args(periodic, "--steps 4 --ckpt-every 2"),
                          scratch());
  CHECK_MESSAGE(p.status == 0, p.err);
  CHECK(fs::is_directory(periodic / "ckpt-00000003"));
  CHECK(latest_name(periodic) == "ckpt-00000004");
  CHECK(Json::parse(read_bytes(periodic / "ckpt-00000003" / "state.json")).at("skipped_steps") == 1);
  // A run of no steps: the initial model, as a checkpoint that resumes.
  const fs::path none = fresh_folder(scratch() / "zero_steps") / "run";
  const Cli z = phasor_cli(train_args(none, "--steps 0"));
  CHECK_MESSAGE(z.status == 0, z.err);
  CHECK(latest_name(none) == "ckpt-00000000");
  CHECK(z.out.find("loss not computed") != std::string::npos);
  const Cli more = phasor_cli("train --resume " + quote(none) + " --steps 1");
  CHECK_MESSAGE(more.status == 0, more.err);
  CHECK(latest_name(none) == "ckpt-00000001");
}

TEST_CASE("R8 resume: a model or optimizer file that is not one, whatever its tensor names and shapes") {
  // A `phasor grad` output (the model's names and shapes, "format": "phasor-gradient") copied over the model.
  check_resume_refused([](const fs::path& run) {
    fs::copy_file(gradient_file(), run / latest_of(run) / "model.safetensors", fs::copy_options::overwrite_existing);
  }, "not a Phasor model");
  // A model file where the optimizer state belongs.
  check_resume_refused([](const fs::path& run) {
    fs::copy_file(run / latest_of(run) / "model.safetensors", run / latest_of(run) / "optimizer.safetensors",
                  fs::copy_options::overwrite_existing);
  }, "not a Phasor optimizer state");
  // A Phasor model of the same shapes but another config (another rope_base).
  check_resume_refused([](const fs::path& run) {
    const fs::path m = run / latest_of(run) / "model.safetensors";
    std::map<std::string, std::string> metadata;
    const nn::StateDict tensors = nn::load_tensors(m.string(), &metadata);
    ModelConfig c = config_from_metadata(metadata, m.string());
    c.rope_base = 500.0;
    write_bytes(m, model_bytes(tensors, model_metadata(c)));
  }, "is not the run's");
}

TEST_CASE("C8 unsigned fields: the whole 64-bit range round-trips through save and resume; negatives and narrowing refused") {
  for (const std::string seed : {"9223372036854775808", "18446744073709551615"}) {
    const fs::path run = fresh_folder(scratch() / "big_seed") / "run";
    const Cli t = phasor_cli(train_args(run, "--steps 1 --seed " + seed));
    REQUIRE_MESSAGE(t.status == 0, t.err);
    CHECK(Json::parse(read_bytes(run / "config.json")).at("seed").dump() == seed);
    const Cli r = phasor_cli("train --resume " + quote(run) + " --steps 2");
    CHECK_MESSAGE(r.status == 0, r.err);
    CHECK(latest_name(run) == "ckpt-00000002");
    // And from a config file.
    const fs::path config = write_bytes(scratch() / "big_seed.json", "{\"seed\": " + seed + "}");
    const fs::path run2 = fresh_folder(scratch() / "big_seed_config") / "run";
    const Cli c = phasor_cli(train_args(run2, "--steps 1 --config " + quote(config)));
    CHECK_MESSAGE(c.status == 0, c.err);
  }
  check_train_refused("--steps 2 --seed -1", "--seed");
  write_bytes(scratch() / "neg_seed.json", "{\"seed\": -1}");
  check_train_refused("--steps 2 --config " + quote(scratch() / "neg_seed.json"), "'seed' must be a non-negative integer, got -1");
  // An int field must not keep the low 32 bits of a larger number (2^32 + 1 threads read as 1).
  write_bytes(scratch() / "wide_threads.json", "{\"threads\": 4294967297}");
  check_train_refused("--steps 2 --config " + quote(scratch() / "wide_threads.json"), "'threads' must be an integer in");
  write_bytes(scratch() / "huge_steps.json", "{\"steps\": 9223372036854775808}");
  check_train_refused("--config " + quote(scratch() / "huge_steps.json"), "'steps' must be an integer in");
}

TEST_CASE("F6 flags: every number has a finite, bounded range") {
  check_train_refused("--steps 2 --lr inf", "lr must be at most 1, got inf");
  check_train_refused("--steps 2 --lr 1e300", "lr must be at most 1");
  check_train_refused("--steps 2 --threads 100000", "threads must be at most 1024");
  check_train_refused("--steps 2 --position xpos --xpos-scale-base 1e300", "xpos_scale_base must be at most 1000000");
  check_train_refused("--steps 2 --rope-base inf", "rope_base must be at most");
  check_train_refused("--steps 2 --norm-eps 1e300", "norm_eps must be at most 1");
  check_train_refused("--steps 2 --grad-clip inf", "grad_clip must be at most");
  check_train_refused("--steps 2 --weight-decay 1e9", "weight_decay must be at most 10");
  check_train_refused("--steps 2 --min-lr inf", "min_lr must be at most 1");
  check_train_refused("--steps 2000000000000", "steps must be at most 1000000000000");
  check_train_refused("--steps 2 --seq-len 2000000", "seq_len must be at most 1048576");
  check_train_refused("--steps 2 --max-seq-len 4194304 --position learned", "max_seq_len must be at most 1048576");
  check_train_refused("--steps 2 --dist-timeout inf", "--dist-timeout");
  write_bytes(scratch() / "inf_lr.json", "{\"lr\": 1e308, \"steps\": 2}");
  check_train_refused("--config " + quote(scratch() / "inf_lr.json"), "lr must be at most 1");
  const std::string m = quote(model_file("valid"));
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --temperature inf"), "--temperature");
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --temperature 1e300"), "--temperature");
  check_refused(phasor_cli("generate --checkpoint " + m + " --prompt hi --top-k 99999999999999"), "--top-k");
  check_refused(phasor_cli("eval --checkpoint " + m + " --data " + quote(data_file()) + " --batch 1099511627776"), "--batch");
  check_refused(phasor_cli("curvature --checkpoint " + m + " --data " + quote(data_file()) + " --seq-len 16 --tol nan"), "--tol");
  check_refused(phasor_cli("curvature --checkpoint " + m + " --data " + quote(data_file()) + " --seq-len 16 --tol inf"), "--tol");
  check_refused(phasor_cli("curvature --checkpoint " + m + " --data " + quote(data_file()) + " --seq-len 16 --max-hvps 9000000000"),
                "--max-hvps");
  // More threads than this machine's cores: lowered to them, with a message, and the run trains.
  const fs::path run = fresh_folder(scratch() / "many_threads") / "run";
  const Cli t = phasor_cli(train_args(run, "--steps 1 --threads 1024"));
  CHECK_MESSAGE(t.status == 0, t.err);
  CHECK(t.err.find("--threads 1024 is more than the") != std::string::npos);
  CHECK(latest_name(run) == "ckpt-00000001");
}

TEST_CASE("O1 output paths: an --out that is the command's own input, or a file of a run it does not own") {
  const fs::path run = fresh_folder(scratch() / "outputs") / "run";
  fs::copy(guard_run(), run, fs::copy_options::recursive);
  const std::map<std::string, std::string> before = tree_bytes(run);
  const fs::path model = run / latest_of(run) / "model.safetensors";
  const std::string data = quote(data_file());
  const std::string data_before = read_bytes(data_file());
  check_refused(phasor_cli("plot " + quote(run) + " --out " + quote(run / "latest")), "would replace 'latest' of the training run");
  check_refused(phasor_cli("plot " + quote(run) + " --out " + quote(run / "log.jsonl")), "is the log it reads");
  check_refused(phasor_cli("plot " + quote(run) + " --heads --out " + quote(run / "config.json")), "of the training run");
  check_refused(phasor_cli("grad --checkpoint " + quote(model) + " --data " + data + " --seq-len 16 --out " + quote(model)),
                "is the --checkpoint it reads");
  check_refused(phasor_cli("grad --checkpoint " + quote(model) + " --data " + data + " --seq-len 16 --out " + data),
                "is the --data it reads");
  check_refused(phasor_cli("grad --checkpoint " + quote(model) + " --data " + data + " --seq-len 16 --out " +
                           quote(run / latest_of(run) / "optimizer.safetensors")),
                "a file of the checkpoint");
  // Through another spelling of the same file: a symlink, a path with "..".
  fs::create_symlink(model, scratch() / "outputs" / "link.safetensors");
  check_refused(phasor_cli("curvature --checkpoint " + quote(scratch() / "outputs" / "link.safetensors") + " --data " + data +
                           " --seq-len 16 --out " + quote(run / latest_of(run) / ".." / latest_of(run) / "model.safetensors")),
                "is the --checkpoint it reads");
  check_refused(phasor_cli("attention --checkpoint " + quote(model) + " --text hi --layer 0 --head 0 --out " + quote(model)),
                "is the --checkpoint it reads");
  CHECK(tree_bytes(run) == before);
  CHECK(read_bytes(data_file()) == data_before);
  // train: the run's own files must not replace its data or config.
  const fs::path folder = fresh_folder(scratch() / "data_in_run");
  write_bytes(folder / "config.json", sample_text(4096));
  const Cli t = phasor_cli(train_args(folder, "--steps 2 --data " + quote(folder / "config.json")));
  check_refused(t, "is the --data it reads");
  CHECK(read_bytes(folder / "config.json") == sample_text(4096));
  // sweep --out a training run.
  check_refused(phasor_cli("sweep --out " + quote(run) + " --report-only"), "holds a training run");
  CHECK(tree_bytes(run) == before);
}

TEST_CASE("O2 written files: a symlink planted at a temporary's old name, or at a run's log, is not followed") {
  const fs::path dir = fresh_folder(scratch() / "planted");
  const fs::path target = write_bytes(dir / "victim.txt", "precious");
  // `exec` keeps the shell's pid, which the old temporary names (<out>.tmp.<pid>) used.
  const auto run_planted = [&](const std::string& planted, const std::string& args, const std::string& env = "") {
    return run_shell("sh -c " + quote("ln -s " + quote(target) + " " + quote(planted) + ".tmp.$$; " + env + "exec " +
                                      phasor_command() + " " + args),
                     scratch());
  };
  const Cli p = run_planted((dir / "loss.svg").string(), "plot " + quote(guard_run()) + " --out " + quote(dir / "loss.svg"));
  CHECK_MESSAGE(p.status == 0, p.err);
  CHECK(read_bytes(target) == "precious");
  CHECK(read_bytes(dir / "loss.svg").find("<svg") != std::string::npos);
  // The corpus cache, written on first use of a built-in corpus.
  const fs::path cache = fresh_folder(dir / "cache");
  const Cli c = run_planted((cache / "arith-v1.txt").string(),
                            "eval --checkpoint " + quote(model_file("valid")) + " --data arith --seq-len 16 --max-windows 1",
                            "export PHASOR_CACHE=" + quote(cache) + "; ");
  CHECK_MESSAGE(c.status == 0, c.err);
  CHECK(read_bytes(target) == "precious");
  CHECK(fs::file_size(cache / "arith-v1.txt") > 1000);
  // A run's log.jsonl that is a symlink: refused, its target untouched.
  const fs::path run = fresh_folder(dir / "run");
  fs::create_symlink(target, run / "log.jsonl");
  const Cli t = phasor_cli(train_args(run, "--steps 1"));
  check_one_line_failure(t, "log.jsonl");
  CHECK(read_bytes(target) == "precious");
  // Nothing but the planted links is left under a temporary's name.
  for (const std::string& tmp : temporaries(dir)) {
    CHECK_MESSAGE(fs::is_symlink(tmp), "partial file left: ", tmp);
    fs::remove(tmp);
  }
}

TEST_CASE("O3 standard output that cannot be written (/dev/full): one line and a non-zero exit") {
  const std::string m = quote(model_file("valid"));
  const auto to_full = [](const std::string& args) { return run_shell("{ " + phasor_command() + " " + args + " > /dev/full; }", scratch()); };
  check_refused(to_full("info " + m), "cannot write the output to standard output: No space left on device");
  check_refused(to_full("eval --checkpoint " + m + " --data " + quote(data_file()) + " --seq-len 16 --json"), "No space left on device");
  check_refused(to_full("generate --checkpoint " + m + " --prompt hi --tokens 5"), "No space left on device");
  check_refused(to_full("plot " + quote(guard_run()) + " --out " + quote(scratch() / "full.svg")), "No space left on device");
  check_refused(to_full("--help"), "No space left on device");
  fs::remove(scratch() / "full.svg");
}

TEST_CASE("O4 an output folder inside an input folder (a run or sweep that would read its own output) is refused at the start") {
  const fs::path dir = fresh_folder(scratch() / "self_input");
  const fs::path data = dir / "texts";
  write_bytes(data / "a.txt", sample_text(4096));
  write_bytes(data / "b.txt", sample_text(2048));
  const std::map<std::string, std::string> before = tree_bytes(data);
  const std::string in = " --data " + quote(data);
  // train --run-dir inside --data, by any spelling: directly, equal, through a symlink or "..", relative.
  fs::create_symlink(data, dir / "link");
  for (const fs::path& run : {data / "run", data, dir / "link" / "run", data / "x" / ".." / "run"}) {
    CAPTURE(run);
    check_refused(phasor_cli(train_args(run, "--steps 2" + in)), "is inside the --data '" + data.string() + "' it reads");
  }
  const Cli relative = run_shell("cd " + quote(dir) + " && timeout -s KILL 600 " + phasor_command() + " " +
                                     train_args("texts/sub/run", "--steps 2 --data texts"), scratch());
  check_one_line_failure(relative, "is inside the --data 'texts' it reads");
  // --val-data's folder too.
  check_refused(phasor_cli(train_args(data / "run", "--steps 2 --val-data " + quote(data))), "is inside the --val-data");
  // sweep --out inside a --data folder (--stop-after 0: before, it wrote its plan there and exited 0).
  check_refused(phasor_cli("sweep --data " + quote(data) + " --out " + quote(data / "sub") + " --steps 1 --seeds 1 --stop-after 0"),
                "sweep: --out '" + (data / "sub").string() + "' is inside the --data");
  CHECK(tree_bytes(data) == before);  // nothing written there
  // Beside the data, both run.
  const Cli ok = phasor_cli(train_args(dir / "run", "--steps 1" + in));
  CHECK_MESSAGE(ok.status == 0, ok.err);
}

TEST_CASE("D6 data, model, config or log that is not a regular file (a FIFO, a device): refused without waiting") {
  const fs::path fifo = make_fifo(scratch() / "special" / "fifo");
  check_refused(phasor_cli_within(60, "info " + quote(fifo)), "not a regular file (a FIFO)");
  check_refused(phasor_cli_within(60, "eval --checkpoint " + quote(model_file("valid")) + " --data " + quote(fifo) + " --seq-len 16"),
                "not a regular file (a FIFO)");
  check_refused(phasor_cli_within(60, "eval --checkpoint " + quote(model_file("valid")) + " --data /dev/zero --seq-len 16"),
                "not a regular file (a device)");
  const fs::path run = scratch() / "refused" / "run";
  fs::remove_all(run.parent_path());
  check_refused(phasor_cli_within(60, train_args(run, "--steps 2 --data " + quote(fifo))), "not a regular file (a FIFO)");
  check_refused(phasor_cli_within(60, train_args(run, "--steps 2 --config " + quote(fifo))), "not a regular file (a FIFO)");
  CHECK(!fs::exists(run));
  // A run whose log or `latest` is a FIFO.
  const fs::path fake = fresh_folder(scratch() / "special" / "run");
  make_fifo(fake / "log.jsonl");
  check_refused(phasor_cli_within(60, "plot " + quote(fake) + " --out " + quote(scratch() / "special" / "out.svg")), "not a regular file");
  make_fifo(fake / "latest");
  check_refused(phasor_cli_within(60, "train --resume " + quote(fake) + " --steps 3"), "not a regular file");
  // And a bound on a regular file read whole: the model loader's (sparse, so nothing is written).
  CHECK_THROWS_WITH_AS(read_file_bytes(data_file().string(), 100), doctest::Contains("more than the limit of 100 bytes"), Error);
}
