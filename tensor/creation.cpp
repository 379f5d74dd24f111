// Creation of tensors with values: filled (full, zeros, ones, scalar_tensor)
// through the registry's fill kernel, counted (arange) or copied from host
// memory (from_blob). Apart from tensor/tensor.cpp, the handle, which calls no op.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace phasor {

Tensor full(const Dims& shape, c128 value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  ops::fill_(t, value);
  return t;
}
Tensor zeros(const Dims& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Dims& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor scalar_tensor(c128 value, DType dtype, Device device) { return full(Dims{}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype) {
  PHASOR_CHECK(step != 0.0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end), "arange: invalid range start=",
               start, " end=", end, " step=", step);
  const double count = std::max(0.0, std::ceil((end - start) / step));
  PHASOR_CHECK(count < 0x1p62, "arange: ", count, " elements (start=", start, " end=", end, " step=", step, ") are too many");
  const auto n = static_cast<int64_t>(count);
  if (n > 0) {  // the ends bound every value: each must fit the dtype (an int64 beyond 2^63 was undefined)
    (void)checked_scalar(start, dtype, "arange");
    (void)checked_scalar(start + static_cast<double>(n - 1) * step, dtype, "arange");
  }
  // bfloat16: the float32 values, rounded once (PyTorch computes them in float for bfloat16 too).
  if (dtype == DType::BFloat16) return ops::to(arange(start, end, step, DType::Float32), dtype);
  Tensor t = empty(Dims{n}, dtype);
  dispatch(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<real_of<T>>(start + static_cast<double>(i) * step));
  });
  return t;
}

Tensor from_blob(const void* data, const Dims& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t.nbytes()) std::memcpy(t.raw_data(), data, t.nbytes());
  return t;
}

}  // namespace phasor
