// The CUDA implementation of phasor::Backend. Each method turns the tensors
// its front-end prepared (tensor/*.cpp: argument checks, dtypes, shapes,
// allocation, operand layout) into raw device pointers and launch geometry,
// and calls a launcher of cuda/kernels.h. Nothing here re-checks what the
// front-ends checked; index values, which only a kernel reads, are validated
// on the host with the messages of tensor/backend.h.
#include <map>

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

// The values of an index tensor, on the host (one synchronisation).
std::vector<int64_t> host_indices(const Tensor& index) { return index.to_vector<int64_t>(); }
void check_rows(const char* op, const std::vector<int64_t>& index, int dim, int64_t n) {
  for (int64_t k : index)
    if (k < 0 || k >= n) index_out_of_range(op, k, dim, n);
}

// Ordered segments: positions grouped by target, each group in increasing
// position order (the CPU kernels' summation order), for deterministic sums.
struct Segments {
  std::vector<int64_t> target, start, list;
};
Segments group_by_target(const std::vector<int64_t>& targets) {
  std::map<int64_t, std::vector<int64_t>> groups;
  for (size_t i = 0; i < targets.size(); ++i) groups[targets[i]].push_back(static_cast<int64_t>(i));
  Segments s;
  s.start.push_back(0);
  for (auto& [t, positions] : groups) {
    s.target.push_back(t);
    s.list.insert(s.list.end(), positions.begin(), positions.end());
    s.start.push_back(static_cast<int64_t>(s.list.size()));
  }
  return s;
}
struct DeviceSegments {
  Tensor target, start, list;
  int64_t count;
  explicit DeviceSegments(const Segments& s)
      : target(ops::to_device(from_vector(s.target), kGpu)),
        start(ops::to_device(from_vector(s.start), kGpu)),
        list(ops::to_device(from_vector(s.list), kGpu)),
        count(static_cast<int64_t>(s.target.size())) {}
};

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
  void extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) override {
    launch_extreme(x.dtype(), want_max, x.raw_data(), values.raw_data(), indices.data<int64_t>(), rows, n);
  }
  void row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) override {
    launch_row_softmax(x.dtype(), op, x.raw_data(), out.raw_data(), rows, n);
  }
  bool all_finite(const Tensor& x) override { return gpu::all_finite(x.dtype(), x.raw_data(), x.numel()); }

  // ---------------------------------------------------------------- GEMM (cuda/gemm.cpp)

  void gemm(const Tensor& out, const GemmPlan& plan) override { gpu::gemm(out, plan); }

  // ---------------------------------------------------------------- indexing (cuda/reduce.cu)

  void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override {
    const AroundDim s = around_dim(x.shape(), dim);
    check_rows("index_select", host_indices(index), dim, s.n);
    launch_index_select(x.raw_data(), index.data<int64_t>(), out.raw_data(), s.outer, s.n, index.numel(),
                        s.inner * static_cast<int64_t>(itemsize(x.dtype())));
  }

  void index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override {
    const AroundDim s = around_dim(src.shape(), dim);
    const int64_t n = out.size(dim);
    const std::vector<int64_t> rows = host_indices(index);
    check_rows("index_add", rows, dim, n);
    const DeviceSegments seg(group_by_target(rows));
    launch_segment_add(out.dtype(), out.raw_data(), src.raw_data(), seg.target.data<int64_t>(), seg.start.data<int64_t>(),
                       seg.list.data<int64_t>(), seg.count, s.outer, s.inner, n, index.numel());
  }

  void gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override {
    const Dims xs = contiguous_strides(x.shape());
    for_each_indexed_offset("gather", host_indices(index).data(), index.shape(), xs, dim, x.size(dim), [](int64_t, int64_t) {});
    launch_gather(static_cast<int64_t>(itemsize(x.dtype())), x.raw_data(), index.data<int64_t>(), out.raw_data(), index.dim(),
                  index.shape().begin(), xs.begin(), dim, index.numel());
  }

  void scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override {
    // The flat output offset of every source element, in the CPU kernel's order.
    std::vector<int64_t> targets(static_cast<size_t>(index.numel()));
    for_each_indexed_offset("scatter_add", host_indices(index).data(), index.shape(), contiguous_strides(out.shape()), dim, out.size(dim),
                            [&](int64_t e, int64_t off) { targets[e] = off; });
    const DeviceSegments seg(group_by_target(targets));
    launch_segment_add(src.dtype(), out.raw_data(), src.raw_data(), seg.target.data<int64_t>(), seg.start.data<int64_t>(),
                       seg.list.data<int64_t>(), seg.count, 1, 1, out.numel(), src.numel());
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
