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
// agree with them. Each registers itself (register_backend) from its own
// folder. Includes the leaf headers of op enums and fused-op structs, never a
// front-end (ops.h, fused.h, attention.h) nor a backend.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensor/fused_ops.h"
#include "tensor/op_types.h"
#include "tensor/tensor.h"

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

// The largest size, leading dimension or batch count Phasor passes to a library
// whose integers are 32 bits (OpenBLAS's LP64 cblas, cuBLAS): INT32_MAX. The
// matmul front-end splits or copies whatever exceeds it, so a plan never holds
// more; blas_int narrows at the call and refuses (one line) rather than wrap.
int64_t blas_int_limit();
int blas_int(int64_t v, const char* what);
// Tests lower the limit to reach the split and copy paths at small sizes; 0 restores it.
void set_blas_int_limit_for_testing(int64_t limit);

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
  // Inclusive running sums along the middle dim of [outer, n, inner], from its
  // first element (or, reverse, from its last); out shaped like x.
  virtual void cumsum(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse) = 0;
  // First maximum (minimum) of each row of [rows, n], n > 0; a NaN wins.
  virtual void extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) = 0;
  virtual void row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) = 0;  // real floating, n > 0
  virtual bool all_finite(const Tensor& x) = 0;                                                         // contiguous real floating

  // ---- linear algebra: out contiguous, k > 0, inexact dtype shared by all
  // three; or bfloat16 operands with a bfloat16 or float32 `out` (float32
  // accumulation either way).
  virtual void gemm(const Tensor& out, const GemmPlan& plan) = 0;

  // ---- indexing: x, src, out contiguous; index contiguous int64 (1-d for
  // index_select and index_add, shaped like out or src for gather and scatter_add).
  virtual void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) = 0;
  virtual void index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) = 0;    // out += src at index along dim
  virtual void gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) = 0;
  virtual void scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) = 0;  // out holds zeros

  // ---- fused kernels: one method per entry of tensor/fused_ops.h's list.
#define PHASOR_FUSED_METHOD(name, Args) virtual void name(const ops::Args& args) = 0;
  PHASOR_FUSED_OPS(PHASOR_FUSED_METHOD)
#undef PHASOR_FUSED_METHOD
};

void register_backend(DeviceType type, Backend* backend);
// A function every backend lookup calls first, whatever the device (the CPU
// backend's: a forked child's first op drops it to one thread,
// tensor/cpu/fork.h). At most a few; registered once, at a backend's registration.
using BeforeOpHook = void (*)();
void register_before_op(BeforeOpHook hook);
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
// The rows of a contiguous operand read as [rows, its last dim] (1 for a 0-d one).
inline int64_t rows_of(const Tensor& x) { return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1; }

}  // namespace phasor
