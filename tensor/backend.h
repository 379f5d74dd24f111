#pragma once
// The kernels of one device.
//
// Every op has one front-end (tensor/*.cpp, nn's optimizer step): it checks the
// arguments, promotes dtypes, decides the output's shape, allocates it on the
// device its inputs live on and brings the operands into the layout stated
// below. Then it calls the kernel of that device's Backend. A kernel trusts
// what its front-end checked; it checks only what it alone reads (the values
// of index tensors), with the messages of index_out_of_range().
//
// The CPU kernels (tensor/cpu/) are the reference; the CUDA ones (cuda/) must
// agree with them. Both register here the same way.
#include <cstdint>
#include <vector>

#include "tensor/attention.h"
#include "tensor/fused.h"
#include "tensor/ops.h"

namespace phasor {

// How a stored row-major matrix enters a GEMM: as it is, transposed, or
// conjugate-transposed (BLAS flags N, T, C).
enum class BlasOp { N, T, C };

// One GEMM operand: `t`'s last two dims hold the stored matrices, `ld` is their
// leading dimension and `offsets` the element offset of each batch item.
struct GemmOperand {
  Tensor t;
  BlasOp op = BlasOp::N;
  int64_t ld = 1;
  std::vector<int64_t> offsets;
};
// out [batch, m, n] (contiguous) = op(a) [m, k] x op(b) [k, n] for each batch item.
struct GemmPlan {
  GemmOperand a, b;
  int64_t m = 0, n = 0, k = 0;
};

// Row-wise softmax family over contiguous [rows, n].
enum class RowOp { LogSumExp, Softmax, LogSoftmax };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- elementwise: every operand has out's shape (inputs may be broadcast
  // views with stride 0) and, unless stated, out's dtype.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;  // any two dtypes; complex -> real keeps the real part
  virtual void fill(const Tensor& dst, c128 value) = 0;
  // x in the working dtype; out in that dtype, or its real dtype for Abs and Angle.
  virtual void unary(ops::Unary op, const Tensor& out, const Tensor& x) = 0;
  virtual void binary(ops::Binary op, const Tensor& out, const Tensor& a, const Tensor& b) = 0;  // out may be a (in place)
  virtual void axpy(const Tensor& dst, const Tensor& src, double alpha) = 0;                      // dst += alpha src
  virtual void compare(ops::Compare op, const Tensor& out, const Tensor& a, const Tensor& b) = 0;  // out bool
  virtual void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = 0;  // cond bool
  virtual void polar(const Tensor& out, const Tensor& abs, const Tensor& angle) = 0;  // complex out, real inputs
  virtual void complex(const Tensor& out, const Tensor& re, const Tensor& im) = 0;    // complex out, real inputs
  virtual void pow_scalar(const Tensor& out, const Tensor& x, double p) = 0;
  // dst real floating: element i (row-major) = low + (high - low) philox_uniform(seed, first, i),
  // or mean + std philox_normal(seed, first, i) (tensor/random.h).
  virtual void fill_uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first) = 0;
  virtual void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first) = 0;

  // ---- reductions over contiguous layouts; float32 and complex64 sums accumulate in double.
  virtual void sum_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t n) = 0;           // [rows, n] -> [rows]
  virtual void sum_columns(const Tensor& out, const Tensor& x, int64_t reduced, int64_t cols) = 0;  // [reduced, cols] -> [cols]
  // First maximum (minimum) of each row of [rows, n], n > 0; a NaN wins.
  virtual void extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) = 0;
  virtual void row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) = 0;  // real floating, n > 0
  virtual bool all_finite(const Tensor& x) = 0;                                                         // contiguous real floating

  // ---- linear algebra: out contiguous, k > 0, inexact dtype shared by all three.
  virtual void gemm(const Tensor& out, const GemmPlan& plan) = 0;

  // ---- indexing: x, src, out contiguous; index contiguous int64 (1-d for
  // index_select and index_add, shaped like out or src for gather and scatter_add).
  virtual void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) = 0;
  virtual void index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) = 0;    // out += src at index along dim
  virtual void gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) = 0;
  virtual void scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) = 0;  // out holds zeros

  // ---- fused transformer kernels (tensor/fused.h): operands contiguous,
  // parameters in the (real) dtype of the data.
  virtual void rms_norm(const ops::RmsNormResult& out, const Tensor& x, const Tensor& weight, double eps) = 0;
  virtual void rms_norm_backward(const ops::RmsNormGrads& out, const Tensor& grad, const Tensor& x, const Tensor& weight,
                                 const Tensor& inv_rms) = 0;
  // Validates the targets, fills the loss and each row's logsumexp; returns the rows counted.
  virtual int64_t cross_entropy(const ops::CrossEntropyResult& out, const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                bool mean) = 0;
  virtual void cross_entropy_backward(const Tensor& dlogits, double grad, const Tensor& logits, const Tensor& targets,
                                      const Tensor& logsumexp, int64_t ignore_index) = 0;
  // out = silu(gate) up and its backward; contiguous, same shape and dtype (tensor/fused.h).
  virtual void swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) = 0;
  virtual void swiglu_backward(const ops::SwigluGrads& out, const Tensor& grad, const Tensor& gate, const Tensor& up) = 0;
  virtual void rotate(const Tensor& out, const Tensor& z, const Tensor& table, bool conjugate_table) = 0;
  virtual void cmha_rotate(const Tensor& out, const Tensor& z, const ops::CmhaParams& p) = 0;
  virtual void cmha_rotate_backward(const ops::CmhaGrads& out, const Tensor& grad, const Tensor& z, const ops::CmhaParams& p) = 0;
  virtual void attention_softmax(const Tensor& probs, const Tensor& scores, const Tensor& slopes, double scale, int64_t offset) = 0;
  virtual void attention_softmax_backward(const Tensor& dscores, const Tensor& grad, const Tensor& probs, double scale) = 0;
  // Fused causal attention (tensor/attention.h): q, k, v, grad and the saved
  // output have packed heads ([.., H, d] contiguous) but may have any batch and
  // row strides; the results are contiguous; slopes contiguous or undefined.
  virtual void attention_forward(const ops::AttentionResult& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const ops::AttentionParams& p) = 0;
  virtual void attention_backward(const ops::AttentionGrads& out, const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const ops::AttentionResult& forward, const ops::AttentionParams& p) = 0;
  // param, grad, exp_avg, exp_avg_sq: contiguous real arrays of one dtype and size.
  virtual void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const ops::AdamWStep& s) = 0;
};

void register_backend(DeviceType type, Backend* backend);
// The kernels of `device`; an error when that device is not available.
Backend& backend(Device device);
// The device an op computes on: that of `t` and every defined tensor in
// `others`, which must agree, except that a 0-d CPU tensor (the 2 of `x * 2`)
// may accompany tensors of another device (the front-end copies it over).
Device op_device(const char* op, const Tensor& t, std::initializer_list<Tensor> others = {});
// `t` on `device` (itself when already there); undefined stays undefined.
Tensor on_device(const Tensor& t, Device device);
// The one message for an index value outside [0, size): kernels of every
// backend report it the same way.
[[noreturn]] void index_out_of_range(const char* op, int64_t index, int dim, int64_t size);
[[noreturn]] void target_out_of_range(int64_t target, int64_t row, int64_t classes);  // cross_entropy's

}  // namespace phasor
