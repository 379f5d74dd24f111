#pragma once
// Layers: Linear, Embedding, RMSNorm, LayerNorm, SwiGLU feed-forward, Dropout.
#include "nn/module.h"

namespace phasor::nn {

// y = x W^T (+ b). W is [out, in] as in the checkpoint layout; complex weights work too.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = false, DType dtype = DType::Float32, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
};

class Embedding : public Module {
 public:
  Embedding(int64_t count, int64_t dim, Generator* gen = nullptr);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;
  double eps;
};

// FFN(x) = W2 (silu(W1 x) * (W3 x)).
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t dim, int64_t hidden, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> w1, w2, w3;
};

// Zeroes each element with probability p in training (scaling the rest by 1/(1-p)); seeded.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed = 0);
  Tensor forward(const Tensor& x);
  double p;
  Generator generator;
};

// Losses.
Tensor mse_loss(const Tensor& prediction, const Tensor& target);

// Initialisation helpers (in place, no graph): normal(0, std) from a seeded generator.
void init_normal_(const Tensor& t, double std, Generator* gen = nullptr);
// GPT-2's scaled init for projections feeding the residual stream: std / sqrt(2 n_layers).
void init_residual_(const Tensor& t, double std, int64_t n_layers, Generator* gen = nullptr);

}  // namespace phasor::nn
