#pragma once
// The launchers of every CUDA kernel. cuda/backend.cpp (plain C++) calls them
// with the raw device pointers and geometry of the tensors the op front-ends
// (tensor/*.cpp) checked and allocated; the .cu files hold the kernels. Each
// file names its CPU twin (tensor/cpu/*.cpp), which it must agree with.
#include <cstdint>
#include <memory>

#include "tensor/dtype.h"
#include "tensor/backend.h"

namespace phasor::gpu {

constexpr int kMaxDims = 8;

class Buffer;                 // cuda/runtime.h
enum class IndexOp : int64_t;  // cuda/runtime.h

// N operands sharing one (broadcast) shape, each with its own byte strides;
// dims contiguous in every operand are merged beforehand (tensor/strided.h), so
// ndim == 1 is the fast path (each stride is the item size, or 0 to broadcast).
template <int N>
struct Strided {
  int ndim = 1;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  char* base[N] = {};
};

// ---- elementwise (cuda/elementwise.cu; CPU: tensor/cpu/elementwise.cpp) ----
void launch_copy(DType dst, DType src, const Strided<2>& g);                 // operands: dst, src
void launch_fill(DType dst, c128 value, const Strided<1>& g);
void launch_unary(ops::Unary op, DType in, DType out, const Strided<2>& g);  // out, in
void launch_binary(ops::Binary op, DType t, const Strided<3>& g);            // out, a, b
void launch_compare(ops::Compare op, DType t, const Strided<3>& g);          // bool out, a, b
void launch_where(DType t, const Strided<4>& g);                             // out, cond, a, b
void launch_polar(DType real, const Strided<3>& g);                          // complex out, abs, angle
void launch_complex(DType real, const Strided<3>& g);                        // complex out, re, im
void launch_axpy(DType t, double alpha, const Strided<3>& g);                // dst, dst, src: dst += alpha * src
void launch_pow_scalar(DType t, double p, const Strided<2>& g);              // out, in
// Element i (row-major over the real view) = low + (high - low) * philox_uniform(seed, first, i),
// or mean + std * philox_normal(seed, first, i).
void launch_random(DType real, bool normal, double a, double b, uint64_t seed, uint64_t first, const Strided<1>& g);

// ---- reductions (cuda/reduce.cu; CPU: tensor/cpu/reduce.cpp) ----
// x [rows, n] contiguous -> out [rows]; float32 and complex64 accumulate in double.
void launch_sum_rows(DType t, const void* x, void* out, int64_t rows, int64_t n);
// x [reduced, cols] contiguous -> out [cols].
void launch_sum_columns(DType t, const void* x, void* out, int64_t reduced, int64_t cols);
void launch_cumsum(DType t, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool reverse);
// First maximum (minimum) of each row, a NaN winning as on the CPU.
void launch_extreme(DType t, bool want_max, const void* x, void* values, int64_t* indices, int64_t rows, int64_t n);
void launch_row_softmax(DType t, RowOp op, const void* x, void* out, int64_t rows, int64_t n);
// True when every value of the real array is finite.
bool all_finite(DType real, const void* x, int64_t n);

// ---- indexing (cuda/index.cu; CPU: tensor/cpu/index.cpp) ----
// out[a, i, :] = x[a, index[i], :]; rows of `row_bytes` bytes.
void launch_index_select(const void* x, const int64_t* index, void* out, int64_t outer, int64_t n, int64_t count, int64_t row_bytes);
// Positions 0..count-1 of `targets` (values in [0, n); others are left out)
// grouped by target on the device, each group in increasing position order,
// which is the CPU kernels' summation order: a stable counting sort, no host
// synchronisation. Group t is list()[start()[t * stride()] .. start()[(t + 1) * stride()]).
class TargetGroups {
 public:
  TargetGroups(const int64_t* targets, int64_t count, int64_t n);
  ~TargetGroups();
  const int64_t* start() const;
  int64_t stride() const { return chunks_; }
  const int64_t* list() const;

 private:
  int64_t chunks_;
  std::unique_ptr<Buffer> hist_, start_, list_;
};
// Segmented, ordered sums (deterministic, no atomics): for every out row s,
//   out[(a * out_rows + s) * inner + c] += sum over the positions k of group s of src[(a * src_rows + k) * inner + c]
// in increasing k.
void launch_segment_add(DType t, void* out, const void* src, const TargetGroups& groups, int64_t outer, int64_t inner, int64_t out_rows,
                        int64_t src_rows);
// Records the first index outside [0, n) (a value equal to *ignore aside) as
// the pending index fault of `op` (cuda/runtime.h), raised at the next synchronisation.
void launch_check_indices(const int64_t* index, int64_t count, int64_t n, IndexOp op, int dim, const int64_t* ignore = nullptr);
// out[e] = x[offset of e's multi-index in `index_shape` with dim `dim` replaced by index[e]].
void launch_gather(int64_t item_bytes, const void* x, const int64_t* index, void* out, int ndim, const int64_t* index_shape,
                   const int64_t* x_strides, int dim, int64_t x_size, int64_t numel);
// offsets[e]: the same offset into a contiguous out (strides `out_strides`), -1 for an index outside [0, out_size).
void launch_scatter_offsets(const int64_t* index, int ndim, const int64_t* index_shape, const int64_t* out_strides, int dim, int64_t out_size,
                            int64_t numel, int64_t* offsets);

// ---- the launch arguments of cuda/rotation.cu's ComplexFormer rotation and of
// cuda/attention.cu's fused causal attention.
struct CmhaArgs {
  const void* delta = nullptr;  // [H, P] real
  const void* bias = nullptr;   // [H, P] real or null
  const void* beta = nullptr;   // [H] real
  int64_t b = 0, n = 0, h = 0, p = 0, offset = 0;
  double rope_base = 10000.0;
  const double* frequencies = nullptr;  // [P] on the device, or null: rope_base^(-2j/d)
};
// An operand [B, N, H, d] with packed heads (element stride 1, head stride d)
// and any batch and row strides, in elements.
struct AttentionOperand {
  const void* data = nullptr;
  int64_t batch_stride = 0, row_stride = 0;
};
struct AttentionArgs {
  AttentionOperand q, k, v;      // q [B, Nq, H, d]; k [B, Nk, H, d]; v [B, Nk, H, dv]
  const void* slopes = nullptr;  // [H] (ALiBi) or null
  const void* distance_bias = nullptr;  // [H, bias_bins] or null
  int64_t bias_bins = 0;
  int64_t b = 0, nq = 0, nk = 0, h = 0, d = 0, dv = 0, offset = 0;
  double scale = 1.0;
};
// ---- the fused ops of tensor/fused_ops.h's list, one function each, called by
// cuda/backend.cpp's methods of the same name, each in the twin of its CPU
// file: cuda/fused.cu (AdamW's step included), rotation.cu and
// polar_rotation.cu (CPU: tensor/cpu/fused.cpp, rotation.cpp and
// polar_rotation.cpp), attention_forward and attention_backward in
// cuda/attention.cu (CPU: tensor/cpu/attention.cpp).
#define PHASOR_FUSED_FUNCTION(name, Args) void name(const ops::Args& args);
PHASOR_FUSED_OPS(PHASOR_FUSED_FUNCTION)
#undef PHASOR_FUSED_FUNCTION
// RMSNorm's launcher on raw pointers, for test_cuda's check of the grid limit
// on a row count no tensor could hold.
void launch_rms_norm(DType t, const void* x, const void* w, void* y, void* inv_rms, int64_t rows, int64_t d, double eps);

}  // namespace phasor::gpu
