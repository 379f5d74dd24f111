#include "nn/optim.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/fused.h"
#include "tensor/ops.h"

namespace phasor::nn {

void check_learning_rate(const char* who, double lr) {
  PHASOR_CHECK(std::isfinite(lr) && lr >= 0.0, who, ": invalid learning rate ", lr, " (must be finite and >= 0)");
}

namespace {
// Real view of a parameter-shaped tensor (complex -> interleaved pairs).
Tensor real_view(const Tensor& t) { return t.is_complex() ? ops::view_as_real(t) : t; }

// Each parameter once, by tensor and by name: one listed twice would be updated twice a step.
void check_distinct(const char* who, const std::vector<std::pair<std::string, Tensor>>& params) {
  for (size_t i = 0; i < params.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      PHASOR_CHECK(params[i].second.impl() != params[j].second.impl(), who, ": parameter ", params[i].first, " is ", params[j].first,
                   " again; list each parameter once (it would be updated twice a step)");
      PHASOR_CHECK(params[i].first != params[j].first, who, ": two parameters are named ", params[i].first);
    }
}

// What PyTorch's AdamW refuses (its ValueErrors), and what is not finite.
void check_adamw_options(const AdamWOptions& o) {
  check_learning_rate("AdamW", o.lr);
  PHASOR_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, "AdamW: invalid beta parameter at index 0: ", o.beta1, " (must be in [0, 1))");
  PHASOR_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, "AdamW: invalid beta parameter at index 1: ", o.beta2, " (must be in [0, 1))");
  PHASOR_CHECK(std::isfinite(o.eps) && o.eps >= 0.0, "AdamW: invalid epsilon value ", o.eps, " (must be finite and >= 0)");
}

std::vector<std::pair<std::string, Tensor>> all_params(const std::vector<ParamGroup>& groups) {
  std::vector<std::pair<std::string, Tensor>> all;
  for (const ParamGroup& g : groups) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}
}  // namespace

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : options_(options) {
  check_adamw_options(options);
  for (const ParamGroup& g : groups) {
    PHASOR_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0.0, "AdamW: invalid weight_decay value ", g.weight_decay,
                 " (must be finite and >= 0)");
    PHASOR_CHECK(std::isfinite(g.lr_scale) && g.lr_scale >= 0.0, "AdamW: invalid lr_scale ", g.lr_scale, " (must be finite and >= 0)");
    for (const auto& [name, p] : g.params) PHASOR_CHECK(p.is_contiguous(), "AdamW: parameter ", name, " must be contiguous");
  }
  check_distinct("AdamW", all_params(groups));
  for (const ParamGroup& g : groups)
    for (const auto& [name, p] : g.params)
      slots_.push_back({name, p, zeros(p.shape(), p.dtype(), p.device()), zeros(p.shape(), p.dtype(), p.device()), g.weight_decay, g.lr_scale});
}

void AdamW::step(const Tensor& take) {
  NoGradGuard no_grad;
  if (slots_.empty()) return;
  const Device device = slots_.front().param.device();
  const auto on_device = [&](double v) { return scalar_tensor(v, DType::Float64, device); };
  if (!count_.defined()) count_ = on_device(static_cast<double>(loaded_steps_));
  if (!lr_.defined()) lr_ = on_device(options_.lr);
  const Tensor apply = take.defined() ? ops::to(take, DType::Float64) : on_device(1.0);
  PHASOR_CHECK(apply.numel() == 1 && apply.device() == device, "AdamW: step's condition must be one element on the parameters' device ",
               device, ", got ", apply.shape(), " on ", apply.device());
  ops::binary_(ops::Binary::Add, count_, ops::reshape(apply, {}));
  // 1 - beta^t in float64, as the host computed it (the same pow, on the CPU the same bits).
  const auto correction = [&](double beta) {
    return ops::binary(ops::Binary::Sub, on_device(1.0), ops::binary(ops::Binary::Pow, on_device(beta), count_));
  };
  // The learning rate from the device too (ops::AdamWStep: each group's lr is lr_scale times it).
  const Tensor schedule = ops::stack({ops::reshape(apply, {}), correction(options_.beta1),
                                      ops::unary(ops::Unary::Sqrt, correction(options_.beta2)), lr_}, 0);
  for (Slot& s : slots_) {
    const Tensor grad = s.param.grad();
    if (!grad.defined()) continue;
    const Tensor p = real_view(s.param), g = real_view(grad), m = real_view(s.exp_avg), v = real_view(s.exp_avg_sq);
    ops::adamw_step_(p, g, m, v, {s.lr_scale, s.weight_decay, options_.beta1, options_.beta2, options_.eps, 0.0, 0.0, schedule});
  }
}

void AdamW::set_lr(double lr) {
  check_learning_rate("AdamW", lr);
  options_.lr = lr;
  if (lr_.defined()) ops::fill_(lr_, lr);  // in stream order: the steps queued before keep their rate
}

int64_t AdamW::steps() const { return count_.defined() ? static_cast<int64_t>(count_.item<double>()) : loaded_steps_; }

void AdamW::zero_grad() const {
  for (const Slot& s : slots_) s.param.zero_grad();
}

StateDict AdamW::state() const {
  StateDict out;
  for (const Slot& s : slots_) {
    out.emplace("exp_avg." + s.name, s.exp_avg);
    out.emplace("exp_avg_sq." + s.name, s.exp_avg_sq);
  }
  return out;
}

void AdamW::load_state(const StateDict& state, int64_t step) {
  // Everything checked before anything changes: a refused state leaves the optimizer as it was.
  PHASOR_CHECK(step >= 0 && step <= (int64_t{1} << 53), "AdamW: optimizer state's step count ", step,
               " must be from 0 to 2^53 (a negative count makes every parameter NaN at the next step)");
  std::vector<std::pair<Tensor, Tensor>> copies;  // (target, source)
  for (Slot& s : slots_)
    for (const auto& [key, target] : {std::pair<std::string, Tensor>{"exp_avg." + s.name, s.exp_avg}, {"exp_avg_sq." + s.name, s.exp_avg_sq}}) {
      auto it = state.find(key);
      PHASOR_CHECK(it != state.end(), "AdamW: optimizer state lacks '", key, "'");
      PHASOR_CHECK(it->second.defined() && it->second.shape() == target.shape(), "AdamW: optimizer state '", key, "' has shape ",
                   it->second.defined() ? it->second.shape() : Dims{}, ", expected ", target.shape());
      PHASOR_CHECK(it->second.dtype() == target.dtype() || (!it->second.is_complex() && !target.is_complex()), "AdamW: optimizer state '", key,
                   "' is ", it->second.dtype(), ", expected ", target.dtype());
      copies.emplace_back(target, it->second);
    }
  PHASOR_CHECK(copies.size() == state.size(), "AdamW: optimizer state has ", state.size() - copies.size(),
               " unexpected entr", state.size() - copies.size() == 1 ? "y" : "ies", " (the first: '", [&] {
                 for (const auto& [key, t] : state) {
                   bool expected = false;
                   for (const Slot& s : slots_) expected = expected || key == "exp_avg." + s.name || key == "exp_avg_sq." + s.name;
                   if (!expected) return key;
                 }
                 return std::string();
               }(), "'); it is not this optimizer's");
  for (const auto& [target, source] : copies) ops::copy_(target, source);
  loaded_steps_ = step;
  count_ = Tensor();
}

SGD::SGD(NamedTensors params, SGDOptions options) : params_(std::move(params)), momentum_buffers_(params_.size()), options_(options) {
  PHASOR_CHECK(options_.lr >= 0.0 && options_.momentum >= 0.0 && options_.weight_decay >= 0.0,
               "SGD: lr, momentum and weight_decay must be >= 0, got ", options_.lr, ", ", options_.momentum, ", ", options_.weight_decay);
  check_learning_rate("SGD", options_.lr);
  PHASOR_CHECK(std::isfinite(options_.momentum) && std::isfinite(options_.dampening) && std::isfinite(options_.weight_decay),
               "SGD: momentum, dampening and weight_decay must be finite, got ", options_.momentum, ", ", options_.dampening, ", ",
               options_.weight_decay);
  check_distinct("SGD", params_);
  PHASOR_CHECK(!options_.nesterov || (options_.momentum > 0.0 && options_.dampening == 0.0),
               "SGD: Nesterov momentum needs momentum > 0 and dampening 0");
}

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.maximize) g = ops::unary(ops::Unary::Neg, g);
    if (o.weight_decay != 0.0) {
      g = ops::clone(g);
      ops::axpy_(g, p, o.weight_decay);
    }
    if (o.momentum != 0.0) {
      Tensor& buf = momentum_buffers_[i];
      if (!buf.defined()) {
        buf = ops::clone(g);  // PyTorch: the first step's buffer is the gradient itself
      } else {
        ops::binary_(ops::Binary::Mul, buf, scalar_tensor(o.momentum, real_dtype(buf.dtype())));
        ops::axpy_(buf, g, 1.0 - o.dampening);
      }
      if (o.nesterov) {
        g = ops::clone(g);
        ops::axpy_(g, buf, o.momentum);
      } else {
        g = buf;
      }
    }
    ops::axpy_(p, g, -o.lr);
  }
}

StateDict SGD::state() const {
  StateDict out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_buffers_[i].defined()) out.emplace("momentum_buffer." + params_[i].first, momentum_buffers_[i]);
  return out;
}

void SGD::load_state(const StateDict& state) {
  // Everything checked before anything changes: a refused state leaves the optimizer as it was.
  std::vector<Tensor> buffers(params_.size());
  size_t used = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto it = state.find("momentum_buffer." + params_[i].first);
    if (it == state.end()) continue;
    ++used;
    const Tensor& p = params_[i].second;
    PHASOR_CHECK(it->second.defined() && it->second.shape() == p.shape() && it->second.dtype() == p.dtype(), "SGD: optimizer state '",
                 it->first, "' has shape ", it->second.defined() ? it->second.shape() : Dims{}, ", expected ", p.shape(), " of ", p.dtype());
    buffers[i] = it->second;
  }
  if (used != state.size())
    for (const auto& entry : state) {
      const std::string& key = entry.first;  // not a binding: clang 14 refuses those in lambdas
      const bool expected = std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return key == "momentum_buffer." + p.first; });
      PHASOR_CHECK(expected, "SGD: optimizer state has an unexpected entry '", key, "'; it is not this optimizer's");
    }
  for (size_t i = 0; i < params_.size(); ++i)
    momentum_buffers_[i] = buffers[i].defined() ? ops::clone(ops::to_device(buffers[i].detach(), params_[i].second.device())) : Tensor();
}

void SGD::set_lr(double lr) {
  check_learning_rate("SGD", lr);
  options_.lr = lr;
}

void SGD::zero_grad() const {
  for (const auto& [name, p] : params_) p.zero_grad();
}

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr) {
  if (warmup > 0 && step < warmup) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (total <= warmup) return max_lr;
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  // Each gradient's norm in its own precision, squared and summed in float64
  // one after the other: the order and rounding of the host loop this replaced.
  Tensor total;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor n2 = ops::unary(ops::Unary::Square, ops::to(ops::norm(g), DType::Float64));
    total = total.defined() ? ops::binary(ops::Binary::Add, total, n2) : n2;
  }
  if (!total.defined()) return scalar_tensor(0.0, DType::Float64);
  total = ops::unary(ops::Unary::Sqrt, total);
  if (!(max_norm < INFINITY)) return total;  // nothing to clip: no pass over the gradients
  // coef = max_norm / (norm + 1e-6), applied only below 1. NaN (a non-finite
  // norm) fails the comparison and leaves the gradients alone.
  const Tensor coef = ops::binary(ops::Binary::Div, scalar_tensor(max_norm, DType::Float64),
                                  ops::binary(ops::Binary::Add, total, scalar_tensor(1e-6, DType::Float64)));
  const Tensor below = ops::compare(ops::Compare::Lt, coef, scalar_tensor(1.0, DType::Float64));
  const Tensor factor = ops::where(below, coef, scalar_tensor(1.0, DType::Float64));
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) ops::binary_(ops::Binary::Mul, g, ops::to(factor, real_dtype(g.dtype())));
  }
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) { return clip_grad_norm_(params, max_norm).item<double>(); }

}  // namespace phasor::nn
