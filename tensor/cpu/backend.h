#pragma once
// The CPU kernels: the reference every other backend must agree with. One
// class, its methods defined by family in this folder (elementwise, reduce,
// gemm, index, fused, rotation, attention; cuda/ groups them in fewer files).
#include "tensor/backend.h"

namespace phasor::cpu {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  // elementwise.cpp
  void copy(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, c128 value) override;
  void unary(ops::Unary op, const Tensor& out, const Tensor& x) override;
  void binary(ops::Binary op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  void axpy(const Tensor& dst, const Tensor& src, double alpha) override;
  void compare(ops::Compare op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) override;
  void polar(const Tensor& out, const Tensor& abs, const Tensor& angle) override;
  void complex(const Tensor& out, const Tensor& re, const Tensor& im) override;
  void pow_scalar(const Tensor& out, const Tensor& x, double p) override;
  void fill_uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first) override;
  void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first) override;

  // reduce.cpp
  void sum_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t n) override;
  void sum_columns(const Tensor& out, const Tensor& x, int64_t reduced, int64_t cols) override;
  void cumsum(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse) override;
  void extreme(bool want_max, const Tensor& values, const Tensor& indices, const Tensor& x, int64_t rows, int64_t n) override;
  void row_softmax(RowOp op, const Tensor& out, const Tensor& x, int64_t rows, int64_t n) override;
  bool all_finite(const Tensor& x) override;

  // gemm.cpp
  void gemm(const Tensor& out, const GemmPlan& plan) override;

  // index.cpp
  void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override;
  void index_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override;
  void gather(const Tensor& out, const Tensor& x, const Tensor& index, int dim) override;
  void scatter_add(const Tensor& out, const Tensor& src, const Tensor& index, int dim) override;

  // The fused ops of tensor/fused_ops.h: fused.cpp, rotation.cpp (rotate,
  // cmha_rotate*), attention.cpp (attention_forward, attention_backward).
#define PHASOR_FUSED_METHOD(name, Args) void name(const ops::Args& args) override;
  PHASOR_FUSED_OPS(PHASOR_FUSED_METHOD)
#undef PHASOR_FUSED_METHOD

 private:
  void gemm_bf16(const Tensor& out, const GemmPlan& plan);  // gemm.cpp: bfloat16 operands
};

// The one instance; register_cpu() registers it (tensor/backend.cpp calls it).
Backend* backend_instance();
void register_cpu();

}  // namespace phasor::cpu
