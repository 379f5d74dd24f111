// The backward engine: topological order over the tape, gradient
// accumulation per node, and the adaptation of raw gradients to their inputs.
#include <algorithm>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace phasor {

namespace {
thread_local bool grad_enabled = true;
thread_local bool anomaly_enabled = false;

AutogradMeta& meta(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_unique<AutogradMeta>();
  return *m;
}

// Where a gradient for `t` must go: its grad_fn, its leaf accumulator, or nowhere.
std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  AutogradMeta& m = meta(t);
  if (m.grad_fn) return m.grad_fn;
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return acc;
}

// The convention of docs/design.md ("Complex gradients"), applied once here for every op: a real input
// takes the real part of a complex gradient, broadcast dims are summed away,
// and the gradient takes the input's precision.
Tensor adapt_gradient(Tensor g, const InputInfo& in) {
  if (g.is_complex() && !is_complex(in.dtype)) g = ops::real(g);
  g = ops::sum_to(g, in.shape);
  return ops::to(g, in.dtype);
}
}  // namespace

bool GradMode::enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }
bool AnomalyMode::enabled() { return anomaly_enabled; }
void AnomalyMode::set_enabled(bool enabled) { anomaly_enabled = enabled; }

void Node::add_input(const Tensor& input) {
  inputs_.push_back({gradient_edge(input), input.defined() ? input.shape() : Dims{},
                     input.defined() ? input.dtype() : DType::Float32});
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  PHASOR_CHECK(!released_, "backward through the graph a second time (node ", name(),
               "): its saved tensors were freed; pass retain_graph=true to the first backward");
  return backward_(grad_output);
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return {};
  Tensor t(leaf);
  Tensor current = t.grad();
  if (!current.defined()) {
    // Own the buffer: the incoming gradient may alias another tensor.
    t.set_grad(ops::clone(grad_output));
  } else {
    ops::binary_(ops::Binary::Add, current, grad_output);
  }
  return {};
}

SavedTensor::SavedTensor(const Tensor& t) : tensor_(t.defined() ? t.detach() : Tensor()) {
  if (t.defined()) version_ = t.storage()->version();
}

Tensor SavedTensor::get() const {
  PHASOR_CHECK(!tensor_.defined() || tensor_.storage()->version() == version_,
               "backward: a tensor saved for backward (shape ", tensor_.shape(),
               ") was modified in place after it was saved (version ", version_, " -> ", tensor_.storage()->version(),
               "); clone it before modifying");
  return tensor_;
}

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(const char* name, const Tensor& out, const std::vector<Tensor>& inputs, FunctionNode::Backward backward) {
  if (!GradMode::enabled()) return out;
  bool needed = false;
  for (const Tensor& t : inputs) needed = needed || (t.defined() && t.requires_grad());
  if (!needed) return out;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  for (const Tensor& t : inputs) node->add_input(t);
  // A view shares storage with its input but needs its own autograd identity.
  Tensor result = out;
  for (const Tensor& t : inputs)
    if (t.defined() && t.impl() == out.impl()) result = out.detach();
  AutogradMeta& m = meta(result);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
  return result;
}

Tensor record(const char* name, const Tensor& out, std::initializer_list<Tensor> inputs, FunctionNode::Backward backward) {
  return record(name, out, std::vector<Tensor>(inputs), std::move(backward));
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  NoGradGuard no_grad;
  // Count, for each node, how many edges point at it (its pending inputs).
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack;
  // A leaf root's node (its grad accumulator) may exist only through this
  // shared_ptr: hold every root's node from here on, or the walk below reads freed memory.
  std::vector<std::shared_ptr<Node>> keep_alive;  // nodes stay valid while we walk them
  for (const Tensor& r : roots) {
    std::shared_ptr<Node> n = gradient_edge(r);
    if (n) keep_alive.push_back(n);
    if (n && !dependencies.count(n.get())) {
      dependencies[n.get()] = 0;
      stack.push_back(n.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const InputInfo& in : n->inputs()) {
      if (!in.node) continue;
      auto [it, inserted] = dependencies.try_emplace(in.node.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(in.node.get());
    }
  }

  std::unordered_map<Node*, Tensor> pending;
  std::vector<Node*> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    std::shared_ptr<Node> n = gradient_edge(roots[i]);
    if (!n) continue;
    keep_alive.push_back(n);
    Tensor& slot = pending[n.get()];
    slot = slot.defined() ? ops::binary(ops::Binary::Add, slot, grads[i]) : grads[i];
    if (dependencies[n.get()] == 0 && std::find(ready.begin(), ready.end(), n.get()) == ready.end()) ready.push_back(n.get());
  }

  // A node runs once all edges into it were walked; one that received no
  // gradient still runs (as a no-op) so that the nodes below it are released.
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    Tensor grad;
    if (auto it = pending.find(node); it != pending.end()) {
      grad = std::move(it->second);
      pending.erase(it);
    }
    std::vector<Tensor> input_grads;
    if (grad.defined()) {
      for (auto& weak : node->retained_outputs) {
        if (auto impl = weak.lock()) {
          Tensor t(impl);
          Tensor current = t.grad();
          t.set_grad(current.defined() ? ops::binary(ops::Binary::Add, current, grad) : ops::clone(grad));
        }
      }
      input_grads = node->apply(grad);
    }
    if (!retain_graph) node->release();
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const InputInfo& in = node->inputs()[i];
      if (!in.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor g = adapt_gradient(input_grads[i], in);
        if (AnomalyMode::enabled() && !ops::all_finite(g))
          fail("anomaly: backward of '", node->name(), "' produced NaN or Inf in the gradient of its input ", i,
               " (shape ", in.shape, ")");
        Tensor& slot = pending[in.node.get()];
        slot = slot.defined() ? ops::binary(ops::Binary::Add, slot, g) : g;
      }
      if (--dependencies[in.node.get()] == 0) {
        keep_alive.push_back(in.node);
        ready.push_back(in.node.get());
      }
    }
  }
}

}  // namespace phasor
