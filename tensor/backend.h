#pragma once
// The kernels of a non-CPU device. The CPU kernels are the reference and live
// in tensor/*.cpp; a device backend (cuda/) registers an implementation of this
// interface, and each op front-end forwards to it when its inputs live there.
// Every method defaults to a clear "not implemented on <device>" error, so a
// backend can grow op by op.
#include "tensor/fused.h"
#include "tensor/ops.h"

namespace phasor {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // copies and conversion
  virtual void copy_(const Tensor& dst, const Tensor& src);  // same device, any strides/dtypes, src broadcast to dst
  virtual void fill_(const Tensor& dst, c128 value);
  // elementwise
  virtual Tensor unary(ops::Unary op, const Tensor& x);
  virtual Tensor binary(ops::Binary op, const Tensor& a, const Tensor& b);
  virtual void binary_(ops::Binary op, const Tensor& dst, const Tensor& src);
  virtual void axpy_(const Tensor& dst, const Tensor& src, double alpha);
  virtual Tensor compare(ops::Compare op, const Tensor& a, const Tensor& b);
  virtual Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  virtual Tensor polar(const Tensor& abs, const Tensor& angle);
  virtual Tensor complex(const Tensor& re, const Tensor& im);
  virtual Tensor pow_scalar(const Tensor& x, double p);
  // reductions
  virtual Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
  virtual ops::ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim);
  virtual ops::ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim);
  virtual Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim);
  virtual Tensor softmax(const Tensor& x, int64_t dim);
  virtual Tensor log_softmax(const Tensor& x, int64_t dim);
  virtual bool all_finite(const Tensor& x);
  // linear algebra and indexing
  virtual Tensor matmul(const Tensor& a, const Tensor& b, MatOp op_a, MatOp op_b);
  virtual Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
  virtual Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
  virtual Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
  virtual Tensor scatter_add(const Dims& shape, int64_t dim, const Tensor& index, const Tensor& src);
  // random: element i of a draw is philox_uniform / philox_normal(seed, first, i) (tensor/random.h)
  virtual void fill_uniform_(const Tensor& dst, double low, double high, uint64_t seed, uint64_t first);
  virtual void fill_normal_(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t first);
  // fused transformer kernels (tensor/fused.h)
  virtual ops::RmsNormResult rms_norm(const Tensor& x, const Tensor& weight, double eps);
  virtual ops::RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& inv_rms);
  virtual ops::CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean);
  virtual Tensor cross_entropy_backward(double grad, const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                                        int64_t ignore_index, double scale);
  virtual Tensor rotate(const Tensor& z, const Tensor& table, bool conjugate_table);
  virtual Tensor cmha_rotate(const Tensor& z, const ops::CmhaParams& p);
  virtual ops::CmhaGrads cmha_rotate_backward(const Tensor& grad, const Tensor& z, const ops::CmhaParams& p);
  virtual Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes);
  virtual Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale);
  // AdamW over one parameter (real view), PyTorch's formula
  virtual void adamw_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, double lr,
                           double weight_decay, double beta1, double beta2, double eps, double bias_correction1,
                           double bias_correction2_sqrt);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
};

void register_backend(DeviceType type, Backend* backend);
// The backend of a non-CPU device; null for the CPU.
Backend* backend_for(Device device);
// The backend of `t`'s device (null on the CPU), after checking that every other
// tensor given lives on the same device.
Backend* device_backend(const char* op, const Tensor& t, std::initializer_list<Tensor> others = {});

}  // namespace phasor
