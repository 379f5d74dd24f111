// phasor::nn::AdamW against torch::optim::AdamW (LibTorch): the same
// parameters, the same gradient sequence and learning-rate schedule, two
// parameter groups (weight decay 0.1 and none), and a complex64 parameter
// (which PyTorch updates through its real view, so LibTorch gets that view as
// a real [.., 2] parameter). Parameters and both moments must agree to 1e-6
// relative in float32 after every step.

#define PHASOR_TEST_WITH_TORCH  // LibTorch first, then doctest: see tests/helpers.h
#include "tests/helpers.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/optim.h"
#include "phasor.h"

using namespace phasor::test;

namespace {

// A real float32 Phasor tensor (or the real view of a complex64 one) as a LibTorch tensor.
torch::Tensor real_torch(const phasor::Tensor& t) {
  return to_torch(t.is_complex() ? phasor::ops::view_as_real(t) : t);
}

std::vector<float> values(const phasor::Tensor& t) {
  return (t.is_complex() ? phasor::ops::view_as_real(t) : t).to_vector<float>();
}
std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Worst |phasor - torch| / max(|torch|, floor): the element-wise relative error,
// entries smaller than `floor` being judged against `floor` instead (llm.c's
// atol + rtol |ref| with atol = rtol * floor).
double worst_relative(const std::vector<float>& got, const std::vector<float>& want, double floor = 0.0) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    const double denom = std::max(std::abs(static_cast<double>(want[i])), floor);
    worst = std::max(worst, denom == 0.0 ? d : d / denom);
  }
  return worst;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

torch::optim::AdamWParamState& torch_state(torch::optim::AdamW& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamWParamState&>(*opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
}

}  // namespace

TEST_CASE("AdamW matches LibTorch's AdamW step by step: two groups, weight decay 0.1 and none, a complex parameter") {
  torch::manual_seed(0);
  phasor::Generator gen(2024);
  const double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1, max_lr = 2e-2, min_lr = 2e-3;

  // Phasor parameters: decayed w1 [4, 3], w2 [5], z complex [3]; undecayed b [3], g [2, 2].
  struct Param {
    std::string name;
    phasor::Tensor phasor;
    torch::Tensor torch;
    bool decayed;
    std::vector<float> initial;
  };
  std::vector<Param> params;
  auto add = [&](const std::string& name, phasor::Tensor t, bool decayed) {
    t.requires_grad_();
    torch::Tensor tt = real_torch(t).set_requires_grad(true);
    params.push_back({name, t, tt, decayed, values(t)});
  };
  add("w1", phasor::randn({4, 3}, phasor::DType::Float32, &gen), true);
  add("w2", phasor::randn({5}, phasor::DType::Float32, &gen), true);
  add("z", phasor::randn({3}, phasor::DType::Complex64, &gen), true);
  add("b", phasor::randn({3}, phasor::DType::Float32, &gen), false);
  add("g", phasor::uniform({2, 2}, 0.5, 1.5, phasor::DType::Float32, &gen), false);

  phasor::nn::NamedTensors decayed, plain;
  std::vector<torch::Tensor> tdecayed, tplain;
  for (const Param& p : params) {
    (p.decayed ? decayed : plain).emplace_back(p.name, p.phasor);
    (p.decayed ? tdecayed : tplain).push_back(p.torch);
  }
  phasor::nn::AdamW ours({{decayed, wd, 1.0}, {plain, 0.0, 1.0}}, {max_lr, beta1, beta2, eps});

  const auto torch_options = [&](double decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(max_lr).betas(std::make_tuple(beta1, beta2)).eps(eps).weight_decay(decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(tdecayed, torch_options(wd));
  groups.emplace_back(tplain, torch_options(0.0));
  torch::optim::AdamW theirs(std::move(groups), torch::optim::AdamWOptions(max_lr));

  const int steps = 8, warmup = 2;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    const double lr = phasor::nn::warmup_cosine_lr(step, warmup, steps, max_lr, min_lr);
    ours.set_lr(lr);
    for (auto& group : theirs.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);

    for (Param& p : params) {
      // Gradients of varied scale, with an occasional sign flip of the whole tensor.
      const double scale = 0.05 * std::pow(3.0, step % 3) * (step % 4 == 3 ? -1.0 : 1.0);
      const phasor::Tensor g = phasor::randn(p.phasor.shape(), p.phasor.dtype(), &gen) * scale;
      p.phasor.set_grad(g);
      p.torch.mutable_grad() = real_torch(g);
    }
    ours.step();
    theirs.step();

    const phasor::nn::StateDict state = ours.state();
    for (const Param& p : params) {
      CAPTURE(p.name);
      const std::vector<float> mine = values(p.phasor), ref = values(p.torch);
      // A parameter that an update brings close to zero is known to a few ulps of
      // the update, not of itself: entries below 0.01 count against 0.01.
      const double err = worst_relative(mine, ref, 1e-2);
      CHECK_MESSAGE(err <= 1e-6, "parameter relative error ", err);
      const auto& ts = torch_state(theirs, p.torch);
      CHECK(ts.step() == step + 1);
      // The first moment m = beta1 m + (1 - beta1) g cancels when gradients change
      // sign (LibTorch's kernels round differently, e.g. with fused multiply-adds),
      // leaving small entries known only to a few ulps of the tensor's scale: it is
      // compared relative to that scale.
      const std::vector<float> m_ref = values(ts.exp_avg());
      const double em = worst_relative(values(state.at("exp_avg." + p.name)), m_ref, max_abs(m_ref));
      const double ev = worst_relative(values(state.at("exp_avg_sq." + p.name)), values(ts.exp_avg_sq()));
      CHECK_MESSAGE(em <= 1e-6, "exp_avg relative error ", em);
      CHECK_MESSAGE(ev <= 1e-6, "exp_avg_sq relative error ", ev);
    }
  }
  CHECK(ours.steps() == steps);
  // The run moved every parameter far beyond the tolerance, so agreement means something.
  for (const Param& p : params) CHECK_MESSAGE(worst_relative(values(p.phasor), p.initial) > 1e-3, p.name);
}

TEST_CASE("LibTorch and Phasor disagree when the weight decay differs (the comparison has teeth)") {
  phasor::Generator gen(7);
  phasor::Tensor p = phasor::randn({6}, phasor::DType::Float32, &gen);
  p.requires_grad_();
  torch::Tensor tp = real_torch(p).set_requires_grad(true);
  phasor::nn::AdamW ours({{{{"p", p}}, 0.0, 1.0}}, {1e-2, 0.9, 0.999, 1e-8});
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{tp});
  torch::optim::AdamW theirs(std::move(groups), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  const phasor::Tensor g = phasor::randn({6}, phasor::DType::Float32, &gen);
  p.set_grad(g);
  tp.mutable_grad() = real_torch(g);
  ours.step();
  theirs.step();
  CHECK(worst_relative(values(p), values(tp)) > 1e-5);
}
