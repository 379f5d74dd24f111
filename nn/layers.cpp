#include "nn/layers.h"

#include <cmath>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "nn/precision.h"

namespace phasor::nn {

void init_normal_(const Tensor& t, double std, Generator* gen) {
  NoGradGuard no_grad;
  ops::copy_(t, normal(t.shape(), 0.0, std, t.dtype(), gen));
}

void init_residual_(const Tensor& t, double std, int64_t n_layers, Generator* gen) {
  init_normal_(t, std / std::sqrt(2.0 * static_cast<double>(n_layers)), gen);
}

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype, Generator* gen) {
  // Kaiming-uniform bound 1/sqrt(in), as torch.nn.Linear.
  const double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(in, 1)));
  weight = register_parameter("weight", uniform({out, in}, -bound, bound, dtype, gen));
  if (with_bias) bias = register_parameter("bias", uniform({out}, -bound, bound, dtype, gen));
}

Tensor Linear::forward(const Tensor& x) const {
  Tensor y = weight_product(x, weight);  // bfloat16 under mixed precision (nn/precision.h)
  return bias.defined() ? y + bias : y;
}

Embedding::Embedding(int64_t count, int64_t dim, Generator* gen) {
  weight = register_parameter("weight", normal({count, dim}, 0.0, 1.0, DType::Float32, gen));
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

RMSNorm::RMSNorm(int64_t dim, double eps_) : eps(eps_) { weight = register_parameter("weight", ones({dim})); }

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, weight, eps); }

LayerNorm::LayerNorm(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  const Tensor centered = x - mean(x, {-1}, true);
  const Tensor var = mean(centered * centered, {-1}, true);
  return centered * rsqrt(var + eps) * weight + bias;
}

SwiGLU::SwiGLU(int64_t dim, int64_t hidden, Generator* gen) {
  w1 = register_module("w1", std::make_shared<Linear>(dim, hidden, false, DType::Float32, gen));
  w2 = register_module("w2", std::make_shared<Linear>(hidden, dim, false, DType::Float32, gen));
  w3 = register_module("w3", std::make_shared<Linear>(dim, hidden, false, DType::Float32, gen));
}

Tensor SwiGLU::forward(const Tensor& x) const { return w2->forward(swiglu(w1->forward(x), w3->forward(x))); }

Dropout::Dropout(double p_, uint64_t seed) : p(p_), generator(seed) {
  PHASOR_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p == 0.0) return x;
  const Tensor keep = ge(rand(x.shape(), real_dtype(x.dtype()), &generator), scalar_tensor(p, real_dtype(x.dtype())));
  return x * phasor::to(keep, real_dtype(x.dtype())) * (1.0 / (1.0 - p));
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  PHASOR_CHECK(prediction.shape() == target.shape(), "mse_loss: prediction shape ", prediction.shape(), " differs from target shape ",
               target.shape());
  const Tensor d = prediction - target;
  return mean(d.is_complex() ? real(d * conj(d)) : d * d);
}

}  // namespace phasor::nn
