#pragma once
// The causal language model of docs/spec.md ("The network"), every
// `position` variant through its scheme (models/positions.h), with a KV cache
// for generation.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/positions.h"
#include "nn/layers.h"

namespace phasor {

// Keys (already rotated) and values of one layer: positions 0..length-1 of
// KVCache are filled, the rest is room to grow.
struct LayerCache {
  Tensor keys, values;  // [B, capacity, H, query_key_width] and [B, capacity, H, d]
  Tensor position_state{};  // the scheme's running state (RotationArgs::state); undefined until its first chunk
};
// The cache grows as it fills (CausalLM::forward calls reserve), so its memory
// follows the positions actually stored, not the length a request might reach.
struct KVCache {
  std::vector<LayerCache> layers;
  int64_t length = 0;        // positions already stored
  int64_t capacity = 0;      // positions allocated
  int64_t max_length = 0;    // the most positions it may hold: the request it was made for
  int64_t origin = 0;        // where the scheme measures positions from (PositionScheme::origin(max_length)), fixed for the cache's life
  // Makes room for `positions` positions: the capacity at least doubles (to at
  // least `positions`, at most max_length), the stored positions are copied.
  // A request past max_length is an error.
  void reserve(int64_t positions);
};

// What one forward pass of an Attention leaves for a study of its gradients or
// attention (models/probe.h): set Attention::probe and the next forward fills
// it. With grad mode on, the query/key tensors also keep their .grad.
struct AttentionProbe {
  Tensor q, k;                    // complex [B, N, H, P] views of the projections, before the rotation (rotary variants; pope: real [B, N, H, d])
  Tensor q_rotated, k_rotated;    // complex [B, N, H, P], after it (pope: [B, N, H, d])
  Tensor q_r, q_phi, k_r, k_phi;  // real [B, N, H, P]: the Euler transform (complexformer, RotationImpl::Composed only)
  Tensor probs;                   // attention probabilities [B, H, N, keys], when keep_probs
  bool keep_probs = false;        // computed beside the forward pass, without gradients
};

// How the ComplexFormer rotation is computed: the fused op (default) or the
// composition of autograd ops (the readable reference; same numbers).
enum class RotationImpl { Fused, Composed };
// How attention is computed: the fused causal attention op (default; O(N d)
// memory, ops::causal_attention) or the materialised N x N scores and
// probabilities (the readable reference, and what a probe needs).
enum class AttentionImpl { Fused, Materialized };

class Attention : public nn::Module {
 public:
  // `scheme` is the model's (shared by its layers, with its table cache); null: one of its own.
  Attention(const ModelConfig& config, Generator* gen, std::shared_ptr<const PositionScheme> scheme = nullptr);
  // x [B, N, D] at positions offset..offset+N-1; with a cache, keys/values are
  // appended to it and attention covers everything stored so far. `origin`:
  // the scheme's (PositionScheme::origin; where xpos measures its scales from).
  Tensor forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t origin = 0) const;
  // Pre-softmax scores [B, H, N, N] of a full sequence (for tests and attention maps).
  Tensor scores(const Tensor& x, int64_t offset) const;

  std::shared_ptr<nn::Linear> wq, wk, wv, wo;
  // The scheme's own parameters of this layer, in its layer_parameters() order.
  const std::vector<Tensor>& position_parameters() const { return position_parameters_; }
  // One of them by its name ("delta"); throws phasor::Error where the scheme has none of that name.
  const Tensor& position_parameter(std::string_view name) const;
  const PositionScheme& positions() const { return *scheme_; }
  // Replaces the scheme (CausalLM::set_position_scaling: the same variant, other frequencies).
  void set_positions(std::shared_ptr<const PositionScheme> scheme) { scheme_ = std::move(scheme); }
  RotationImpl rotation = RotationImpl::Fused;
  AttentionImpl attention = AttentionImpl::Fused;  // a probe changes no number: its probabilities are computed beside
  std::shared_ptr<AttentionProbe> probe;  // null: nothing is kept (the default)

  // Queries and keys after the variant's rotation, as real [B, N, H, w]
  // tensors (w: the query/key width); `state`: a KV cache's running state of
  // the scheme, or null. Public for the side-by-side benchmark of this step
  // alone (bench/compare_phasor.cpp, workload qk).
  std::pair<Tensor, Tensor> rotated_qk(const Tensor& x, int64_t offset, int64_t origin, Tensor* state) const;

 private:

  ModelConfig config_;
  std::shared_ptr<const PositionScheme> scheme_;
  std::vector<Tensor> position_parameters_;  // the scheme's layer parameters, in its order
};

class Block : public nn::Module {
 public:
  Block(const ModelConfig& config, Generator* gen, std::shared_ptr<const PositionScheme> scheme = nullptr);
  Tensor forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t origin = 0) const;
  std::shared_ptr<nn::RMSNorm> attn_norm, ffn_norm;
  std::shared_ptr<Attention> attn;
  std::shared_ptr<nn::SwiGLU> ffn;
};

class CausalLM : public nn::Module {
 public:
  // Weights initialised from `seed` (normal std 0.02, residual projections scaled
  // by 1/sqrt(2 n_layers), CMHA parameters by config.cmha_init).
  explicit CausalLM(const ModelConfig& config, uint64_t seed = 0);

  // tokens int64 [B, N] -> logits [B, N, V]. With a cache, positions continue from cache->length.
  // Tokens on the model's GPU are not read back: their kernel checks them (forward's comment).
  Tensor forward(const Tensor& tokens, KVCache* cache = nullptr) const;
  // Mean cross-entropy of next-token predictions.
  Tensor loss(const Tensor& tokens, const Tensor& targets) const;

  // A cache for up to max_length positions (refused beyond a 'learned' model's
  // max_seq_len). It starts small and grows as forward() fills it.
  KVCache make_cache(int64_t batch, int64_t max_length) const;
  // Moves the model to `device` (parameters in place; see nn::Module::to). Tokens
  // may still be given on the CPU: forward() copies them over.
  void to(Device device);
  Device device() const;
  void set_rotation(RotationImpl impl);
  void set_attention(AttentionImpl impl);
  const ModelConfig& config() const { return config_; }
  const PositionScheme& positions() const { return *scheme_; }
  // Context extension or the angle warm-up (models/rotary_scaling.h) from now
  // on, for every layer; phasor::Error (nothing changed) where this variant
  // cannot take it. The parameters are untouched.
  void set_position_scaling(const PositionScaling& scaling);
  const PositionScaling& position_scaling() const { return scheme_->scaling(); }
  std::vector<std::shared_ptr<Block>> layers;

  // Parameter groups for AdamW: 2-d weights decay, norms do not, and a position
  // scheme's own parameters as it declares (PositionParameter::decays).
  std::vector<std::pair<std::string, Tensor>> decayed_parameters() const;
  std::vector<std::pair<std::string, Tensor>> undecayed_parameters() const;

 private:
  // Host tokens checked against the vocabulary, then on the model's device.
  Tensor checked_upload(const Tensor& tokens) const;

  ModelConfig config_;
  std::shared_ptr<const PositionScheme> scheme_;  // one for every layer
  std::shared_ptr<nn::Embedding> tok_emb_;
  std::vector<Tensor> position_parameters_;  // the scheme's model parameters (pos_emb.weight), in its order
  std::map<std::string, PositionParameter> scheme_parameters_;  // every parameter a scheme added, by its full name
  bool decays(const std::string& name, const Tensor& p) const;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<nn::Linear> lm_head_;
};

// The parameters of a CausalLM of `config`, by name, with their shapes: the
// table of docs/spec.md, "Checkpoint layout". Computed from the config alone,
// nothing allocated, so a model file can be checked against its config before
// a model of that size is built. `config` must be valid.
std::map<std::string, Dims> parameter_shapes(const ModelConfig& config);
// The number of parameters of that model (the sum over parameter_shapes), by
// the spec's formula ("Parameter count", ModelConfig::parameter_count), in
// constant time. `config` must be valid.
int64_t parameter_count(const ModelConfig& config);

}  // namespace phasor
