// The complex-gradient study (app/gradient.h, `phasor grad`, train --log-heads):
// window gradients against central finite differences of the evaluation loss
// in float64, the Euler-transform gradients dL/dr and dL/dphi against the
// autograd gradients of the composed rotation's r and phi and against the
// chain rule to the complex queries/keys, one CLI run read back from its
// file, the logged per-head gradient norms, and the command's bad input.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/evaluate.h"
#include "app/gradient.h"
#include "app/train.h"
#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "models/probe.h"
#include "models/transformer.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

fs::path scratch() { return scratch_root("grad"); }

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "And God said, Let there be light: and there was light " + std::to_string(i * 7 % 31) + ".\n";
  return text;
}

std::vector<int64_t> sample_tokens() { return ByteTokenizer().encode(sample_text()); }

ModelConfig tiny_config(Position position) {
  // d = 8, P = 4
  return model_config(position, {.d_model = 16, .n_layers = 2, .n_heads = 2, .d_ff = 32, .max_seq_len = 24, .cmha_init = CmhaInit::Paper});
}

// Every CMHA parameter and norm gain moved off its initial value, so each term of the maths counts.
std::unique_ptr<CausalLM> tiny_model(Position position, uint64_t seed = 5) {
  auto model = std::make_unique<CausalLM>(tiny_config(position), seed);
  Generator gen(seed + 100);
  NoGradGuard no_grad;
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.ends_with(".phase_bias")) ops::axpy_(p, uniform(p.shape(), -2.0, 2.0, DType::Float32, &gen), 1.0);
    if (name.ends_with(".beta")) ops::axpy_(p, uniform(p.shape(), -0.5, 0.8, DType::Float32, &gen), 1.0);
    if (name.ends_with("norm.weight")) ops::axpy_(p, normal(p.shape(), 0.0, 0.2, DType::Float32, &gen), 1.0);
    if (name.ends_with(".weight") && p.dim() == 2) ops::axpy_(p, normal(p.shape(), 0.0, 0.1, DType::Float32, &gen), 1.0);
  }
  return model;
}

// Runs the model in float64 from here on (the buffers of ALiBi stay float32 constants).
void to_float64(const CausalLM& model) {
  for (const auto& [name, p] : model.named_parameters()) p.set_data(ops::contiguous(ops::to(p, DType::Float64)));
}

// The spec's loss of window w: `phasor eval` of just that window's L + 1 tokens.
double window_loss(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t window) {
  const std::vector<int64_t> slice(tokens.begin() + window * seq_len, tokens.begin() + (window + 1) * seq_len + 1);
  return evaluate(model, slice, seq_len).loss;
}

struct Probe {
  std::string name;
  int64_t index;
  double analytic, numeric;
};

// Central differences of window_loss for three elements of every parameter
// (float64 model), beside the analytic gradient `grads` gives for them.
std::vector<Probe> finite_differences(const CausalLM& model, const nn::NamedTensors& grads, const std::vector<int64_t>& tokens,
                                      int64_t seq_len, int64_t window) {
  constexpr double kEps = 1e-5;
  Generator gen(9);
  std::vector<Probe> out;
  const auto params = model.named_parameters();
  REQUIRE(params.size() == grads.size());
  for (size_t t = 0; t < params.size(); ++t) {
    const auto& [name, p] = params[t];
    REQUIRE(grads[t].first == name);
    REQUIRE(grads[t].second.shape() == p.shape());
    const std::vector<double> g = grads[t].second.to_vector<double>();
    double* data = p.data<double>();
    for (int k = 0; k < 3; ++k) {
      const auto i = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(p.numel()));
      const double saved = data[i];
      data[i] = saved + kEps;
      const double up = window_loss(model, tokens, seq_len, window);
      data[i] = saved - kEps;
      const double down = window_loss(model, tokens, seq_len, window);
      data[i] = saved;
      out.push_back({name, i, g[static_cast<size_t>(i)], (up - down) / (2 * kEps)});
    }
  }
  return out;
}

// The worst |analytic - numeric| / (atol + rtol |numeric|) (<= 1 passes), with a description.
std::pair<double, std::string> worst(const std::vector<Probe>& probes, double atol, double rtol) {
  double ratio = 0;
  std::string where;
  for (const Probe& p : probes) {
    const double r = std::abs(p.analytic - p.numeric) / (atol + rtol * std::abs(p.numeric));
    if (!(r <= ratio)) {
      ratio = std::isnan(r) ? INFINITY : r;
      where = p.name + "[" + std::to_string(p.index) + "]: analytic " + std::to_string(p.analytic) + ", numeric " +
              std::to_string(p.numeric);
    }
  }
  return {ratio, where};
}

const Tensor& find(const nn::NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  FAIL("no tensor named ", name);
  static Tensor none;
  return none;
}

Cli phasor_cli(const std::string& args) { return run_shell(phasor_command() + " " + args, scratch()); }

const fs::path& data_file() {
  static const fs::path p = write_bytes(scratch() / "text.txt", sample_text());
  return p;
}

fs::path checkpoint(Position position) {
  const fs::path p = scratch() / (std::string(position_name(position)) + ".safetensors");
  if (!fs::exists(p)) save_model(p.string(), *tiny_model(position));
  return p;
}

}  // namespace

TEST_CASE("window gradients match central differences of the window's evaluation loss (float64)") {
  const std::vector<int64_t> tokens = sample_tokens();
  constexpr int64_t kSeqLen = 16, kWindow = 2;
  for (Position position : {Position::ComplexFormer, Position::Rope, Position::Alibi, Position::Learned}) {
    CAPTURE(position);
    const auto model = tiny_model(position);
    to_float64(*model);
    const WindowGradients g = window_gradients(*model, tokens, kSeqLen, kWindow, false);
    CHECK(g.windows == (static_cast<int64_t>(tokens.size()) - 1) / kSeqLen);
    CHECK(g.loss == doctest::Approx(window_loss(*model, tokens, kSeqLen, kWindow)).epsilon(1e-12));
    for (const auto& entry : model->named_parameters()) CHECK_MESSAGE(!entry.second.grad().defined(), entry.first, " keeps a .grad");

    const std::vector<Probe> probes = finite_differences(*model, g.parameters, tokens, kSeqLen, kWindow);
    const auto result = worst(probes, 1e-8, 1e-6);
    INFO("worst: ", result.second);
    CHECK(result.first <= 1.0);
    MESSAGE(position, ": ", probes.size(), " elements against finite differences, worst at ", result.first, "x the tolerance (",
            result.second, ")");
    // Most sampled elements have a gradient well above the tolerance: the comparison has something to compare.
    const auto sizeable = std::count_if(probes.begin(), probes.end(), [](const Probe& p) { return std::abs(p.numeric) > 1e-4; });
    CHECK(sizeable * 2 > static_cast<long>(probes.size()));
    // ...and it tells windows apart: window 1's gradient is not window 2's.
    const WindowGradients other = window_gradients(*model, tokens, kSeqLen, 1, false);
    std::vector<Probe> swapped = probes;
    for (Probe& p : swapped) p.analytic = find(other.parameters, p.name).to_vector<double>()[static_cast<size_t>(p.index)];
    CHECK(worst(swapped, 1e-8, 1e-6).first > 100);
  }
}

TEST_CASE("dL/dr and dL/dphi equal the composed rotation's autograd gradients and give the chain rule to q and k") {
  const std::vector<int64_t> tokens = sample_tokens();
  constexpr int64_t kSeqLen = 16, kWindow = 1;
  const auto model = tiny_model(Position::ComplexFormer);
  to_float64(*model);
  const WindowGradients g = window_gradients(*model, tokens, kSeqLen, kWindow, true);
  const ModelConfig& c = model->config();
  REQUIRE(g.activations.size() == static_cast<size_t>(4 * c.n_layers));
  for (const auto& entry : g.activations) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    CHECK_MESSAGE(t.shape() == Dims({kSeqLen, c.n_heads, c.pairs()}), name, " ", t.shape());
    CHECK_MESSAGE(max_abs(t) > 1e-6, name, " is all zeros");
  }

  // The reference: the composed rotation (RotationImpl::Composed) with its r
  // and phi intermediates kept, differentiated by the autograd engine itself.
  // euler_gradients() on the same run must give exactly those; the fused run
  // above agrees up to the composed path's float32 position angle m w_j.
  const Batch b = EvalWindows(tokens, kSeqLen).batch(kWindow, 1);
  model->set_rotation(RotationImpl::Composed);
  {
    const ProbeScope probes(*model);
    model->loss(from_vector(b.inputs, {1, kSeqLen}), from_vector(b.targets, {1, kSeqLen})).backward();
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const AttentionProbe& p = probes.layer(static_cast<size_t>(l));
      const EulerGradients mine = euler_gradients(p, *model->layers[l]->attn);
      const std::string prefix = "layers." + std::to_string(l) + ".attn.";
      const std::tuple<const char*, Tensor, Tensor> triples[] = {{"q_grad_r", p.q_r, mine.q_r},
                                                                 {"q_grad_phi", p.q_phi, mine.q_phi},
                                                                 {"k_grad_r", p.k_r, mine.k_r},
                                                                 {"k_grad_phi", p.k_phi, mine.k_phi}};
      for (const auto& [suffix, reference, computed] : triples) {
        const std::string label = prefix + suffix;
        CAPTURE(label);
        REQUIRE(reference.grad().defined());
        const Tensor expected = reference.grad();
        CHECK(max_abs_diff(computed, expected) <= 1e-12 * max_abs(expected));
        const Tensor fused = find(g.activations, label);
        CHECK(max_abs_diff(fused, ops::select(expected, 0, 0)) <= 1e-4 * max_abs(expected));
      }
    }
  }
  model->zero_grad();
  model->set_rotation(RotationImpl::Fused);

  // The chain rule back through the Euler transform (the spec's derivatives,
  // dr/dz = z / r, dphi/d(x, y) = (-y, x) / (|z|^2 + eps)) gives the gradient
  // of the complex queries and keys themselves: G_z = (dL/dr / r + i dL/dphi / (|z|^2 + eps)) z.
  const ProbeScope probes(*model);
  model->loss(from_vector(b.inputs, {1, kSeqLen}), from_vector(b.targets, {1, kSeqLen})).backward();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const AttentionProbe& p = probes.layer(static_cast<size_t>(l));
    const std::string prefix = "layers." + std::to_string(l) + ".attn.";
    const std::pair<std::string, Tensor> sides[] = {{"q", p.q}, {"k", p.k}};
    for (const auto& [side, z] : sides) {
      const std::string label = prefix + side;
      CAPTURE(label);
      NoGradGuard no_grad;
      const Tensor zz = ops::select(z.detach(), 0, 0);
      const Tensor r2 = square(abs(zz)) + ops::kEulerEps;
      const Tensor d_r = find(g.activations, prefix + side + "_grad_r"), d_phi = find(g.activations, prefix + side + "_grad_phi");
      const Tensor rebuilt = complex(d_r / sqrt(r2), d_phi / r2) * zz;
      const Tensor actual = ops::select(z.grad(), 0, 0);
      CHECK(max_abs(rebuilt - actual) <= 1e-10 * max_abs(actual));
    }
  }

  // Summed over positions, dL/dphi / delta of the queries is the gradient of phase_bias
  // (theta = delta phi + phase_bias + ...), which the finite differences above check.
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".attn.";
    NoGradGuard no_grad;
    const Tensor via_phi = sum(find(g.activations, prefix + "q_grad_phi"), {0}) / model->layers[l]->attn->position_parameter("delta");
    const Tensor direct = find(g.parameters, prefix + "phase_bias");
    CHECK(max_abs_diff(via_phi, direct) <= 1e-10 * max_abs(direct));
  }
}

TEST_CASE("phasor grad writes the window's gradients under the checkpoint's names, matching finite differences") {
  const fs::path ckpt = checkpoint(Position::ComplexFormer), out = scratch() / "g.safetensors";
  const Cli r = phasor_cli("grad --checkpoint " + quote(ckpt) + " --data " + quote(data_file()) +
                           " --seq-len 16 --window 3 --activations --json --out " + quote(out));
  INFO("stderr: ", r.err);
  REQUIRE(r.status == 0);
  std::map<std::string, std::string> metadata;
  const nn::StateDict file = nn::load_tensors(out.string(), &metadata);
  CHECK(metadata["format"] == "phasor-gradient");
  CHECK(metadata["window"] == "3");
  CHECK(metadata["seq_len"] == "16");

  const auto model = load_model(ckpt.string());
  const ModelConfig& c = model->config();
  nn::NamedTensors grads;
  for (const auto& entry : model->named_parameters()) {
    const auto& p = entry.second;
    const std::string& name = entry.first;
    REQUIRE_MESSAGE(file.contains(name), name);
    CHECK(file.at(name).dtype() == DType::Float32);
    CHECK(file.at(name).shape() == p.shape());
    grads.emplace_back(name, file.at(name));
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const char* suffix : {"q_grad_r", "q_grad_phi", "k_grad_r", "k_grad_phi"}) {
      const std::string name = "layers." + std::to_string(l) + ".attn." + suffix;
      REQUIRE_MESSAGE(file.contains(name), name);
      CHECK(file.at(name).shape() == Dims({16, c.n_heads, c.pairs()}));
    }
  CHECK(file.size() == grads.size() + 4 * static_cast<size_t>(c.n_layers));

  // The float32 gradients against float64 finite differences of the same weights.
  const std::vector<int64_t> tokens = sample_tokens();
  to_float64(*model);
  const std::vector<Probe> probes = finite_differences(*model, grads, tokens, 16, 3);
  const auto result = worst(probes, 1e-6, 1e-4);
  INFO("worst: ", result.second);
  CHECK(result.first <= 1.0);
  MESSAGE("phasor grad (float32) against float64 finite differences: worst at ", result.first, "x the tolerance");

  // --json: the loss of the window and the 2-norm of each tensor in the file.
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["loss"].get<double>() == doctest::Approx(window_loss(*model, tokens, 16, 3)).epsilon(1e-5));
  CHECK(j["window"] == 3);
  CHECK(j["windows"] == (static_cast<int64_t>(tokens.size()) - 1) / 16);
  CHECK(j["grad_norms"].size() == grads.size());
  CHECK(j["activation_norms"].size() == 4 * static_cast<size_t>(c.n_layers));
  for (const auto& entry : file) {
    const auto& t = entry.second;
    const std::string& name = entry.first;
    const double n = norm(ops::to(t, DType::Float64)).item<double>();
    const auto& group = j["grad_norms"].contains(name) ? j["grad_norms"] : j["activation_norms"];
    REQUIRE_MESSAGE(group.contains(name), name);
    CHECK_MESSAGE(group[name].get<double>() == doctest::Approx(n).epsilon(1e-5).scale(0), name);  // norms down to 4e-3
  }

  // --json alone prints the same object and writes no file; neither --out nor --json is refused.
  const std::string args = "grad --checkpoint " + quote(ckpt) + " --data " + quote(data_file()) + " --seq-len 16 --window 3 --activations";
  const Cli alone = phasor_cli(args + " --json");
  REQUIRE_MESSAGE(alone.status == 0, alone.err);
  CHECK(nlohmann::json::parse(alone.out) == j);
  const Cli neither = phasor_cli(args);
  CHECK(neither.status != 0);
  CHECK(neither.err.find("give --out FILE") != std::string::npos);

  // The probe changes no number: without --activations, the same gradients bit for bit.
  const fs::path plain = scratch() / "g_plain.safetensors";
  const Cli p = phasor_cli("grad --checkpoint " + quote(ckpt) + " --data " + quote(data_file()) + " --seq-len 16 --window 3 --out " + quote(plain));
  REQUIRE_MESSAGE(p.status == 0, p.err);
  check_same_tensors(plain, out, /*b_may_hold_more=*/true);
}

TEST_CASE("train --log-heads logs the per-head gradient norms of the logged step's batch") {
  TrainOptions o;
  o.model = tiny_config(Position::ComplexFormer);
  o.data = data_file().string();
  o.run_dir = (scratch() / "heads_run").string();
  o.seq_len = 16;
  o.batch = 3;
  o.steps = 3;
  o.log_every = 2;  // logs steps 2 and 3 (the last)
  o.eval_every = 0;
  o.eval_windows = 1;
  o.val_fraction = 0.2;
  o.threads = 1;
  o.log_heads = true;
  train(o);
  // The probes change no number: the same run without them ends bit-identical.
  TrainOptions plain = o;
  plain.log_heads = false;
  plain.run_dir = (scratch() / "heads_run_plain").string();
  train(plain);
  check_same_tensors(fs::path(plain.run_dir) / "ckpt-00000003" / "model.safetensors", fs::path(o.run_dir) / "ckpt-00000003" / "model.safetensors");
  check_same_tensors(fs::path(plain.run_dir) / "ckpt-00000003" / "optimizer.safetensors",
                     fs::path(o.run_dir) / "ckpt-00000003" / "optimizer.safetensors");

  std::vector<nlohmann::json> logged;
  std::ifstream log(o.run_dir + "/log.jsonl");
  for (std::string line; std::getline(log, line);)
    if (auto j = nlohmann::json::parse(line); j.contains("heads")) logged.push_back(j);
  REQUIRE(logged.size() == 2);
  CHECK(logged[0]["step"] == 2);
  for (const auto& j : logged) {
    REQUIRE(j["heads"].size() == static_cast<size_t>(o.model.n_layers));
    for (const auto& layer : j["heads"])
      for (const char* key : {"delta_mean", "phase_bias_mean", "beta", "q_grad_r_norm", "q_grad_phi_norm", "k_grad_r_norm", "k_grad_phi_norm"}) {
        REQUIRE_MESSAGE(layer.contains(key), key);
        CHECK(layer[key].size() == static_cast<size_t>(o.model.n_heads));
      }
  }

  // Step 2's numbers again, independently: the model after one AdamW step on
  // the first batch, then the second batch's backward through the probes.
  const TextSplit data = split_tokens(ByteTokenizer().encode(sample_text()), o.val_fraction, o.seq_len);
  BatchSampler sampler(data.train, o.batch, o.seq_len, o.seed);
  CausalLM model(o.model, o.seed);
  nn::AdamW opt({{model.decayed_parameters(), o.weight_decay, 1.0}, {model.undecayed_parameters(), 0.0, 1.0}},
                nn::AdamWOptions{nn::warmup_cosine_lr(0, o.warmup, o.steps, o.lr, o.min_lr), o.beta1, o.beta2, 1e-8});
  Batch b = sampler.next();
  model.loss(from_vector(b.inputs, {b.batch, b.seq_len}), from_vector(b.targets, {b.batch, b.seq_len})).backward();
  nn::clip_grad_norm(model.parameters(), o.grad_clip);
  opt.step();
  opt.zero_grad();
  b = sampler.next();
  const ProbeScope probes(model);
  model.loss(from_vector(b.inputs, {b.batch, b.seq_len}), from_vector(b.targets, {b.batch, b.seq_len})).backward();
  for (int64_t l = 0; l < o.model.n_layers; ++l) {
    const EulerGradientNorms n = euler_gradient_norms(euler_gradients(probes.layer(static_cast<size_t>(l)), *model.layers[l]->attn));
    const auto& layer = logged[0]["heads"][l];
    for (int64_t h = 0; h < o.model.n_heads; ++h) {
      CAPTURE(l);
      CAPTURE(h);
      CHECK(n.q_r[h] > 0);
      // The norms are 1e-7 .. 1e-4: relative, or any logged value would pass. dL/dphi
      // = Im(G conj(w)) delta must use the delta of the step's own forward pass.
      CHECK(layer["q_grad_r_norm"][h].get<double>() == doctest::Approx(n.q_r[h]).epsilon(1e-4).scale(0));
      CHECK(layer["q_grad_phi_norm"][h].get<double>() == doctest::Approx(n.q_phi[h]).epsilon(1e-4).scale(0));
      CHECK(layer["k_grad_r_norm"][h].get<double>() == doctest::Approx(n.k_r[h]).epsilon(1e-4).scale(0));
      CHECK(layer["k_grad_phi_norm"][h].get<double>() == doctest::Approx(n.k_phi[h]).epsilon(1e-4).scale(0));
    }
  }
}

TEST_CASE("phasor grad refuses bad input with one line and writes nothing") {
  const fs::path out = scratch() / "refused.safetensors";
  const std::string data = " --data " + quote(data_file()) + " --out " + quote(out);
  const auto refused = [&](const std::string& args, const std::string& must_mention) {
    const Cli r = phasor_cli("grad " + args + data);
    CAPTURE(args);
    CHECK(r.status != 0);
    CHECK_MESSAGE(r.err.starts_with("phasor: "), r.err);
    CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    CHECK_MESSAGE(r.err.find(must_mention) != std::string::npos, r.err);
    CHECK(r.out.empty());
    CHECK(!fs::exists(out));
  };
  const std::string cf = "--checkpoint " + quote(checkpoint(Position::ComplexFormer));
  const int64_t windows = (static_cast<int64_t>(sample_tokens().size()) - 1) / 16;
  refused(cf + " --seq-len 16 --window " + std::to_string(windows), "grad: --window " + std::to_string(windows) + " is past the end");
  refused(cf + " --seq-len 16 --window -1", "--window");
  refused(cf + " --seq-len 0", "--seq-len");
  refused(cf + " --seq-len 100000", "hold no window");
  refused("--checkpoint " + quote(checkpoint(Position::Rope)) + " --seq-len 16 --activations", "--activations needs a complexformer model");
  refused("--checkpoint " + quote(checkpoint(Position::Learned)) + " --seq-len 25", "exceeds max_seq_len 24");
  refused("--checkpoint " + quote(scratch() / "missing.safetensors") + " --seq-len 16", "missing.safetensors");
  // And in the library, under the same rules.
  const auto model = tiny_model(Position::Rope);
  CHECK_THROWS_WITH_AS(window_gradients(*model, sample_tokens(), 16, 0, true), doctest::Contains("--activations"), Error);
  CHECK_THROWS_WITH_AS(window_gradients(*model, {1, 2, 3}, 16, 0, false), doctest::Contains("hold no window"), Error);
}
