#include "autograd/functional.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace phasor {

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs,
                         bool create_graph, std::optional<bool> retain_graph, bool allow_unused) {
  PHASOR_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "grad: ", grad_outputs.size(),
               " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Tensor> roots, seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    PHASOR_CHECK(y.defined() && y.requires_grad(), "grad: output ", i, " does not require grad and has no grad_fn");
    Tensor seed = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!seed.defined()) {
      PHASOR_CHECK(y.numel() == 1 && !y.is_complex(), "grad: output ", i, " (shape ", y.shape(), ", ", y.dtype(),
                   ") is not a real scalar: pass its grad_output");
      seed = ones(y.shape(), y.dtype(), y.device());
    }
    PHASOR_CHECK(seed.shape() == y.shape(), "grad: grad_output ", i, " has shape ", seed.shape(), ", its output ", y.shape());
    if (seed.dtype() != y.dtype()) seed = create_graph ? to(seed, y.dtype()) : ops::to(seed, y.dtype());
    roots.push_back(y);
    seeds.push_back(seed);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    PHASOR_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
  std::vector<Tensor> grads = run_grad(roots, seeds, inputs, retain_graph.value_or(create_graph), create_graph);
  for (size_t i = 0; i < grads.size(); ++i)
    PHASOR_CHECK(allow_unused || grads[i].defined(), "grad: input ", i, " (shape ", inputs[i].shape(),
                 ") is not used by the outputs; pass allow_unused to get an undefined gradient for it");
  return grads;
}

Tensor real_dot(const Tensor& a, const Tensor& b) {
  const Tensor products = a.is_complex() ? real(conj(a) * b) : (b.is_complex() ? a * real(b) : a * b);
  return sum(products);
}

namespace {
// sum_i <a_i, b_i> over the defined a_i (a gradient that is undefined is zero);
// undefined when none is.
Tensor real_dot_sum(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Tensor total;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined()) continue;
    const Tensor term = real_dot(a[i], b[i]);
    total = total.defined() ? total + term : term;
  }
  return total;
}
}  // namespace

JvpResult jvp(const TensorFunction& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& tangents) {
  PHASOR_CHECK(tangents.size() == inputs.size(), "jvp: ", tangents.size(), " tangents for ", inputs.size(), " inputs");
  AutoGradMode enable(true);
  // Differentiate at copies of the inputs, so that the caller's graph and .grad stay as they are.
  std::vector<Tensor> x, differentiable, along;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !is_inexact(inputs[i].dtype())) {  // indices and the like: no tangent
      x.push_back(inputs[i]);
      continue;
    }
    PHASOR_CHECK(tangents[i].shape() == inputs[i].shape(), "jvp: tangent ", i, " has shape ", tangents[i].shape(), ", its input ",
                 inputs[i].shape());
    x.push_back(inputs[i].detach().requires_grad_());
    differentiable.push_back(x.back());
    along.push_back(tangents[i]);
  }
  const Tensor y = f(x);
  JvpResult r{y.detach(), zeros(y.shape(), y.dtype(), y.device())};
  if (!y.requires_grad()) return r;  // f does not depend on its inputs
  const Tensor u = zeros(y.shape(), y.dtype(), y.device()).requires_grad_();
  const std::vector<Tensor> vjp = grad({y}, differentiable, {u}, /*create_graph=*/true, true, /*allow_unused=*/true);
  const Tensor inner = real_dot_sum(vjp, along);
  if (!inner.defined() || !inner.requires_grad()) return r;
  const Tensor t = grad({inner}, {u}, {}, false, false, /*allow_unused=*/true)[0];
  if (t.defined()) r.tangent = t.detach();
  return r;
}

HessianVectorProduct::HessianVectorProduct(const Tensor& loss, std::vector<Tensor> params) : params_(std::move(params)) {
  AutoGradMode enable(true);
  grads_ = grad({loss}, params_, {}, /*create_graph=*/true, true, /*allow_unused=*/true);
}

std::vector<Tensor> HessianVectorProduct::operator()(const std::vector<Tensor>& v) {
  PHASOR_CHECK(v.size() == params_.size(), "hvp: ", v.size(), " directions for ", params_.size(), " parameters");
  AutoGradMode enable(true);
  for (size_t i = 0; i < v.size(); ++i)
    PHASOR_CHECK(v[i].shape() == params_[i].shape(), "hvp: direction ", i, " has shape ", v[i].shape(), ", its parameter ",
                 params_[i].shape());
  const Tensor inner = real_dot_sum(grads_, v);
  ++products_;
  std::vector<Tensor> out(params_.size());
  std::vector<Tensor> h;
  if (inner.defined() && inner.requires_grad()) h = grad({inner}, params_, {}, false, /*retain_graph=*/true, /*allow_unused=*/true);
  for (size_t i = 0; i < params_.size(); ++i)
    out[i] = i < h.size() && h[i].defined() ? h[i].detach() : zeros(params_[i].shape(), params_[i].dtype(), params_[i].device());
  return out;
}

std::vector<Tensor> hvp(const Tensor& loss, const std::vector<Tensor>& params, const std::vector<Tensor>& v) {
  return HessianVectorProduct(loss, params)(v);
}

}  // namespace phasor
