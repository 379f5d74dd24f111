#pragma once
// Raw tensor operations: compute results, record nothing. The differentiable
// front-ends with the same names live in autograd/functions.h; most code
// should use those. Every op checks its arguments and throws phasor::Error
// naming itself and the offending shapes/dtypes.
#include <optional>
#include <vector>

#include "tensor/op_types.h"
#include "tensor/tensor.h"

namespace phasor::ops {

// ---- views (share storage) ----
Tensor reshape(const Tensor& t, const Dims& shape);  // view when possible, copy otherwise
Tensor view(const Tensor& t, const Dims& shape);     // view or error
Tensor permute(const Tensor& t, const Dims& order);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Dims& shape);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start, int64_t end);
Tensor view_as_real(const Tensor& t);     // complex [..] -> real [.., 2]
Tensor view_as_complex(const Tensor& t);  // real [.., 2] -> complex [..]
Tensor real(const Tensor& t);             // a view for complex input, the tensor itself for real
Tensor imag(const Tensor& t);             // a view; error for real input

// ---- copies and conversion ----
Tensor contiguous(const Tensor& t);  // t itself when already row-major
Tensor clone(const Tensor& t);
Tensor to(const Tensor& t, DType dtype);  // t itself when the dtype matches
// Copy to another device (t itself when already there). Devices other than the
// CPU are provided by a backend (cuda/) that registers its copy function.
Tensor to_device(const Tensor& t, Device device);
using DeviceCopy = Tensor (*)(const Tensor&, Device);
void register_device_copy(DeviceCopy copy);
void copy_(const Tensor& dst, const Tensor& src);  // broadcasting, converting copy into dst
void fill_(const Tensor& dst, c128 value);

// ---- elementwise, with broadcasting and promotion ----
// (Unary, Binary, Compare: tensor/op_types.h)
Tensor unary(Unary op, const Tensor& x);
Tensor binary(Binary op, const Tensor& a, const Tensor& b);
Tensor compare(Compare op, const Tensor& a, const Tensor& b);  // bool result
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor polar(const Tensor& abs, const Tensor& angle);
Tensor complex(const Tensor& re, const Tensor& im);
Tensor pow_scalar(const Tensor& x, double p);
// In place on `dst` (no broadcasting of dst): dst = dst op src.
void binary_(Binary op, const Tensor& dst, const Tensor& src);
// dst += alpha * src, in place.
void axpy_(const Tensor& dst, const Tensor& src, double alpha);

// ---- reductions ----
// `dims` empty means all dims.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Inclusive running sums along `dim` (reverse: from its last element back), shaped like x.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x);  // max over all elements, 0-d
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor norm(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);  // 2-norm (|.| for complex)
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Reduces `grad` (shaped like a broadcast result) back to `shape` by summing broadcast dims.
Tensor sum_to(const Tensor& grad, const Dims& shape);
bool all_finite(const Tensor& x);

// ---- linear algebra ----
// Batched matmul with broadcasting of leading dims: op(a) [.., M, K] x op(b) [.., K, N].
// The result has the operands' promoted dtype; bfloat16 operands accumulate in
// float32 and give a float32 result when out_dtype says so.
Tensor matmul(const Tensor& a, const Tensor& b, MatOp op_a = MatOp::None, MatOp op_b = MatOp::None,
              std::optional<DType> out_dtype = std::nullopt);
// Re( a b^H ) for real tensors holding interleaved complex pairs along the last dim:
// equal to a real a b^T, which is what makes rotary attention scores half the cost.
Tensor matmul_real_part_conj(const Tensor& a, const Tensor& b);

// ---- indexing ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = x with out.index(dim, index[i]) += src.index(dim, i)
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Zeros of `shape` with out[... index[i] ...] += src[... i ...] along dim (gather's adjoint).
Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src);
Tensor masked_fill(const Tensor& x, const Tensor& mask, c128 value);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
bool skipped_by_cat(const Tensor& t);  // a 1-d empty tensor: cat leaves it out whatever the shapes and dim
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// Upper-triangular causal mask [n, n]: true where key index > query index + offset.
Tensor causal_mask(int64_t n_query, int64_t n_key, int64_t offset = 0);

}  // namespace phasor::ops
