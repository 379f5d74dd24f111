#pragma once
// The differentiable tensor API. Each function computes its result with the
// raw kernel of the same name (tensor/ops.h) and, when grad mode is on and an
// input requires grad, records a node whose backward is written in
// autograd/derivatives.cpp.
#include <vector>

#include "tensor/ops.h"

namespace phasor {

// ---- views ----
Tensor reshape(const Tensor& t, const Dims& shape);
Tensor view(const Tensor& t, const Dims& shape);
Tensor permute(const Tensor& t, const Dims& order);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Dims& shape);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start = 0, int64_t end = -1);
Tensor view_as_real(const Tensor& t);
Tensor view_as_complex(const Tensor& t);
Tensor real(const Tensor& t);
Tensor imag(const Tensor& t);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
Tensor to(const Tensor& t, DType dtype);
Tensor to(const Tensor& t, Device device);
// t rounded to `storage` and back (its values as `storage` holds them), in t's
// dtype; the gradient passes through unrounded, as for a cast to `storage`
// and back whose backward keeps t's precision.
Tensor round_through(const Tensor& t, DType storage);

// ---- elementwise ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& y, const Tensor& x);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), computed without overflow; real only
Tensor gelu(const Tensor& x);
// d gelu(x) / dx = Phi(x) + x phi(x) (gelu's backward under create_graph).
Tensor gelu_derivative(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor conj(const Tensor& z);
Tensor angle(const Tensor& z);
// angle(z) with the Euler transform's regularised derivative: G_z = G i z / (|z|^2 + eps).
Tensor euler_phase(const Tensor& z, double eps);
Tensor polar(const Tensor& abs, const Tensor& angle);
Tensor complex(const Tensor& re, const Tensor& im);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, c128 value);

// Comparisons (no gradient; bool results).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// A 0-d tensor holding `value` in the dtype that combines with `like`.
Tensor scalar_like(const Tensor& like, c128 value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, c128 s);
Tensor operator-(const Tensor& a, c128 s);
Tensor operator*(const Tensor& a, c128 s);
Tensor operator/(const Tensor& a, c128 s);
Tensor operator+(c128 s, const Tensor& a);
Tensor operator-(c128 s, const Tensor& a);
Tensor operator*(c128 s, const Tensor& a);
Tensor operator/(c128 s, const Tensor& a);
inline Tensor operator*(const Tensor& a, double s) { return a * c128(s); }
inline Tensor operator*(double s, const Tensor& a) { return a * c128(s); }
inline Tensor operator/(const Tensor& a, double s) { return a / c128(s); }
inline Tensor operator+(const Tensor& a, double s) { return a + c128(s); }
inline Tensor operator-(const Tensor& a, double s) { return a - c128(s); }
inline Tensor operator-(double s, const Tensor& a) { return c128(s) - a; }
inline Tensor operator+(double s, const Tensor& a) { return a + c128(s); }
inline Tensor operator/(double s, const Tensor& a) { return c128(s) / a; }

// ---- reductions ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Inclusive running sums along `dim` (reverse: from the last element back); its
// gradient is the running sum of the gradient the other way.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);
ops::ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ops::ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor norm(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
// Sums broadcast dims away down to `shape` (the engine's step for a broadcast input).
Tensor sum_to(const Tensor& x, const Dims& shape);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b, MatOp op_a = MatOp::None, MatOp op_b = MatOp::None);
// x [.., M, K] times op_w(w) [K, N] (w 2-d; op_w None or Transpose) with both
// operands rounded to `compute` (bfloat16: the weight GEMMs of mixed precision,
// nn/precision.h), float32 accumulation and result. Backward rounds the
// incoming gradient likewise and multiplies it with the rounded operands saved
// by the forward (half the memory of float32 copies); the gradients come back
// in x's and w's own dtypes. First order only: create_graph is refused.
// `x_rounded` and `w_rounded`, when given, are x and w already in `compute`
// (cached copies: nn/precision.h rounds a layer input shared by Q, K and V once).
Tensor matmul_in(DType compute, const Tensor& x, const Tensor& w, MatOp op_w = MatOp::None, const Tensor& x_rounded = Tensor(),
                 const Tensor& w_rounded = Tensor());

// ---- indexing ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor embedding(const Tensor& weight, const Tensor& ids);  // weight [V, D], ids any shape -> [..., D]
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A zero tensor of `shape` with src added at index along dim (gather's adjoint).
Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace phasor
