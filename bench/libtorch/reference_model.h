#pragma once
// The LibTorch version of the ComplexFormer causal LM (docs/spec.md):
// the reference Phasor is checked against for numerical parity and benchmarked
// against. named_parameters() gives exactly the checkpoint's names, so weights
// move between the two by name (state / load_state, or a safetensors file).
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/libtorch/layers.h"
#include "models/config.h"

namespace phasor::torch_ref {

class Model : public torch::nn::Module {
 public:
  // Validates the config (phasor::Error on a bad one) and initialises as initialize(seed).
  explicit Model(const ModelConfig& config, uint64_t seed = 0);

  // tokens [B, N] int64 -> logits [B, N, V] in the parameters' dtype (float32;
  // model.to(torch::kFloat64) runs it in float64 for gradient checks). pos_offset shifts every
  // position (m = pos_offset + index). Throws phasor::Error for bad tokens, or
  // for `learned` past max_seq_len.
  torch::Tensor forward(const torch::Tensor& tokens, int64_t pos_offset = 0);

  // Mean cross-entropy (nats per token) of forward(tokens) against targets [B, N].
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets);

  // Training-from-scratch init, reproducible for a seed on any device: weights
  // ~ Normal(0, 0.02), norm gains 1, CMHA per cmha_init (rope: delta 1,
  // phase_bias 0, beta 1; paper: delta ~ Normal(0, 1/sqrt(P))).
  void initialize(uint64_t seed);

  const ModelConfig& config() const { return config_; }
  torch::Device device() const;

  torch::nn::Embedding tok_emb{nullptr};
  torch::nn::Embedding pos_emb{nullptr};  // `learned` only
  std::vector<Block> blocks;             // registered as "layers.{l}"
  RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // absent when tie_embeddings

 private:
  ModelConfig config_;
};

// Parameters that take no weight decay: the spec's delta, phase_bias, beta, and
// the RMSNorm gains (Phasor's rule, CausalLM::decayed_parameters: only 2-d weights decay).
bool is_no_decay(const std::string& name);

// --- Weights in and out (checkpoint.cpp) -----------------------------------

// A detached, contiguous CPU copy of every parameter, by checkpoint name (in
// the parameters' dtype: float32 unless the model was converted).
std::map<std::string, torch::Tensor> state(const Model& model);

// Copies tensors into the model's parameters. Every parameter must be present
// with its exact shape and dtype float32 (or the parameter's own dtype), and no
// other name may appear; otherwise phasor::Error names the tensor and the shapes.
void load_state(Model& model, const std::map<std::string, torch::Tensor>& tensors);

// The model config stored in a checkpoint's metadata (validated).
ModelConfig read_config(const std::string& path);

// Loads a checkpoint into an existing model: the same checks as load_state,
// plus the file's config must equal the model's (cmha_init aside).
void load_safetensors(Model& model, const std::string& path);

// A model built from a checkpoint's own config, with its weights.
std::shared_ptr<Model> load_model(const std::string& path);

// Writes a checkpoint of the spec's layout (crash-safe).
void save_safetensors(const Model& model, const std::string& path);

// --- Evaluation (evaluate.cpp) ---------------------------------------------

// W = floor((T - 1) / L), capped at max_windows when max_windows > 0.
int64_t eval_windows(int64_t n_tokens, int64_t seq_len, int64_t max_windows);

// The spec's evaluation: window w has inputs t[wL .. wL+L-1] and targets
// t[wL+1 .. wL+L], each starting at position 0; returns the mean over W * L
// predictions of -log softmax(logits)[target] (the tail is dropped). Windows
// run `batch` at a time, without gradients. phasor::Error when W = 0.
double evaluate(Model& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t max_windows = 0,
                int64_t batch = 8);

}  // namespace phasor::torch_ref
