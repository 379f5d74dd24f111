#pragma once
// The tape: a graph of Nodes, one per recorded op, each with exactly one output.
//
// A Node turns the gradient of its output into gradients of its inputs. It
// keeps what its backward needs (saved tensors, captured in the closure) and
// the shape/dtype of each input, so formulas can ignore broadcasting and
// real/complex promotion: the engine sums broadcast dims away and takes the
// real part for real inputs (the convention of docs/design.md, "Complex gradients").
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace phasor {

struct InputInfo {
  std::shared_ptr<Node> node;  // where this input's gradient goes; null if it needs none
  Dims shape;
  DType dtype;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name) : name_(std::move(name)) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<InputInfo>& inputs() const { return inputs_; }
  void add_input(const Tensor& input);

  // Gradients of the inputs (undefined where an input needs none), raw:
  // the engine adapts shape and dtype.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release() {}
  virtual bool is_accumulator() const { return false; }

  // Non-leaf tensors that asked to keep their .grad (retain_grad()).
  std::vector<std::weak_ptr<TensorImpl>> retained_outputs;

 private:
  std::string name_;
  std::vector<InputInfo> inputs_;
};

// The node of an op: its backward is a closure over what it saved.
class FunctionNode final : public Node {
 public:
  using Backward = std::function<std::vector<Tensor>(const Tensor& grad)>;
  FunctionNode(std::string name, Backward backward) : Node(std::move(name)), backward_(std::move(backward)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override {
    backward_ = nullptr;
    released_ = true;
  }

 private:
  Backward backward_;
  bool released_ = false;
};

// The sink of a leaf: adds the incoming gradient into leaf.grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  bool is_accumulator() const override { return true; }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// A tensor saved for backward, captured by a closure given to record(). get()
// refuses if it was modified in place since. Made with grad mode off, when
// record() keeps no closure, it saves nothing.
//
// A first-order backward (grad mode off) reads the detached copy. Under
// create_graph (grad mode on during backward) get() returns a tensor with
// autograd identity, so that the derivative formula records a graph that
// reaches the saved tensor's own history: an input gives back the tensor
// itself; the node's own output (saved with Role::Output) is re-linked to the
// node running its backward, as PyTorch does, because keeping the output
// itself would make a reference cycle node -> output -> node.
class SavedTensor {
 public:
  enum class Role { Input, Output };
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t, Role role = Role::Input);
  Tensor get() const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;    // detached: a first-order backward never sees autograd state
  Tensor original_;  // inputs that require grad: their autograd identity, for create_graph
  uint64_t version_ = 0;
  bool output_ = false;
};

// Whether an op on these inputs is recorded: grad mode is on and an input requires grad.
bool needs_recording(const Tensor* inputs, size_t count);
// The recording step of record(): a node for `backward` linked to the inputs' edges.
Tensor attach_node(const char* name, const Tensor& out, const Tensor* inputs, size_t count, FunctionNode::Backward backward);

// Records `out` as the result of op `name` on `inputs` when grad mode is on and
// any input requires grad; returns `out` (now carrying its grad_fn). The
// closure is taken as it is and turned into a FunctionNode::Backward only when
// recorded, so an op with grad off (or on constants) allocates nothing here.
template <class Backward>
Tensor record(const char* name, const Tensor& out, std::initializer_list<Tensor> inputs, Backward&& backward) {
  if (!needs_recording(inputs.begin(), inputs.size())) return out;
  return attach_node(name, out, inputs.begin(), inputs.size(), FunctionNode::Backward(std::forward<Backward>(backward)));
}
template <class Backward>
Tensor record(const char* name, const Tensor& out, const std::vector<Tensor>& inputs, Backward&& backward) {
  if (!needs_recording(inputs.data(), inputs.size())) return out;
  return attach_node(name, out, inputs.data(), inputs.size(), FunctionNode::Backward(std::forward<Backward>(backward)));
}

// Runs backward from `roots` seeded with `grads` (the engine), accumulating
// into the .grad of the leaves. With create_graph the derivative formulas run
// with grad mode on, so the gradients carry a graph of their own.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph, bool create_graph = false);

// The functional form: returns the gradients of `inputs` (undefined where
// none reaches one) and writes no .grad. Only nodes on a path to an input run.
// With inputs_are_frontier the walk stops at the inputs' nodes (for callers
// that know no input lies below another, e.g. fresh aliases).
std::vector<Tensor> run_grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, const std::vector<Tensor>& inputs,
                             bool retain_graph, bool create_graph, bool inputs_are_frontier = false);

}  // namespace phasor
