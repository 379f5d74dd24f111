// Model files and training checkpoints: round trips, the exact on-disk layout
// of docs/spec.md ("Checkpoint layout") read back without Phasor's
// parser, a file written by hand that Phasor must load, clear refusals of
// broken files, and crash safety (an injected write failure leaves the
// previous checkpoint intact, byte for byte).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/train.h"
#include "models/model_io.h"
#include "models/transformer.h"
#include "nn/atomic_file.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path fresh_temp_dir(const std::string& name) { return fresh_folder(scratch_root("checkpoint", /*remove_at_exit=*/true) / name); }

// The bytes of a file that must be there.
std::string existing_bytes(const fs::path& p) {
  REQUIRE(fs::is_regular_file(p));
  return read_bytes(p);
}

// Bitwise equality of two tensors (dtype, shape and every byte).
bool identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

ModelConfig small_config(Position position, bool tie = true) {
  return model_config(position,
                      {.vocab_size = 40, .d_model = 16, .n_layers = 2, .n_heads = 4, .d_ff = 24, .max_seq_len = 12, .tie_embeddings = tie});
}

const Tensor& sample_tokens() {
  static const Tensor t = from_vector<int>({1, 5, 9, 2, 33, 7, 0, 39, 12, 3, 3, 8}, {2, 6});
  return t;
}

// The spec's table of names and shapes, written out independently of the model code.
std::map<std::string, std::vector<int64_t>> spec_tensors(const ModelConfig& c) {
  const int64_t V = c.vocab_size, D = c.d_model, F = c.d_ff, H = c.n_heads, P = c.d_model / c.n_heads / 2;
  std::map<std::string, std::vector<int64_t>> t;
  t["tok_emb.weight"] = {V, D};
  if (c.position == Position::Learned) t["pos_emb.weight"] = {c.max_seq_len, D};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    t[p + "attn_norm.weight"] = {D};
    for (const char* w : {"wq", "wk", "wv", "wo"}) t[p + "attn." + w + ".weight"] = {D, D};
    if (c.position == Position::ComplexFormer) {
      t[p + "attn.delta"] = {H, P};
      t[p + "attn.phase_bias"] = {H, P};
      t[p + "attn.beta"] = {H};
    }
    t[p + "ffn_norm.weight"] = {D};
    t[p + "ffn.w1.weight"] = {F, D};
    t[p + "ffn.w3.weight"] = {F, D};
    t[p + "ffn.w2.weight"] = {D, F};
  }
  t["norm.weight"] = {D};
  if (!c.tie_embeddings) t["lm_head.weight"] = {V, D};
  return t;
}

std::string f32_le(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::string out;
  for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
  return out;
}

// A small text file for training runs.
std::string sample_text() {
  std::string text;
  for (int i = 0; text.size() < 3000; ++i)
    text += "Line " + std::to_string(i) + ": the quick brown fox jumps over " + std::to_string(i * 7 % 13) + " lazy dogs.\n";
  return text;
}

}  // namespace

// ============================================================== model files

TEST_CASE("save_model / load_model round trip gives identical parameters and logits, for every variant") {
  const fs::path dir = fresh_temp_dir("roundtrip");
  for (Position pos : all_positions())
    for (bool tie : {true, false}) {
      CAPTURE(pos);
      CAPTURE(tie);
      ModelConfig c = small_config(pos, tie);
      c.cmha_init = CmhaInit::Paper;  // non-trivial delta
      c.rope_base = 500.0;
      c.norm_eps = 1e-6;
      const CausalLM model(c, 17);
      const std::string path = (dir / (std::string(position_name(pos)) + (tie ? "_tied" : "_untied") + ".safetensors")).string();
      save_model(path, model);
      const auto loaded = load_model(path);
      CHECK(to_json(loaded->config()) == to_json(c));
      CHECK(to_json(read_model_config(path)) == to_json(c));
      const nn::StateDict a = model.state_dict(), b = loaded->state_dict();
      REQUIRE(a.size() == b.size());
      for (const auto& entry : a) CHECK_MESSAGE(identical(entry.second, b.at(entry.first)), entry.first);
      CHECK(identical(model.forward(sample_tokens()), loaded->forward(sample_tokens())));
    }
  fs::remove_all(dir);
}

TEST_CASE("the model file's header is exactly the spec's layout (read without Phasor's parser)") {
  const fs::path dir = fresh_temp_dir("header");
  for (const auto& variant : std::vector<std::pair<std::string, bool>>{
           {"complexformer", true}, {"learned", false}, {"rope", true}, {"alibi", false}, {"none", true}}) {
    const std::string& pos = variant.first;
    const bool tie = variant.second;
    CAPTURE(pos);
    CAPTURE(tie);
    const ModelConfig c = small_config(parse_position(pos), tie);  // the names as the spec writes them
    const CausalLM model(c, 3);
    const fs::path path = dir / (pos + ".safetensors");
    save_model(path.string(), model);
    const std::string file = existing_bytes(path);
    REQUIRE(file.size() >= 8);
    const uint64_t n = read_le64(file);
    REQUIRE(8 + n <= file.size());
    const Json header = Json::parse(file.substr(8, n));
    REQUIRE(header.is_object());

    // __metadata__: format and config (a JSON string holding every key of the spec).
    REQUIRE(header.contains("__metadata__"));
    const Json& meta = header["__metadata__"];
    CHECK(meta.at("format") == "phasor-model");
    REQUIRE(meta.at("config").is_string());
    const Json config = Json::parse(meta.at("config").get<std::string>());
    for (const char* key : {"position", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len", "rope_base", "norm_eps",
                            "tie_embeddings", "xpos_scale_base", "cmha_init"})
      CHECK_MESSAGE(config.contains(key), key);
    CHECK(config.at("position") == pos);
    CHECK(config.at("vocab_size") == 40);
    CHECK(config.at("d_model") == 16);
    CHECK(config.at("n_layers") == 2);
    CHECK(config.at("n_heads") == 4);
    CHECK(config.at("d_ff") == 24);
    CHECK(config.at("max_seq_len") == 12);
    CHECK(config.at("tie_embeddings") == tie);
    CHECK(config.at("rope_base").get<double>() == 10000.0);
    CHECK(config.at("norm_eps").get<double>() == 1e-5);
    CHECK(config.at("xpos_scale_base").get<double>() == 512.0);
    CHECK(config.at("cmha_init") == "rope");

    // Tensors: exactly the spec's names and shapes, all F32, tiling the data section.
    const std::map<std::string, std::vector<int64_t>> want = spec_tensors(c);
    std::map<std::string, std::vector<int64_t>> got;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& entry : header.items()) {
      const std::string& name = entry.key();
      const auto& info = entry.value();
      if (name == "__metadata__") continue;
      CHECK_MESSAGE(info.at("dtype") == "F32", name);
      got[name] = info.at("shape").get<std::vector<int64_t>>();
      const auto off = info.at("data_offsets").get<std::vector<uint64_t>>();
      REQUIRE(off.size() == 2);
      int64_t numel = 1;
      for (int64_t d : got[name]) numel *= d;
      CHECK_MESSAGE(off[1] - off[0] == static_cast<uint64_t>(numel) * 4, name);
      spans.emplace_back(off[0], off[1]);
    }
    CHECK(got == want);
    std::sort(spans.begin(), spans.end());
    uint64_t covered = 0;
    for (const auto& [b, e] : spans) {
      CHECK(b == covered);
      covered = e;
    }
    CHECK(8 + n + covered == file.size());

    // Raw little-endian row-major float32: compare a few tensors byte for byte.
    const nn::StateDict sd = model.state_dict();
    for (const std::string& name : {std::string("tok_emb.weight"), std::string("layers.1.ffn.w2.weight"), std::string("norm.weight")}) {
      const auto off = header.at(name).at("data_offsets").get<std::vector<uint64_t>>();
      const Tensor t = sd.at(name).contiguous();
      std::string expect;
      for (float f : t.to_vector<float>()) expect += f32_le(f);
      CHECK_MESSAGE(file.substr(8 + n + off[0], off[1] - off[0]) == expect, name);
    }
    if (!tie) {
      CHECK(header.contains("lm_head.weight"));
    } else {
      CHECK(!header.contains("lm_head.weight"));
    }
  }
  fs::remove_all(dir);
}

// The JSON forms are written from option tables: these are the bytes earlier
// versions wrote (a checkpoint's config string, a run's config.json), so that
// old and new files compare equal.
TEST_CASE("the config JSON of a checkpoint and of a run is byte for byte what earlier versions wrote") {
  ModelConfig c = small_config(Position::XPos, false);
  c.cmha_init = CmhaInit::Paper;
  const std::string model_json =
      R"({"cmha_init":"paper","d_ff":24,"d_model":16,"max_seq_len":12,"n_heads":4,"n_layers":2,"norm_eps":1e-05,)"
      R"("position":"xpos","rope_base":10000.0,"tie_embeddings":false,"vocab_size":40,"xpos_scale_base":512.0})";
  CHECK(model_metadata(c).at("config") == model_json);
  CHECK(to_json(model_config_from_json(Json::parse(model_json))).dump() == model_json);
  for (const char* name : {"complexformer", "rope", "xpos", "carope", "pope", "complexformer-seed", "alibi", "sinusoidal", "learned", "none"}) {
    CAPTURE(name);
    c.position = parse_position(name);
    CHECK(to_json(c).at("position") == name);
  }

  // `phasor train --steps 0 --run-dir golden --position alibi --cmha-init paper --seed 2^64-1 --log-heads`
  TrainOptions o;
  o.model.position = Position::Alibi;
  o.model.cmha_init = CmhaInit::Paper;
  o.run_dir = "golden";
  o.steps = 0;
  o.seed = 18446744073709551615u;
  o.log_heads = true;
  const std::string run_json = R"({
  "batch": 16,
  "beta1": 0.9,
  "beta2": 0.95,
  "ckpt_every": 0,
  "data": "kjv",
  "device": "cpu",
  "eval_every": 100,
  "eval_windows": 32,
  "grad_clip": 1.0,
  "log_every": 10,
  "log_heads": true,
  "lr": 0.003,
  "max_bad_steps": 5,
  "min_lr": 0.0003,
  "model": {
    "cmha_init": "paper",
    "d_ff": 352,
    "d_model": 128,
    "max_seq_len": 256,
    "n_heads": 4,
    "n_layers": 4,
    "norm_eps": 1e-05,
    "position": "alibi",
    "rope_base": 10000.0,
    "tie_embeddings": true,
    "vocab_size": 256,
    "xpos_scale_base": 512.0
  },
  "run_dir": "golden",
  "seed": 18446744073709551615,
  "seq_len": 128,
  "steps": 0,
  "threads": 0,
  "val_fraction": 0.05,
  "warmup": 30,
  "weight_decay": 0.1
}
)";
  CHECK(to_json(o).dump(2) + "\n" == run_json);
  // And back: an unsigned field takes its whole range (2^64-1 is a JSON number_unsigned), so the run resumes.
  CHECK(train_options_from_json(Json::parse(run_json)).seed == o.seed);
  CHECK(to_json(train_options_from_json(Json::parse(run_json))).dump(2) + "\n" == run_json);
}

TEST_CASE("a model file written by hand from raw bytes (whoever wrote it) loads with the right values") {
  const fs::path dir = fresh_temp_dir("byhand");
  // position complexformer, V 6, D 4, one layer, H 2 (P 1), F 6, tied.
  const int64_t V = 6, D = 4, F = 6;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> tensors{
      {"norm.weight", {D}},
      {"layers.0.ffn.w2.weight", {D, F}},
      {"tok_emb.weight", {V, D}},
      {"layers.0.attn.wq.weight", {D, D}},
      {"layers.0.attn.wk.weight", {D, D}},
      {"layers.0.attn.wv.weight", {D, D}},
      {"layers.0.attn.wo.weight", {D, D}},
      {"layers.0.attn.delta", {2, 1}},
      {"layers.0.attn.phase_bias", {2, 1}},
      {"layers.0.attn.beta", {2}},
      {"layers.0.attn_norm.weight", {D}},
      {"layers.0.ffn_norm.weight", {D}},
      {"layers.0.ffn.w1.weight", {F, D}},
      {"layers.0.ffn.w3.weight", {F, D}},
  };
  // Data in the order above (not sorted by name), header entries in that order,
  // __metadata__ last, no padding, a config with its keys in another order and
  // integral numbers where Phasor writes doubles.
  std::string header = "{";
  std::string data;
  std::map<std::string, std::vector<float>> written;
  int k = 0;
  for (const auto& [name, shape] : tensors) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<float>& vals = written[name];
    for (int64_t i = 0; i < numel; ++i) vals.push_back(static_cast<float>(0.1 * std::sin(100.0 * k + static_cast<double>(i)) + 0.01 * k));
    const uint64_t begin = data.size();
    for (float f : vals) data += f32_le(f);
    header += "\"" + name + "\":{\"shape\":[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) header += ",";
      header += std::to_string(shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "],\"dtype\":\"F32\"},";
    ++k;
  }
  const std::string config =
      R"({\"cmha_init\":\"rope\",\"d_ff\":6,\"d_model\":4,\"max_seq_len\":8,\"n_heads\":2,\"n_layers\":1,)"
      R"(\"norm_eps\":1e-05,\"position\":\"complexformer\",\"rope_base\":10000,\"tie_embeddings\":true,)"
      R"(\"vocab_size\":6,\"xpos_scale_base\":512})";
  header += "\"__metadata__\":{\"config\":\"" + config + "\",\"format\":\"phasor-model\"}}";
  const fs::path path = dir / "byhand.safetensors";
  write_bytes(path, le64(header.size()) + header + data);

  const auto model = load_model(path.string());
  const ModelConfig& c = model->config();
  CHECK(c.position == Position::ComplexFormer);
  CHECK(c.vocab_size == 6);
  CHECK(c.d_model == 4);
  CHECK(c.n_layers == 1);
  CHECK(c.n_heads == 2);
  CHECK(c.d_ff == 6);
  CHECK(c.max_seq_len == 8);
  CHECK(c.tie_embeddings);
  const nn::StateDict sd = model->state_dict();
  CHECK(sd.size() == tensors.size());
  for (const auto& entry : written) {
    const auto& vals = entry.second;
    const std::string& name = entry.first;
    CAPTURE(name);
    REQUIRE(sd.count(name) == 1);
    CHECK(sd.at(name).to_vector<float>() == vals);
  }
  // It runs, and Phasor's own writer reproduces the same model.
  const Tensor tokens = from_vector<int>({0, 1, 2, 3, 4, 5}, {1, 6});
  const Tensor logits = model->forward(tokens);
  CHECK(logits.shape() == Dims{1, 6, 6});
  save_model((dir / "resaved.safetensors").string(), *model);
  CHECK(identical(load_model((dir / "resaved.safetensors").string())->forward(tokens), logits));
  fs::remove_all(dir);
}

TEST_CASE("broken or foreign model files are refused with clear messages") {
  const fs::path dir = fresh_temp_dir("refuse");
  const ModelConfig c = small_config(Position::ComplexFormer);
  const CausalLM model(c, 5);
  const fs::path good = dir / "good.safetensors";
  save_model(good.string(), model);
  const std::string bytes = existing_bytes(good);
  const nn::StateDict sd = model.state_dict();
  const auto meta = model_metadata(c);

  SUBCASE("truncated in the data") {
    const fs::path p = dir / "truncated.safetensors";
    write_bytes(p, bytes.substr(0, bytes.size() / 2));
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, p.string()));
    CHECK(contains(e, "past the end"));
  }
  SUBCASE("truncated in the header") {
    const fs::path p = dir / "truncated_header.safetensors";
    write_bytes(p, bytes.substr(0, 40));
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, p.string()));
    CHECK(contains(e, "header length"));
  }
  SUBCASE("shorter than the length prefix") {
    const fs::path p = dir / "tiny.safetensors";
    write_bytes(p, "abc");
    CHECK(contains(error_of([&] { load_model(p.string()); }), "too short"));
  }
  SUBCASE("garbage bytes") {
    const fs::path p = dir / "garbage.safetensors";
    Generator gen(1);
    std::string junk;
    for (int i = 0; i < 4096; ++i) junk += static_cast<char>(gen.next_u64() & 0xff);
    write_bytes(p, junk);
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, p.string()));
    // A plausible length followed by junk.
    write_bytes(p, le64(16) + std::string(16, '\x07') + junk.substr(0, 64));
    CHECK(contains(error_of([&] { load_model(p.string()); }), "JSON"));
  }
  SUBCASE("valid safetensors that is not a Phasor model") {
    const fs::path p = dir / "foreign.safetensors";
    nn::save_tensors(p.string(), sd);  // no metadata at all
    std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "not a Phasor model"));
    CHECK(contains(e, p.string()));
    CHECK(contains(error_of([&] { read_model_config(p.string()); }), "not a Phasor model"));
    nn::save_tensors(p.string(), sd, {{"format", "pt"}, {"config", meta.at("config")}});
    CHECK(contains(error_of([&] { load_model(p.string()); }), "not a Phasor model"));
  }
  SUBCASE("missing tensor") {
    const fs::path p = dir / "missing.safetensors";
    nn::StateDict s = sd;
    s.erase("layers.1.ffn.w2.weight");
    nn::save_tensors(p.string(), s, meta);
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "missing"));
    CHECK(contains(e, "layers.1.ffn.w2.weight"));
    CHECK(contains(e, p.string()));
  }
  SUBCASE("unexpected tensor") {
    const fs::path p = dir / "extra.safetensors";
    nn::StateDict s = sd;
    s.emplace("lm_head.weight", zeros({40, 16}));  // the config says tied
    nn::save_tensors(p.string(), s, meta);
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "unexpected"));
    CHECK(contains(e, "lm_head.weight"));
  }
  SUBCASE("wrong shape") {
    const fs::path p = dir / "shape.safetensors";
    nn::StateDict s = sd;
    s["layers.0.attn.wq.weight"] = zeros({16, 17});
    nn::save_tensors(p.string(), s, meta);
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "layers.0.attn.wq.weight"));
    CHECK(contains(e, "[16, 17]"));
    CHECK(contains(e, "[16, 16]"));
  }
  SUBCASE("F64 instead of F32") {
    const fs::path p = dir / "f64.safetensors";
    nn::StateDict s = sd;
    s["norm.weight"] = to(sd.at("norm.weight"), DType::Float64);
    nn::save_tensors(p.string(), s, meta);
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "norm.weight"));
    CHECK(contains(e, "F32"));
  }
  SUBCASE("a config that does not validate") {
    const fs::path p = dir / "badconfig.safetensors";
    Json j = to_json(c);
    j["n_heads"] = 3;  // 16 % 3 != 0
    nn::save_tensors(p.string(), sd, {{"format", "phasor-model"}, {"config", j.dump()}});
    const std::string e = error_of([&] { load_model(p.string()); });
    CHECK(contains(e, "n_heads"));
    nn::save_tensors(p.string(), sd, {{"format", "phasor-model"}, {"config", "{not json"}});
    CHECK(contains(error_of([&] { load_model(p.string()); }), "config"));
  }
  SUBCASE("missing file") {
    const std::string e = error_of([&] { load_model((dir / "nope.safetensors").string()); });
    CHECK(contains(e, "nope.safetensors"));
  }
  // The good file is still good.
  CHECK(identical(load_model(good.string())->forward(sample_tokens()), model.forward(sample_tokens())));
  fs::remove_all(dir);
}

// ============================================================== training checkpoints

namespace {
nn::TrainingCheckpoint make_checkpoint(uint64_t seed, int64_t step) {
  const ModelConfig c = small_config(Position::ComplexFormer);
  CausalLM model(c, seed);
  nn::AdamW opt({{model.decayed_parameters(), 0.1, 1.0}, {model.undecayed_parameters(), 0.0, 1.0}}, {1e-3, 0.9, 0.95, 1e-8});
  model.loss(sample_tokens(), sample_tokens()).backward();
  opt.step();
  nn::TrainingCheckpoint ck;
  ck.model = model.state_dict();
  ck.model_metadata = model_metadata(c);
  ck.optimizer = opt.state();
  ck.state = {{"step", step}, {"sampler_seed", seed}, {"sampler_offset", 12345678901234ULL}, {"note", "checkpoint " + std::to_string(seed)}};
  return ck;
}

void check_same_checkpoint(const nn::TrainingCheckpoint& a, const nn::TrainingCheckpoint& b) {
  REQUIRE(a.model.size() == b.model.size());
  for (const auto& entry : a.model) CHECK_MESSAGE(identical(entry.second, b.model.at(entry.first)), entry.first);
  REQUIRE(a.optimizer.size() == b.optimizer.size());
  for (const auto& entry : a.optimizer) CHECK_MESSAGE(identical(entry.second, b.optimizer.at(entry.first)), entry.first);
  CHECK(a.model_metadata == b.model_metadata);
  CHECK(a.state == b.state);
}

std::map<std::string, std::string> folder_bytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = existing_bytes(e.path());
  return out;
}

}  // namespace

TEST_CASE("training checkpoint folder round trip") {
  const fs::path dir = fresh_temp_dir("train_ckpt") / "ckpt-00000007";
  const nn::TrainingCheckpoint ck = make_checkpoint(11, 7);
  nn::save_training_checkpoint(dir.string(), ck);  // creates the folder
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"model.safetensors", "optimizer.safetensors", "state.json"});
  const nn::TrainingCheckpoint back = nn::load_training_checkpoint(dir.string());
  check_same_checkpoint(ck, back);
  CHECK(back.state.at("sampler_offset").get<uint64_t>() == 12345678901234ULL);
  // The model file of a checkpoint is itself a loadable model.
  CHECK(load_model((dir / "model.safetensors").string())->parameter_count() == CausalLM(small_config(Position::ComplexFormer)).parameter_count());

  CHECK(contains(error_of([&] { nn::load_training_checkpoint((dir.parent_path() / "absent").string()); }), "absent"));
  write_bytes(dir / "state.json", "{\"step\": ");
  CHECK(contains(error_of([&] { nn::load_training_checkpoint(dir.string()); }), "state.json"));
  fs::remove(dir / "optimizer.safetensors");
  CHECK(contains(error_of([&] { nn::load_training_checkpoint(dir.string()); }), "optimizer.safetensors"));
  fs::remove_all(dir.parent_path());
}

TEST_CASE("a write failure while saving over a checkpoint leaves it loadable and byte-identical") {
  const fs::path dir = fresh_temp_dir("fault") / "ckpt";
  const nn::TrainingCheckpoint old_ck = make_checkpoint(1, 10), new_ck = make_checkpoint(2, 20);
  nn::save_training_checkpoint(dir.string(), old_ck);
  const std::map<std::string, std::string> before = folder_bytes(dir);
  const size_t model_bytes = before.at("model.safetensors").size();
  for (size_t budget : {size_t{0}, size_t{1}, size_t{8}, size_t{200}, model_bytes / 2, model_bytes - 1}) {
    CAPTURE(budget);
    std::string e;
    {
      WriteFault fault(budget);
      e = error_of([&] { nn::save_training_checkpoint(dir.string(), new_ck); });
    }
    CHECK(contains(e, "model.safetensors"));
    CHECK(contains(e, "No space left"));
    CHECK(folder_bytes(dir) == before);  // nothing replaced, no temporary file left behind
    check_same_checkpoint(old_ck, nn::load_training_checkpoint(dir.string()));
  }
  // Without the fault the new checkpoint replaces the old one.
  nn::save_training_checkpoint(dir.string(), new_ck);
  check_same_checkpoint(new_ck, nn::load_training_checkpoint(dir.string()));
  CHECK(folder_bytes(dir).size() == 3);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("a run whose checkpoint save fails keeps its previous checkpoint as the latest, byte for byte, and resumes") {
  const fs::path root = fresh_temp_dir("run_fault");
  write_bytes(root / "data.txt", sample_text());
  TrainOptions o;
  o.model = small_config(Position::ComplexFormer);
  o.model.vocab_size = 256;
  o.model.n_layers = 1;
  o.data = (root / "data.txt").string();
  o.run_dir = (root / "run").string();
  o.seq_len = 12;
  o.batch = 2;
  o.steps = 3;
  o.warmup = 1;
  o.eval_windows = 2;
  o.threads = 1;
  train(o);
  const std::string first = latest_checkpoint(o.run_dir);
  REQUIRE(fs::path(first).filename() == "ckpt-00000003");
  const std::map<std::string, std::string> before = folder_bytes(first);
  const std::string latest_before = existing_bytes(fs::path(o.run_dir) / "latest");

  // Fail inside the model file, then inside the optimizer file (the model file completes).
  for (size_t budget : {size_t{100}, before.at("model.safetensors").size() + 64}) {
    CAPTURE(budget);
    std::string e;
    {
      WriteFault fault(budget);
      e = error_of([&] { resume(o.run_dir, 6); });
    }
    CHECK(contains(e, "No space left"));
    CHECK(existing_bytes(fs::path(o.run_dir) / "latest") == latest_before);
    CHECK(latest_checkpoint(o.run_dir) == first);
    CHECK(folder_bytes(first) == before);
  }
  // The run continues from the intact checkpoint.
  const TrainSummary s = resume(o.run_dir, 6);
  CHECK(s.steps_done == 6);
  CHECK(fs::path(latest_checkpoint(o.run_dir)).filename() == "ckpt-00000006");
  fs::remove_all(root);
}
