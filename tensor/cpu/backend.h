#pragma once
// The CPU kernels: the reference every other backend must agree with. One
// class, its methods defined by family in this folder, each file named like
// its CUDA twin (elementwise, reduce, gemm, index, fused).
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

  // fused.cpp
  void rms_norm(const ops::RmsNormResult& out, const Tensor& x, const Tensor& weight, double eps) override;
  void rms_norm_backward(const ops::RmsNormGrads& out, const Tensor& grad, const Tensor& x, const Tensor& weight,
                         const Tensor& inv_rms) override;
  int64_t cross_entropy(const ops::CrossEntropyResult& out, const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                        bool mean) override;
  void cross_entropy_backward(const Tensor& dlogits, double grad, const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              int64_t ignore_index) override;
  void swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) override;
  void swiglu_backward(const ops::SwigluGrads& out, const Tensor& grad, const Tensor& gate, const Tensor& up) override;
  // rotation.cpp
  void rotate(const Tensor& out, const Tensor& z, const Tensor& table, bool conjugate_table) override;
  void cmha_rotate(const Tensor& out, const Tensor& z, const ops::CmhaParams& p) override;
  void cmha_rotate_backward(const ops::CmhaGrads& out, const Tensor& grad, const Tensor& z, const ops::CmhaParams& p) override;
  // fused.cpp
  void attention_softmax(const Tensor& probs, const Tensor& scores, const Tensor& slopes, double scale, int64_t offset) override;
  void attention_softmax_backward(const Tensor& dscores, const Tensor& grad, const Tensor& probs, double scale) override;
  // attention.cpp
  void attention_forward(const ops::AttentionResult& out, const Tensor& q, const Tensor& k, const Tensor& v,
                         const ops::AttentionParams& p) override;
  void attention_backward(const ops::AttentionGrads& out, const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                          const ops::AttentionResult& forward, const ops::AttentionParams& p) override;
  // fused.cpp
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const ops::AdamWStep& s) override;
};

// The one instance, registered by tensor/backend.cpp.
Backend* backend_instance();

}  // namespace phasor::cpu
