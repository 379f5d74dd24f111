// The autograd methods of Tensor (declared in tensor/tensor.h).
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace phasor {

namespace {
AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_unique<AutogradMeta>();
  return *m;
}
const std::shared_ptr<Node> kNoNode;
}  // namespace

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool flag) {
  PHASOR_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad (this one was produced by ",
               grad_fn()->name(), ")");
  PHASOR_CHECK(!flag || is_inexact(dtype()), "requires_grad_: only floating and complex tensors can require gradients, got ",
               dtype());
  meta_of(*this).requires_grad = flag;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_->autograd || !impl_->autograd->grad_fn; }

const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_->autograd ? impl_->autograd->grad_fn : kNoNode; }

Tensor Tensor::grad() const { return impl_->autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& g) const {
  PHASOR_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient shape ", g.shape(), " differs from tensor shape ", shape());
  meta_of(*this).grad = g;
}

void Tensor::zero_grad() const {
  if (impl_->autograd) impl_->autograd->grad = Tensor();
}

void Tensor::retain_grad() const {
  PHASOR_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  if (is_leaf()) return;  // leaves keep their grad anyway
  AutogradMeta& m = meta_of(*this);
  if (m.retains_grad) return;  // registered once: a second call must not add the gradient twice
  m.retains_grad = true;
  grad_fn()->retained_outputs.push_back(impl_);
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  PHASOR_CHECK(requires_grad(), "backward: the tensor does not require grad and has no grad_fn");
  Tensor seed = gradient;
  if (!seed.defined()) {
    PHASOR_CHECK(numel() == 1, "backward: a gradient must be given for a non-scalar output of shape ", shape());
    PHASOR_CHECK(!is_complex(), "backward: cannot start from a complex scalar (", dtype(),
                 "); the loss must be real, or pass the gradient explicitly");
    seed = ones(shape(), dtype(), device());
  }
  PHASOR_CHECK(seed.shape() == shape(), "backward: gradient shape ", seed.shape(), " differs from output shape ", shape());
  // The seed takes the output's dtype, as every gradient the engine passes on
  // does: a real seed on a complex output is G + 0i, a complex seed on a real
  // output keeps its real part.
  if (seed.dtype() != dtype()) seed = create_graph ? phasor::to(seed, dtype()) : ops::to(seed, dtype());
  run_backward({*this}, {seed}, retain_graph || create_graph, create_graph);
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::reshape(const Dims& s) const { return phasor::reshape(*this, s); }
Tensor Tensor::view(const Dims& s) const { return phasor::view(*this, s); }
Tensor Tensor::permute(const Dims& order) const { return phasor::permute(*this, order); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return phasor::transpose(*this, d0, d1); }
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const { return phasor::narrow(*this, d, start, length); }
Tensor Tensor::select(int64_t d, int64_t index) const { return phasor::select(*this, d, index); }
Tensor Tensor::unsqueeze(int64_t d) const { return phasor::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return phasor::squeeze(*this, d); }
Tensor Tensor::expand(const Dims& s) const { return phasor::expand(*this, s); }
Tensor Tensor::flatten(int64_t start, int64_t end) const { return phasor::flatten(*this, start, end); }
Tensor Tensor::contiguous() const { return phasor::contiguous(*this); }
Tensor Tensor::to(DType dt) const { return phasor::to(*this, dt); }
Tensor Tensor::to(Device device) const { return phasor::to(*this, device); }
Tensor Tensor::clone() const { return phasor::clone(*this); }
Tensor Tensor::sum() const { return phasor::sum(*this); }
Tensor Tensor::mean() const { return phasor::mean(*this); }

}  // namespace phasor
