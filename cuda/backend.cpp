// The CUDA implementation of phasor::Backend. Each method turns the tensors
// its front-end prepared (tensor/*.cpp: argument checks, dtypes, shapes,
// allocation, operand layout) into raw device pointers and launch geometry,
// and calls a launcher of cuda/kernels.h. Nothing here re-checks what the
// front-ends checked; index values, which only a kernel reads, are validated
// by a kernel too (launch_check_indices), and a bad one raised at the next
// synchronisation with the message of tensor/backend.h: no op here reads
// device memory on the host.
#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "tensor/backend.h"
#include "tensor/index_plan.h"
#include "tensor/ops.h"
#include "tensor/strided.h"

namespace phasor::gpu {

void gemm(const Tensor& out, const GemmPlan& plan);  // cuda/gemm.cpp

namespace {

const Device kGpu = phasor::cuda(0);

// The launch geometry of `out` and its inputs (each already broadcast to out's shape).
template <int N>
Strided<N> geometry(const Tensor& out, const std::array<Tensor, N - 1>& ins) {
  const StridedPlan<N> plan = strided_plan<N>(out, ins);
  PHASOR_CHECK(plan.shape.size() <= kMaxDims, "cuda: an elementwise op over ", plan.shape.size(),
               " non-mergeable dims exceeds the kernels' limit of ", kMaxDims, " (make an operand contiguous first)");
  Strided<N> g;
  g.ndim = plan.shape.size();
  g.numel = out.numel();
  for (int d = 0; d < g.ndim; ++d) {
    g.shape[d] = plan.shape[d];
    for (int i = 0; i < N; ++i) g.strides[i][d] = plan.strides[i][d];
  }
  for (int i = 0; i < N; ++i) g.base[i] = plan.base[i];
  return g;
}

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }

  // ---------------------------------------------------------------- elementwise (cuda/elementwise.cu)

  void copy(const Tensor& dst, const Tensor& src) override { launch_copy(dst.dtype(), src.dtype(), geometry<2>(dst, {src})); }
  void fill(const Tensor& dst, c128 value) override { launch_fill(dst.dtype(), value, geometry<1>(dst, {})); }
  void unary(ops::Unary op, const Tensor& out, const Tensor& x) override {
    launch_unary(op, x.dtype(), out.dtype(), geometry<2>(out, {x}));
  }
  void binary(ops::Binary op, const Tensor& out, const Tensor& a, const Tensor& b) override {
    launch_binary(op, out.dtype(), geometry<3>(out, {a, b}));
  }
  void axpy(const Tensor& dst, const Tensor& src, double alpha) override {
    launch_axpy(dst.dtype(), alpha, geometry<3>(dst, {dst, src}));
  }
  void compare(ops::Compare op, const Tensor& out, const Tensor& a, const Tensor& b) override {
    launch_compare(op, a.dtype(), geometry<3>(out, {a, b}));
  }
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) override {
    launch_where(out.dtype(), geometry<4>(out, {cond, a, b}));
  }
  void polar(const Tensor& out, const Tensor& abs, const Tensor& angle) override {
    launch_polar(abs.dtype(), geometry<3>(out, {abs, angle}));
  }
  void complex(const Tensor& out, const Tensor& re, const Tensor& im) override { launch_complex(re.dtype(), geometry<3>(out, {re, im})); }
  void pow_scalar(const Tensor& out, const Tensor& x, double p) override { launch_pow_scalar(out.dtype(), p, geometry<2>(out, {x})); }
  void fill_uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first) override {
    launch_random(dst.dtype(), false, low, high, seed, first, geometry<1>(dst, {}));
  }
  void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first) override {
    launch_random(dst.dtype(), true, mean, std, seed, first, geometry<1>(dst, {}));
  }

  // ---------------------------------------------------------------- reductions (cuda/reduce.cu)

  void sum_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t n) override {
    launch_sum_rows(x.dtype(), x.raw_data(), out.raw_data(), rows, n);
  }
  void sum_columns(const Tensor& out, const Tensor& x, int64_t reduced, int64_t cols) override {
    launch_sum_columns(x.dtype(), x.raw_data(), out.raw_data(), reduced, cols);
  }
  void cumsum(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse) override {
    launch_cumsum(x.dtype(), x.raw_data(), out.raw_data(), outer, n, inner, reverse);
  }
  void extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) override {
    launch_extreme(x.dtype(), want_max, x.raw_data(), values.raw_data(), indices.data<int64_t>(), rows, n);
  }
  void row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) override {
    launch_row_softmax(x.dtype(), op, x.raw_data(), out.raw_data(), rows, n);
  }
  bool all_finite(const Tensor& x) override { return gpu::all_finite(x.dtype(), x.raw_data(), x.numel()); }

  // ---------------------------------------------------------------- GEMM (cuda/gemm.cpp)

  void gemm(const Tensor& out, const GemmPlan& plan) override { gpu::gemm(out, plan); }

  // ---------------------------------------------------------------- indexing (cuda/index.cu)

  void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override {
    const AroundDim s = around_dim(x.shape(), dim);
    launch_check_indices(index.data<int64_t>(), index.numel(), s.n, IndexOp::IndexSelect, dim);
    launch_index_select(x.raw_data(), index.data<int64_t>(), out.raw_data(), s.outer, s.n, index.numel(),
                        s.inner * static_cast<int64_t>(itemsize(x.dtype())));
  }

  void index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override {
    const AroundDim s = around_dim(src.shape(), dim);
    const int64_t n = out.size(dim);
    launch_check_indices(index.data<int64_t>(), index.numel(), n, IndexOp::IndexAdd, dim);
    const TargetGroups groups(index.data<int64_t>(), index.numel(), n);
    launch_segment_add(out.dtype(), out.raw_data(), src.raw_data(), groups, s.outer, s.inner, n, index.numel());
  }

  void gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override {
    const Dims xs = contiguous_strides(x.shape());
    launch_check_indices(index.data<int64_t>(), index.numel(), x.size(dim), IndexOp::Gather, dim);
    launch_gather(static_cast<int64_t>(itemsize(x.dtype())), x.raw_data(), index.data<int64_t>(), out.raw_data(), index.dim(),
                  index.shape().begin(), xs.begin(), dim, x.size(dim), index.numel());
  }

  void scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override {
    // The flat output offset of every source element, grouped in the CPU kernel's order.
    launch_check_indices(index.data<int64_t>(), index.numel(), out.size(dim), IndexOp::ScatterAdd, dim);
    const Buffer offsets(static_cast<size_t>(std::max<int64_t>(index.numel(), 1)) * sizeof(int64_t));
    launch_scatter_offsets(index.data<int64_t>(), index.dim(), index.shape().begin(), contiguous_strides(out.shape()).begin(), dim, out.size(dim),
                           index.numel(), offsets.as<int64_t>());
    const TargetGroups groups(offsets.as<int64_t>(), index.numel(), out.numel());
    launch_segment_add(src.dtype(), out.raw_data(), src.raw_data(), groups, 1, 1, out.numel(), src.numel());
  }

  // ---------------------------------------------------------------- fused ops (cuda/kernels.h)

#define PHASOR_FUSED_METHOD(name, Args) \
  void name(const ops::Args& args) override { gpu::name(args); }
  PHASOR_FUSED_OPS(PHASOR_FUSED_METHOD)
#undef PHASOR_FUSED_METHOD
};

}  // namespace

Backend* backend_instance() {
  static CudaBackend* backend = new CudaBackend();
  return backend;
}

}  // namespace phasor::gpu
