#pragma once
// Tensor: a cheap, shared handle to (storage, shape, strides, offset, dtype).
// Copying a Tensor copies the handle; views share storage. The autograd
// fields live here (as PyTorch's AutogradMeta does) but their behaviour is in
// autograd/: tensor/ never records a graph.
#include <complex>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/random.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace phasor {

class Node;  // autograd/node.h
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Dims& shape() const;
  const Dims& strides() const;
  int64_t offset() const;
  int dim() const { return shape().size(); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape().numel(); }
  DType dtype() const;
  Device device() const;
  bool is_complex() const { return phasor::is_complex(dtype()); }
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(dtype()); }

  // Typed pointer to the first element (checks the dtype).
  template <class T>
  T* data() const {
    PHASOR_CHECK(dtype() == dtype_of<T>, "data<", dtype_name(dtype_of<T>), ">() on a tensor of dtype ", dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  const std::shared_ptr<Storage>& storage() const;
  // The single value of a one-element tensor, converted to T.
  template <class T>
  T item() const;
  // All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- autograd state (defined in autograd/variable.cpp) ----
  bool requires_grad() const;
  // Marks a leaf as a parameter to differentiate; refused on non-leaves.
  Tensor& requires_grad_(bool flag = true);
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  void zero_grad() const;
  // Keep .grad on this non-leaf tensor during backward.
  void retain_grad() const;
  // backward() from a real scalar; backward(g) seeds any real or complex tensor.
  // With create_graph the gradients carry a graph of their own (and the graph
  // is retained, as PyTorch's retain_graph defaults to create_graph).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false) const;
  // Same storage, no history.
  Tensor detach() const;
  // Points this tensor (and every copy of its handle) at other's data: storage,
  // geometry and dtype; autograd state stays. How a module moves to a device.
  void set_data(const Tensor& other) const;

  // ---- convenience methods (differentiable; defined in autograd/) ----
  Tensor reshape(const Dims& shape) const;
  Tensor view(const Dims& shape) const;
  Tensor permute(const Dims& order) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Dims& shape) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor contiguous() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor clone() const;
  Tensor sum() const;
  Tensor mean() const;

  std::string to_string() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Autograd bookkeeping carried by a tensor that takes part in a graph.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that writes .grad
  Tensor grad;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Dims shape;
  Dims strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::unique_ptr<AutogradMeta> autograd;  // null until the tensor takes part in autograd
};

inline void Tensor::set_data(const Tensor& other) const {
  impl_->storage = other.impl_->storage;
  impl_->shape = other.impl_->shape;
  impl_->strides = other.impl_->strides;
  impl_->offset = other.impl_->offset;
  impl_->dtype = other.impl_->dtype;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- creation ----
Tensor empty(const Dims& shape, DType dtype = DType::Float32, Device device = kCPU);
Tensor zeros(const Dims& shape, DType dtype = DType::Float32, Device device = kCPU);
Tensor ones(const Dims& shape, DType dtype = DType::Float32, Device device = kCPU);
Tensor full(const Dims& shape, c128 value, DType dtype = DType::Float32, Device device = kCPU);
Tensor scalar_tensor(c128 value, DType dtype = DType::Float32, Device device = kCPU);
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Float32);
template <class T>
Tensor from_vector(const std::vector<T>& values, const Dims& shape);
template <class T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Dims{static_cast<int64_t>(values.size())});
}
// Copies `shape.numel()` elements of type `dtype` from `data`.
Tensor from_blob(const void* data, const Dims& shape, DType dtype);
// A tensor over memory owned elsewhere, without a copy: element i of dimension
// d at data + sum(i_d * strides_d) elements (strides non-negative); `owner`
// keeps the memory alive as long as any view of the tensor does.
Tensor from_external(void* data, const Dims& shape, const Dims& strides, DType dtype, std::shared_ptr<void> owner,
                     Device device = kCPU);
// A view of the same storage with explicit geometry (checked against the storage size).
Tensor as_strided(const Tensor& t, const Dims& shape, const Dims& strides, int64_t offset);

// ---- randomness (Philox; see tensor/random.h) ----
Generator& default_generator();
void manual_seed(uint64_t seed);
// Element i of a draw depends only on (seed, position in the stream, i): every
// device draws the same numbers.
Tensor rand(const Dims& shape, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = kCPU);
Tensor randn(const Dims& shape, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = kCPU);
Tensor uniform(const Dims& shape, double low, double high, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = kCPU);
Tensor normal(const Dims& shape, double mean, double std, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = kCPU);

// ---- template definitions ----
Tensor to_cpu(const Tensor& t);  // in tensor/backend.cpp: a copy on the CPU (t itself when already there)

template <class T>
T Tensor::item() const {
  PHASOR_CHECK(numel() == 1, "item(): tensor of shape ", shape(), " has ", numel(), " elements, not 1");
  if (!device().is_cpu()) return to_cpu(*this).item<T>();
  T out{};
  dispatch_storage(dtype(), [&]<class S>() { out = element_cast<T>(*static_cast<const S*>(raw_data())); });
  return out;
}

Tensor contiguous_copy(const Tensor& t);  // in tensor/elementwise.cpp: always copies into a fresh row-major tensor

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor c = device().is_cpu() ? contiguous_copy(*this) : to_cpu(*this);
  std::vector<T> out(static_cast<size_t>(numel()));
  dispatch_storage(dtype(), [&]<class S>() {
    const S* p = static_cast<const S*>(c.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = element_cast<T>(p[i]);
  });
  return out;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Dims& shape) {
  PHASOR_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
               " values do not fill shape ", shape);
  if constexpr (std::is_same_v<T, int>) {
    std::vector<int64_t> wide(values.begin(), values.end());
    return from_blob(wide.data(), shape, DType::Int64);
  } else if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_blob(bytes.data(), shape, DType::Bool);
  } else {
    return from_blob(values.data(), shape, dtype_of<T>);
  }
}

}  // namespace phasor
