// The backward engine: topological order over the tape, gradient
// accumulation per node, and the adaptation of raw gradients to their inputs.
#include <algorithm>
#include <unordered_map>

#include "autograd/functions.h"
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
// and the gradient takes the input's precision. Under create_graph the same
// steps are recorded (they are linear, and their derivatives are the reverse steps).
Tensor adapt_gradient(Tensor g, const InputInfo& in, bool create_graph) {
  if (create_graph) {
    if (g.is_complex() && !is_complex(in.dtype)) g = real(g);
    return to(sum_to(g, in.shape), in.dtype);
  }
  if (g.is_complex() && !is_complex(in.dtype)) g = ops::real(g);
  g = ops::sum_to(g, in.shape);
  return ops::to(g, in.dtype);
}

// a + b, recorded only under create_graph.
Tensor accumulate(const Tensor& a, const Tensor& b, bool create_graph) {
  return create_graph ? add(a, b) : ops::binary(ops::Binary::Add, a, b);
}

// The node whose backward is running on this thread (SavedTensor re-links outputs to it).
thread_local Node* running_node = nullptr;
class RunningNode {
 public:
  explicit RunningNode(Node* n) : previous_(running_node) { running_node = n; }
  ~RunningNode() { running_node = previous_; }
  RunningNode(const RunningNode&) = delete;
  RunningNode& operator=(const RunningNode&) = delete;

 private:
  Node* previous_;
};
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
  if (GradMode::enabled() || (current.defined() && current.grad_fn())) {
    // create_graph: accumulate out of place, so .grad carries its graph (and a
    // .grad that has one is never written in place).
    t.set_grad(current.defined() ? add(current, grad_output) : clone(grad_output));
  } else if (!current.defined()) {
    // Own the buffer: the incoming gradient may alias another tensor.
    t.set_grad(ops::clone(grad_output));
  } else {
    ops::binary_(ops::Binary::Add, current, grad_output);
  }
  return {};
}

SavedTensor::SavedTensor(const Tensor& t, Role role) : output_(role == Role::Output) {
  // A SavedTensor lives in a closure for record(), which keeps none with grad
  // mode off: nothing is saved then (no detached alias is allocated).
  if (!t.defined() || !GradMode::enabled()) return;
  tensor_ = t.detach();
  version_ = t.storage()->version();
  if (!output_ && t.requires_grad()) original_ = t;
}

Tensor SavedTensor::get() const {
  PHASOR_CHECK(!tensor_.defined() || tensor_.storage()->version() == version_,
               "backward: a tensor saved for backward (shape ", tensor_.shape(),
               ") was modified in place after it was saved (version ", version_, " -> ", tensor_.storage()->version(),
               "); clone it before modifying");
  if (!GradMode::enabled() || !tensor_.defined()) return tensor_;  // first order: as before
  if (original_.defined() && original_.storage() == tensor_.storage()) return original_;
  if (output_ && running_node) {
    Tensor relinked = tensor_.detach();
    AutogradMeta& m = meta(relinked);
    m.requires_grad = true;
    m.grad_fn = running_node->shared_from_this();
    return relinked;
  }
  return tensor_;
}

bool needs_recording(const Tensor* inputs, size_t count) {
  if (!GradMode::enabled()) return false;
  for (size_t i = 0; i < count; ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) return true;
  return false;
}

Tensor attach_node(const char* name, const Tensor& out, const Tensor* inputs, size_t count, FunctionNode::Backward backward) {
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  for (size_t i = 0; i < count; ++i) node->add_input(inputs[i]);
  // A view shares storage with its input but needs its own autograd identity.
  Tensor result = out;
  for (size_t i = 0; i < count; ++i)
    if (inputs[i].defined() && inputs[i].impl() == out.impl()) result = out.detach();
  AutogradMeta& m = meta(result);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
  return result;
}

namespace {
struct Walk {
  const std::vector<Tensor>& roots;  // references: the first-order path copies nothing
  const std::vector<Tensor>& grads;
  bool retain_graph = false, create_graph = false;
  // Functional mode (grad()): the gradients of `inputs` are returned, no .grad is written.
  const std::vector<Tensor>* inputs = nullptr;
  bool inputs_are_frontier = false;
};

// One backward walk, in four phases (run()): find the nodes of grad()'s
// inputs, count the edges into every node reachable from the roots, mark the
// nodes that lead to an input (functional mode), then run the nodes in
// topological order, passing each one's input gradients down.
class Execution {
 public:
  explicit Execution(const Walk& w) : w_(w), functional_(w.inputs != nullptr) {}

  std::vector<Tensor> run() {
    AutoGradMode grad_mode(w_.create_graph);  // derivative formulas record only under create_graph
    if (functional_) capture_inputs();
    count_dependencies();
    if (functional_) mark_nodes_leading_to_inputs();
    seed_roots();
    while (!ready_.empty()) {
      Node* node = ready_.back();
      ready_.pop_back();
      run_node(node);
    }
    return std::move(results_);
  }

 private:
  bool is_frontier(Node* n) const { return w_.inputs_are_frontier && captures_.count(n); }

  // Functional mode: the node of each input, where its gradient arrives.
  void capture_inputs() {
    results_.resize(w_.inputs->size());
    for (size_t i = 0; i < w_.inputs->size(); ++i) {
      std::shared_ptr<Node> n = gradient_edge((*w_.inputs)[i]);
      PHASOR_CHECK(n, "grad: input ", i, " does not require grad");
      keep_alive_.push_back(n);
      captures_[n.get()].push_back(i);
    }
  }

  // For each node reachable from the roots, how many edges point at it (its pending inputs).
  void count_dependencies() {
    std::vector<Node*> stack;
    for (const Tensor& r : w_.roots) {
      std::shared_ptr<Node> n = gradient_edge(r);
      if (n) keep_alive_.push_back(n);
      if (n && !dependencies_.count(n.get())) {
        dependencies_[n.get()] = 0;
        stack.push_back(n.get());
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (is_frontier(n)) continue;
      for (const InputInfo& in : n->inputs()) {
        if (!in.node) continue;
        auto [it, inserted] = dependencies_.try_emplace(in.node.get(), 0);
        ++it->second;
        if (inserted) stack.push_back(in.node.get());
      }
    }
  }

  // Functional mode runs a node only if one of its inputs leads to an input of
  // grad(): found in reverse topological order.
  void mark_nodes_leading_to_inputs() {
    std::unordered_map<Node*, int> count = dependencies_;
    std::vector<Node*> order, ready;
    for (auto& [n, c] : count)
      if (c == 0) ready.push_back(n);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      order.push_back(n);
      if (is_frontier(n)) continue;
      for (const InputInfo& in : n->inputs())
        if (in.node && --count[in.node.get()] == 0) ready.push_back(in.node.get());
    }
    std::unordered_map<Node*, bool> reaches;  // the node is an input's or leads to one
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      bool below = false;
      if (!is_frontier(n))
        for (const InputInfo& in : n->inputs())
          if (in.node && reaches[in.node.get()]) below = true;
      leads_below_[n] = below;
      reaches[n] = below || captures_.count(n);
    }
  }

  // The roots' gradients become their nodes' pending gradients; roots nothing points at are ready.
  void seed_roots() {
    for (size_t i = 0; i < w_.roots.size(); ++i) {
      std::shared_ptr<Node> n = gradient_edge(w_.roots[i]);
      if (!n) continue;
      keep_alive_.push_back(n);
      add_pending(n.get(), w_.grads[i]);
      if (dependencies_[n.get()] == 0 && std::find(ready_.begin(), ready_.end(), n.get()) == ready_.end()) ready_.push_back(n.get());
    }
  }

  void add_pending(Node* n, const Tensor& g) {
    Tensor& slot = pending_[n];
    slot = slot.defined() ? accumulate(slot, g, w_.create_graph) : g;
  }

  // A node runs once all edges into it were walked; one that received no
  // gradient still runs (as a no-op) so that the nodes below it are released.
  void run_node(Node* node) {
    Tensor grad;
    if (auto it = pending_.find(node); it != pending_.end()) {
      grad = std::move(it->second);
      pending_.erase(it);
    }
    bool runs = true;
    if (functional_) {
      if (auto it = captures_.find(node); it != captures_.end())
        for (size_t i : it->second) results_[i] = grad;
      runs = leads_below_[node];
      if (!runs && is_frontier(node)) return;  // nothing below was walked
    } else if (grad.defined()) {
      write_retained_grads(node, grad);
    }
    std::vector<Tensor> input_grads;
    if (grad.defined() && runs) {
      RunningNode running(node);
      input_grads = node->apply(grad);
    }
    if (!w_.retain_graph && runs) node->release();
    pass_down(node, input_grads);
  }

  // retain_grad(): the node's output keeps its gradient in .grad.
  void write_retained_grads(Node* node, const Tensor& grad) {
    for (auto& weak : node->retained_outputs) {
      if (auto impl = weak.lock()) {
        Tensor t(impl);
        Tensor current = t.grad();
        t.set_grad(current.defined() ? accumulate(current, grad, w_.create_graph) : w_.create_graph ? clone(grad) : ops::clone(grad));
      }
    }
  }

  // Adds each input's adapted gradient to the pending one of its node, and
  // readies the nodes whose last edge this was.
  void pass_down(Node* node, const std::vector<Tensor>& input_grads) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const InputInfo& in = node->inputs()[i];
      if (!in.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor g = adapt_gradient(input_grads[i], in, w_.create_graph);
        if (AnomalyMode::enabled() && !ops::all_finite(g))
          fail("anomaly: backward of '", node->name(), "' produced NaN or Inf in the gradient of its input ", i,
               " (shape ", in.shape, ")");
        add_pending(in.node.get(), g);
      }
      if (--dependencies_[in.node.get()] == 0) {
        keep_alive_.push_back(in.node);
        ready_.push_back(in.node.get());
      }
    }
  }

  const Walk& w_;
  const bool functional_;
  std::vector<Tensor> results_;                                // functional mode: the inputs' gradients
  std::unordered_map<Node*, std::vector<size_t>> captures_;    // functional mode: node -> indices of its inputs
  std::unordered_map<Node*, int> dependencies_;                // node -> edges into it not yet walked
  std::unordered_map<Node*, bool> leads_below_;                // functional mode: node -> an input lies below it
  std::unordered_map<Node*, Tensor> pending_;                  // node -> gradient accumulated so far
  std::vector<Node*> ready_;                                   // nodes whose every incoming edge was walked
  // A leaf root's node (its grad accumulator) may exist only through this
  // shared_ptr: hold every root's node from here on, or the walk reads freed memory.
  std::vector<std::shared_ptr<Node>> keep_alive_;
};
}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph, bool create_graph) {
  Execution({roots, grads, retain_graph, create_graph}).run();
}

std::vector<Tensor> run_grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, const std::vector<Tensor>& inputs,
                             bool retain_graph, bool create_graph, bool inputs_are_frontier) {
  return Execution({roots, grads, retain_graph, create_graph, &inputs, inputs_are_frontier}).run();
}

}  // namespace phasor
