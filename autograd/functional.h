#pragma once
// Gradients as values: grad() (PyTorch's torch.autograd.grad), and the
// forward-mode and second-order products built on it, jvp() and hvp().
//
// Complex tensors count as pairs of reals throughout (docs/complex-gradients.md):
// a tangent or a direction v for a complex input is v_x + i v_y, and a
// product comes back in the same form.
#include <functional>
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace phasor {

using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// The gradients of sum_i Re<grad_outputs[i], outputs[i]> with respect to
// `inputs`, written to no .grad. grad_outputs may be empty (or hold undefined
// tensors) for real scalar outputs, which then take 1. With create_graph the
// gradients carry a graph (so they can be differentiated again);
// retain_graph defaults to create_graph. An input no output depends on is an
// error unless allow_unused, which returns an undefined tensor for it.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false,
                         std::optional<bool> retain_graph = std::nullopt, bool allow_unused = false);

// Re sum(conj(a) b): the real inner product of two tensors seen as real vectors (differentiable).
Tensor real_dot(const Tensor& a, const Tensor& b);

// f(inputs) and its Jacobian-vector product J v along `tangents` (one per
// input), by the double-vjp identity: u -> J^T u is linear, and its gradient
// of <J^T u, v> with respect to u is J v. Costs two backward passes.
struct JvpResult {
  Tensor output, tangent;
};
JvpResult jvp(const TensorFunction& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& tangents);

// Hessian-vector products of a real scalar loss with respect to `params`: the
// gradient is formed once with create_graph, then each product H v is one
// more backward of <grad, v>. A parameter the loss does not reach has zero
// gradient and zero product.
class HessianVectorProduct {
 public:
  HessianVectorProduct(const Tensor& loss, std::vector<Tensor> params);
  std::vector<Tensor> operator()(const std::vector<Tensor>& v);
  const std::vector<Tensor>& gradient() const { return grads_; }
  int64_t products() const { return products_; }

 private:
  std::vector<Tensor> params_, grads_;
  int64_t products_ = 0;
};

// One product H v (see HessianVectorProduct to take several).
std::vector<Tensor> hvp(const Tensor& loss, const std::vector<Tensor>& params, const std::vector<Tensor>& v);

}  // namespace phasor
