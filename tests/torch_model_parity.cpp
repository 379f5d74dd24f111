// Whole-model parity with the LibTorch version (bench/libtorch): for every
// position variant, tied and untied head, the same weights (Phasor's
// state_dict copied into the LibTorch model through the raw float data) and
// the same batch give the same logits, loss and gradient of every parameter;
// ten AdamW steps from the same start give the same loss sequence; the
// Hessian-vector product of the loss (create_graph in both) agrees; and
// `phasor eval --json` and `phasor_torch eval --json` agree on a checkpoint.
#define PHASOR_TEST_WITH_TORCH  // LibTorch first, then doctest: see tests/helpers.h
#include "tests/helpers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/libtorch/reference_model.h"
#include "models/model_io.h"
#include "models/transformer.h"
#include "nn/atomic_file.h"
#include "nn/optim.h"
#include "phasor.h"

namespace P = phasor;
namespace T = phasor::torch_ref;
using namespace phasor::test;

namespace {

struct Variant {
  P::Position position;
  P::CmhaInit cmha_init = P::CmhaInit::Rope;
  bool tie = true;
  std::string name() const {
    return std::string(P::position_name(position)) +
           (position == P::Position::ComplexFormer ? "/cmha_init=" + std::string(P::cmha_init_name(cmha_init)) : "") +
           (tie ? "/tied" : "/untied");
  }
};

// complexformer twice (cmha_init paper and rope), every other variant once; each tied and untied.
std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (bool tie : {true, false})
    for (P::Position p : P::all_positions()) {
      if (p == P::Position::ComplexFormer) {
        out.push_back({p, P::CmhaInit::Paper, tie});
        out.push_back({p, P::CmhaInit::Rope, tie});
      } else {
        out.push_back({p, P::CmhaInit::Rope, tie});
      }
    }
  return out;
}

P::ModelConfig config_of(const Variant& v) { return parity_config(v.position, v.cmha_init, v.tie); }

// A Phasor model with every parameter off its default (tests/helpers.h):
// random phase_bias and beta, delta perturbed (for cmha_init paper it is
// already random), norm gains around 1, so that every term of the maths is
// exercised.
std::unique_ptr<P::CausalLM> make_phasor_model(const Variant& v, uint64_t seed) { return parity_model(config_of(v), seed); }

// The LibTorch model with Phasor's weights, copied by name.
std::shared_ptr<T::Model> torch_copy_of(const P::CausalLM& model) {
  auto t = std::make_shared<T::Model>(model.config(), 0);
  std::map<std::string, torch::Tensor> state;
  for (const auto& entry : model.named_parameters()) {
    REQUIRE(entry.second.dtype() == P::DType::Float32);
    state.emplace(entry.first, to_torch(entry.second));
  }
  T::load_state(*t, state);
  return t;
}

// Per-tensor comparison |a - b| <= atol + rtol |b| (b = LibTorch); the worst
// element's excess over its tolerance, as a ratio (<= 1 passes).
struct Mismatch {
  std::string name;
  double ratio = 0, abs_err = 0, ref = 0;
  int64_t index = 0;
  double scaled = 0;  // max |a - b| / max |b|: the same comparison free of the tensor's scale
};

Mismatch compare(const std::string& name, const P::Tensor& phasor_t, const torch::Tensor& torch_t, double atol, double rtol) {
  Mismatch m{name};
  REQUIRE_MESSAGE(sizes_of(phasor_t.shape()) == torch_t.sizes().vec(), name, ": shape ", phasor_t.shape(), " vs LibTorch ",
                  torch_t.sizes());
  const auto a = phasor_t.to_vector<double>();
  const auto bt = torch_t.detach().to(torch::kFloat64).contiguous();
  const double* b = bt.data_ptr<double>();
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]);
    double ratio = err / (atol + rtol * std::abs(b[i]));
    if (std::isnan(ratio)) ratio = INFINITY;
    if (ratio > m.ratio) m = {name, ratio, err, b[i], static_cast<int64_t>(i)};
    max_err = std::max(max_err, std::isnan(err) ? INFINITY : err);
    max_ref = std::max(max_ref, std::abs(b[i]));
  }
  m.scaled = max_err / max_ref;
  return m;
}

std::string describe(const Mismatch& m) {
  std::ostringstream os;
  os << m.name << ": element " << m.index << " differs by " << m.abs_err << " (LibTorch value " << m.ref << "), "
     << m.ratio << "x the tolerance atol 1e-5 + rtol 1e-4";
  return os.str();
}

constexpr double kAtol = 1e-5, kRtol = 1e-4;

struct Batch {
  std::vector<int64_t> inputs, targets;
  int64_t b, n;
  P::Tensor phasor_inputs() const { return P::from_vector(inputs, {b, n}); }
  P::Tensor phasor_targets() const { return P::from_vector(targets, {b, n}); }
  torch::Tensor torch_inputs() const { return torch::tensor(inputs, torch::kLong).view({b, n}); }
  torch::Tensor torch_targets() const { return torch::tensor(targets, torch::kLong).view({b, n}); }
};

Batch random_batch(int64_t b, int64_t n, uint64_t seed) {
  P::Generator gen(seed);
  Batch out{{}, {}, b, n};
  const auto r = P::uniform({2, b * n}, 0.0, 256.0, P::DType::Float64, &gen).to_vector<double>();
  for (int64_t i = 0; i < b * n; ++i) {
    out.inputs.push_back(static_cast<int64_t>(r[i]) % 256);
    out.targets.push_back(static_cast<int64_t>(r[b * n + i]) % 256);
  }
  return out;
}

// AdamW groups of both libraries, by the same rule (Phasor's): 2-d weights decay;
// norms, delta, phase_bias and beta do not.
constexpr double kLr = 2e-3, kWeightDecay = 0.1;

std::unique_ptr<P::nn::AdamW> phasor_adamw(const P::CausalLM& m) {
  return std::make_unique<P::nn::AdamW>(
      std::vector<P::nn::ParamGroup>{{m.decayed_parameters(), kWeightDecay, 1.0}, {m.undecayed_parameters(), 0.0, 1.0}},
      P::nn::AdamWOptions{kLr, 0.9, 0.95, 1e-8});
}

std::unique_ptr<torch::optim::AdamW> torch_adamw(T::Model& t, const P::CausalLM& m) {
  std::set<std::string> decayed;
  for (const auto& [name, p] : m.decayed_parameters()) decayed.insert(name);
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& item : t.named_parameters()) (decayed.contains(item.key()) ? decay : no_decay).push_back(item.value());
  const auto options = torch::optim::AdamWOptions(kLr).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(kWeightDecay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

std::string torch_cli_path() {
  // The tests get PHASOR_CLI_PATH (build/phasor); phasor_torch is built at build/bench/libtorch/phasor_torch.
  return (std::filesystem::path(PHASOR_CLI_PATH).parent_path() / "bench" / "libtorch" / "phasor_torch").string();
}

}  // namespace

TEST_CASE("logits, loss and every parameter gradient match LibTorch for every variant") {
  torch::set_num_threads(1);
  const Batch batch = random_batch(3, 20, 7);
  int seed = 11;
  for (const Variant& v : all_variants()) {
    CAPTURE(v.name());
    auto model = make_phasor_model(v, ++seed);
    auto ref = torch_copy_of(*model);

    // Phasor
    model->zero_grad();
    const P::Tensor logits = model->forward(batch.phasor_inputs());
    const P::Tensor loss = P::cross_entropy(P::reshape(logits, {-1, 256}), P::ops::reshape(batch.phasor_targets(), {-1}));
    loss.backward();

    // LibTorch
    const torch::Tensor t_logits = ref->forward(batch.torch_inputs());
    const torch::Tensor t_loss =
        torch::nn::functional::cross_entropy(t_logits.reshape({-1, 256}), batch.torch_targets().reshape({-1}));
    t_loss.backward();

    std::vector<Mismatch> results;
    results.push_back(compare("logits", logits, t_logits, kAtol, kRtol));
    results.push_back(compare("loss", loss, t_loss, kAtol, kRtol));
    auto t_params = ref->named_parameters();
    const auto params = model->named_parameters();
    CHECK(params.size() == t_params.size());
    for (const auto& [name, p] : params) {
      REQUIRE_MESSAGE(t_params.contains(name), name, " has no LibTorch counterpart");
      const torch::Tensor tg = t_params[name].grad();
      REQUIRE_MESSAGE(p.grad().defined(), name, ": Phasor gives no gradient");
      REQUIRE_MESSAGE(tg.defined(), name, ": LibTorch gives no gradient");
      results.push_back(compare("grad " + name, p.grad(), tg, kAtol, kRtol));
    }
    // The model's own loss() is the same number.
    CHECK(std::abs(model->loss(batch.phasor_inputs(), batch.phasor_targets()).item<double>() - t_loss.item<double>()) <=
          kAtol + kRtol * std::abs(t_loss.item<double>()));

    const auto worst = std::max_element(results.begin(), results.end(),
                                        [](const Mismatch& a, const Mismatch& b) { return a.ratio < b.ratio; });
    INFO("worst tensor: ", describe(*worst));
    CHECK(worst->ratio <= 1.0);
    // Many gradients are far below atol; make sure they agree relative to their own size too.
    const auto worst_scaled = std::max_element(results.begin(), results.end(),
                                               [](const Mismatch& a, const Mismatch& b) { return a.scaled < b.scaled; });
    INFO("worst scale-free error: ", worst_scaled->name, " max|diff| / max|LibTorch| = ", worst_scaled->scaled);
    CHECK(worst_scaled->scaled <= 1e-4);
    MESSAGE(v.name(), ": ", results.size(), " tensors agree; worst ", worst->name, " at ", worst->ratio,
            "x the tolerance; worst scale-free ", worst_scaled->name, " ", worst_scaled->scaled);
  }
}

TEST_CASE("the Hessian-vector product of the loss matches LibTorch's create_graph double backward for every variant") {
  torch::set_num_threads(1);
  const Batch batch = random_batch(1, 10, 9);
  int seed = 40;
  for (const Variant& v : all_variants()) {
    if (!v.tie) continue;  // the head's tying changes no second-order path: one of each keeps CI short
    CAPTURE(v.name());
    auto model = make_phasor_model(v, ++seed);
    auto ref = torch_copy_of(*model);
    const auto params = model->named_parameters();
    auto t_params = ref->named_parameters();
    // One random direction, the same in both.
    P::Generator gen(static_cast<uint64_t>(seed) + 7);
    std::vector<P::Tensor> ps, dirs;
    std::vector<torch::Tensor> ts, t_dirs;
    for (const auto& [name, p] : params) {
      REQUIRE(t_params.contains(name));
      ps.push_back(p);
      ts.push_back(t_params[name]);
      dirs.push_back(P::randn(p.shape(), P::DType::Float32, &gen));
      t_dirs.push_back(to_torch(dirs.back()));
    }
    const P::Tensor loss = P::cross_entropy(P::reshape(model->forward(batch.phasor_inputs()), {-1, 256}), P::ops::reshape(batch.phasor_targets(), {-1}));
    const std::vector<P::Tensor> hv = P::HessianVectorProduct(loss, ps)(dirs);

    const torch::Tensor t_loss =
        torch::nn::functional::cross_entropy(ref->forward(batch.torch_inputs()).reshape({-1, 256}), batch.torch_targets().reshape({-1}));
    const auto t_grads = torch::autograd::grad({t_loss}, ts, {}, true, /*create_graph=*/true, /*allow_unused=*/true);
    torch::Tensor inner = torch::zeros({}, torch::kFloat);
    for (size_t i = 0; i < ts.size(); ++i)
      if (t_grads[i].defined()) inner = inner + (t_grads[i] * t_dirs[i]).sum();
    const auto t_hv = torch::autograd::grad({inner}, ts, {}, false, false, /*allow_unused=*/true);

    // The product as one vector: its relative error, and the worst tensor's scale-free error.
    double diff = 0, norm = 0;
    Mismatch worst;
    for (size_t i = 0; i < ts.size(); ++i) {
      const torch::Tensor want = t_hv[i].defined() ? t_hv[i] : torch::zeros_like(ts[i]);
      const Mismatch m = compare("H v " + params[i].first, hv[i], want, kAtol, kRtol);
      if (m.scaled > worst.scaled || worst.name.empty()) worst = m;
      const auto a = hv[i].to_vector<double>();
      const auto bt = want.detach().to(torch::kFloat64).contiguous();
      for (size_t k = 0; k < a.size(); ++k) {
        diff += (a[k] - bt.data_ptr<double>()[k]) * (a[k] - bt.data_ptr<double>()[k]);
        norm += bt.data_ptr<double>()[k] * bt.data_ptr<double>()[k];
      }
    }
    const double relative = std::sqrt(diff / norm);
    MESSAGE(v.name(), ": H v relative error ", relative, "; worst tensor ", worst.name, " scale-free ", worst.scaled);
    CHECK(relative <= 1e-5);  // float32 in both: about 2e-7 here
    CHECK(worst.scaled <= 1e-4);
  }
}

TEST_CASE("ten AdamW steps give the same loss sequence in Phasor and LibTorch") {
  torch::set_num_threads(1);
  std::vector<Batch> batches;
  for (int s = 0; s < 10; ++s) batches.push_back(random_batch(2, 16, 100 + s));
  int seed = 50;
  for (const Variant& v : all_variants()) {
    if (!v.tie && v.position != P::Position::ComplexFormer) continue;  // untied head: once is enough
    CAPTURE(v.name());
    auto model = make_phasor_model(v, ++seed);
    auto ref = torch_copy_of(*model);
    auto opt = phasor_adamw(*model);
    auto t_opt = torch_adamw(*ref, *model);
    // phasor_torch train groups by torch_ref::is_no_decay: the same rule.
    for (const auto& [name, p] : model->decayed_parameters()) CHECK_MESSAGE(!T::is_no_decay(name), name);
    for (const auto& [name, p] : model->undecayed_parameters()) CHECK_MESSAGE(T::is_no_decay(name), name);
    double worst = 0;
    int worst_step = 0;
    std::ostringstream trace;
    for (int step = 0; step < 10; ++step) {
      const Batch& b = batches[step];
      opt->zero_grad();
      const P::Tensor loss = model->loss(b.phasor_inputs(), b.phasor_targets());
      loss.backward();
      opt->step();
      t_opt->zero_grad();
      const torch::Tensor t_loss = ref->loss(b.torch_inputs(), b.torch_targets());
      t_loss.backward();
      t_opt->step();
      const double a = loss.item<double>(), r = t_loss.item<double>(), rel = std::abs(a - r) / std::abs(r);
      trace << " step " << step << ": " << a << " vs " << r << ";";
      if (rel > worst) worst = rel, worst_step = step;
    }
    INFO("losses:", trace.str());
    INFO("worst relative difference ", worst, " at step ", worst_step);
    CHECK(worst <= 1e-4);
    // The weights after ten steps still agree (a looser, informative bound): rtol
    // 1e-3, and an atol of 1e-4 but at most 1e-3 of the tensor's largest weight
    // (the weight matrices are 0.01 .. 0.1, where 1e-4 alone is 0.1% .. 1% of them).
    double worst_param = 0;
    auto t_params = ref->named_parameters();
    for (const auto& [name, p] : model->named_parameters()) {
      const double atol = std::min(1e-4, 1e-3 * t_params[name].detach().abs().max().item<double>());
      worst_param = std::max(worst_param, compare(name, p, t_params[name], atol, 1e-3).ratio);
    }
    CHECK(worst_param <= 1.0);
    MESSAGE(v.name(), ": 10 AdamW steps, worst relative loss difference ", worst, " (step ", worst_step,
            "), final loss ", ref->loss(batches[0].torch_inputs(), batches[0].torch_targets()).item<double>());
  }
}

TEST_CASE("phasor eval --json and phasor_torch eval --json give the same loss") {
  const std::string torch_cli = torch_cli_path();
  REQUIRE_MESSAGE(std::filesystem::exists(torch_cli), "phasor_torch not built at ", torch_cli);
  const std::filesystem::path dir = scratch_root("torch_model_parity");
  const std::string text_path = (dir / "text.txt").string();
  {
    std::ofstream out(text_path, std::ios::binary);
    for (int i = 0; i < 40; ++i) out << "In the beginning was the Word, " << i << " and the Word was with God.\n";
  }
  for (const Variant& v : {Variant{P::Position::ComplexFormer, P::CmhaInit::Paper, true}, Variant{P::Position::Rope, P::CmhaInit::Rope, false},
                           Variant{P::Position::Alibi, P::CmhaInit::Rope, true},
                           Variant{P::Position::Learned, P::CmhaInit::Rope, true}}) {
    CAPTURE(v.name());
    auto model = make_phasor_model(v, 77);
    const std::string ckpt = (dir / (std::string(P::position_name(v.position)) + ".safetensors")).string();
    P::save_model(ckpt, *model);
    const std::string args = " eval --checkpoint " + ckpt + " --data " + text_path + " --seq-len 24 --batch 4 --json";
    const Cli rp = run_shell(std::string(PHASOR_CLI_PATH) + args, dir);
    const Cli rt = run_shell(torch_cli + args + " --threads 1", dir);
    INFO("phasor: ", rp.out, rp.err, "phasor_torch: ", rt.out, rt.err);
    REQUIRE(rp.status == 0);
    REQUIRE(rt.status == 0);
    const auto jp = nlohmann::json::parse(rp.out), jt = nlohmann::json::parse(rt.out);
    CHECK(jp["windows"] == jt["windows"]);
    CHECK(jp["tokens"] == jt["tokens"]);
    const double lp = jp["loss"].get<double>(), lt = jt["loss"].get<double>();
    CHECK(std::abs(lp - lt) <= 1e-5 + 1e-5 * std::abs(lt));
    // And both equal the in-process evaluation of the same weights.
    std::vector<int64_t> tokens;
    for (unsigned char c : P::read_file_bytes(text_path)) tokens.push_back(c);
    auto ref = torch_copy_of(*model);
    CHECK(std::abs(T::evaluate(*ref, tokens, 24, 0, 4) - lt) <= 1e-6);
  }
}
