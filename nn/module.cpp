#include "nn/module.h"

#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace phasor::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.requires_grad_(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, NamedTensors& out, bool buffers) const {
  for (const auto& [name, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, buffers);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out, false);
  // A tensor shared by two modules (tied embeddings) is listed once, under its first name.
  std::set<const TensorImpl*> seen;
  NamedTensors unique;
  for (auto& [name, t] : out)
    if (seen.insert(t.impl()).second) unique.emplace_back(name, t);
  return unique;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", out, true);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() const {
  for (const Tensor& p : parameters()) p.zero_grad();
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  auto move = [&](const Tensor& t) {
    if (t.device() == device) return;
    t.set_data(ops::to_device(t, device));
    if (const Tensor g = t.grad(); g.defined()) t.set_grad(ops::to_device(g, device));
  };
  for (auto& [name, t] : named_parameters()) move(t);
  for (auto& [name, t] : named_buffers()) move(t);
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  for (auto& [name, t] : named_buffers()) out.emplace(name, t);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  const StateDict mine = state_dict();
  std::ostringstream problems;
  for (const auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end()) problems << (problems.tellp() ? "; " : " ") << "missing " << name << " " << t.shape();
    else if (it->second.shape() != t.shape())
      problems << (problems.tellp() ? "; " : " ") << "shape mismatch " << name << " expects " << t.shape() << ", got " << it->second.shape();
  }
  for (const auto& [name, t] : state)
    if (!mine.count(name)) problems << (problems.tellp() ? "; " : " ") << "unexpected " << name << " " << t.shape();
  const std::string report = problems.str();
  PHASOR_CHECK(report.empty(), "load_state_dict: the state does not match the module:", report);
  NoGradGuard no_grad;
  for (const auto& [name, t] : mine) ops::copy_(t, ops::to_device(state.at(name), t.device()));
}

}  // namespace phasor::nn
