// The Tensor handle: its accessors, empty storage, views over existing
// memory (from_external, as_strided) and printing. Creation that fills
// values through the kernels (full, zeros, arange, ...) is in
// tensor/creation.cpp, so that this file calls no op: the handle stays the
// ground under the registry and the kernels.
#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace phasor {

const Dims& Tensor::shape() const {
  PHASOR_CHECK(defined(), "use of an undefined tensor");
  return impl_->shape;
}
const Dims& Tensor::strides() const { return impl_->strides; }
int64_t Tensor::offset() const { return impl_->offset; }
DType Tensor::dtype() const {
  PHASOR_CHECK(defined(), "use of an undefined tensor");
  return impl_->dtype;
}
Device Tensor::device() const { return impl_->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_->storage; }

// A 0-d tensor has no dim to ask about (wrap_dim would accept 0 and -1 there).
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim_not_0d(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim_not_0d(d, dim(), "stride")]; }

void* Tensor::raw_data() const {
  char* base = static_cast<char*>(impl_->storage->data());
  // A view with no elements may sit at any offset (as_strided), even past the
  // storage or over none (a null data pointer): nothing is read through it.
  if (impl_->offset == 0 || numel() == 0) return base;
  return base + impl_->offset * static_cast<int64_t>(itemsize(impl_->dtype));
}

bool Tensor::is_contiguous() const {
  const Dims& s = shape();
  if (s.numel() == 0) return true;  // no element is out of place (PyTorch's rule: strides of an empty tensor are free)
  int64_t expected = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    if (s[i] != 1 && strides()[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

Tensor empty(const Dims& shape, DType dtype, Device device) {
  for (int64_t d : shape) PHASOR_CHECK(d >= 0, "empty: negative dimension in shape ", shape);
  int64_t bytes = 0;
  PHASOR_CHECK(!__builtin_mul_overflow(shape.numel(), static_cast<int64_t>(itemsize(dtype)), &bytes), "empty: shape ", shape, " of ",
               dtype, " needs more bytes than an int64 can count");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor from_external(void* data, const Dims& shape, const Dims& strides, DType dtype, std::shared_ptr<void> owner,
                     Device device) {
  PHASOR_CHECK(shape.size() == strides.size(), "from_external: shape ", shape, " and strides ", strides, " differ in length");
  int64_t last = 0;  // the farthest element, in elements from data
  for (int d = 0; d < shape.size(); ++d) {
    PHASOR_CHECK(shape[d] >= 0 && strides[d] >= 0, "from_external: shape ", shape, " and strides ", strides,
                 " must be non-negative");
    if (shape[d] > 0) last += (shape[d] - 1) * strides[d];
  }
  const size_t bytes = shape.numel() == 0 ? 0 : static_cast<size_t>(last + 1) * itemsize(dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, bytes, device, std::move(owner));
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor as_strided(const Tensor& t, const Dims& shape, const Dims& strides, int64_t offset) {
  PHASOR_CHECK(shape.size() == strides.size(), "as_strided: shape ", shape, " and strides ", strides, " differ in rank");
  int64_t last = offset;  // index of the furthest element the view can reach
  for (int i = 0; i < shape.size(); ++i) {
    PHASOR_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride in ", shape, " / ", strides);
    int64_t reach = 0;
    PHASOR_CHECK(!__builtin_mul_overflow(std::max<int64_t>(shape[i] - 1, 0), strides[i], &reach) &&
                     !__builtin_add_overflow(last, reach, &last),
                 "as_strided: view ", shape, " strides ", strides, " offset ", offset, " reaches past the int64 range");
  }
  const auto capacity = static_cast<int64_t>(t.storage()->nbytes() / itemsize(t.dtype()));
  // A view with no elements reaches no memory: any offset is valid (as in
  // PyTorch), e.g. narrow(zeros({0, 4}), 1, 2, 2) or imag of an empty tensor.
  PHASOR_CHECK(offset >= 0 && (shape.numel() == 0 || last < capacity), "as_strided: view ", shape,
               " strides ", strides, " offset ", offset, " exceeds the storage of ", capacity, " elements");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// ---- printing ----
namespace {
template <class T>
void print_value(std::ostream& os, T v) {
  if constexpr (is_complex_v<T>) {
    os << v.real() << (v.imag() < 0 || std::signbit(v.imag()) ? "-" : "+") << std::abs(v.imag()) << "i";
  } else if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, bf16>) {
    os << static_cast<float>(v);  // its value, exactly as float32 prints it
  } else {
    os << v;
  }
}

template <class T>
void print_rec(std::ostream& os, const T* base, const Dims& shape, const Dims& strides, int dim, int64_t offset) {
  if (dim == shape.size()) {
    print_value(os, base[offset]);
    return;
  }
  os << '[';
  const int64_t n = shape[dim], limit = 6;
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * limit && i == limit) {
      os << "..., ";
      i = n - limit;
    }
    if (i) os << (dim + 1 == shape.size() ? ", " : ",\n" + std::string(dim + 1, ' '));
    print_rec(os, base, shape, strides, dim + 1, offset + i * strides[dim]);
  }
  os << ']';
}
}  // namespace

std::string Tensor::to_string() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const Tensor host = t.device().is_cpu() ? t : to_cpu(t);  // a raw device copy: printing records no graph
  os << "tensor(";
  std::ios_base::fmtflags flags(os.flags());
  os << std::setprecision(6);
  dispatch_storage(host.dtype(), [&]<class T>() {
    const T* base = static_cast<const T*>(host.storage()->data());
    print_rec(os, base, host.shape(), host.strides(), 0, host.offset());
  });
  os.flags(flags);
  return os << ", shape=" << t.shape() << ", dtype=" << t.dtype() << ")";
}

}  // namespace phasor
