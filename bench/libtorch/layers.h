#pragma once
// The building blocks of the causal LM of docs/spec.md, as LibTorch
// modules whose registered names are the checkpoint's names
// ("attn_norm.weight", "attn.wq.weight", "attn.delta", "ffn.w1.weight", ...).
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "models/config.h"

namespace phasor::torch_ref {

// RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight.
struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(RMSNorm);

// SwiGLU: w2(silu(w1 x) * w3 x), no biases.
struct FeedForwardImpl : torch::nn::Module {
  FeedForwardImpl(int64_t d_model, int64_t d_ff);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(FeedForward);

// Causal multi-head attention with every `position` variant of the spec.
// pos_offset shifts the positions of all tokens (m = pos_offset + index); the
// relative variants must give the same scores for any offset.
struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const ModelConfig& config);

  // x: [B, N, D] -> [B, N, D].
  torch::Tensor forward(const torch::Tensor& x, int64_t pos_offset = 0);

  // Pre-mask, pre-softmax scores [B, H, N, N], including the ALiBi bias.
  torch::Tensor scores(const torch::Tensor& x, int64_t pos_offset = 0);
  // Query and key heads after the variant's rotation, [B, H, N, w] each (w:
  // the query/key width), laid out as interleaved (re, im) pairs so that the
  // real dot product of two rows is Re(sum_j q'_j conj(k'_j)). Public for the
  // side-by-side benchmark of this step alone (bench/compare_torch.cpp, workload qk).
  std::pair<torch::Tensor, torch::Tensor> rotated_qk(const torch::Tensor& x, int64_t pos_offset);

  ModelConfig config;
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  // The position scheme's own parameters (models/positions.h, layer_parameters(),
  // in its order): complexformer's delta [H, P], phase_bias [H, P], beta [H].
  std::vector<torch::Tensor> position_parameters;
  // alibi only: the slopes s_h, float64 [H].
  torch::Tensor alibi_slopes;

 private:
  // [B, N, D] -> [B, H, N, d].
  torch::Tensor split_heads(const torch::Tensor& t) const;
};
TORCH_MODULE(Attention);

// Pre-norm block: x + Attn(norm(x)), then x + FFN(norm(x)).
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, int64_t pos_offset = 0);

  RMSNorm attn_norm{nullptr};
  Attention attn{nullptr};
  RMSNorm ffn_norm{nullptr};
  FeedForward ffn{nullptr};
};
TORCH_MODULE(Block);

}  // namespace phasor::torch_ref
