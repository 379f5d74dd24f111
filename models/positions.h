#pragma once
// Position schemes: one small type per row of the variant table
// (models/config.h, kPositionVariants), holding everything a variant does to
// the model: its rotation of queries and keys, its bias on the scores, what it
// adds to the token embeddings, its parameters and their shapes, its position
// limit. models/transformer.cpp asks the scheme and never which variant it is.
// Includes models/config.h and the tensor/autograd front-ends, nothing of nn/.
//
// Adding a rotary variant that needs no new kernel: its row in config.h, its
// type and its line of the factory in positions.cpp, its LibTorch twin
// (bench/libtorch/layers.cpp) and its test (docs/design.md, "Position schemes").
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/config.h"
#include "models/rotary_scaling.h"
#include "tensor/tensor.h"

namespace phasor {

// A parameter a scheme adds, with its shape (the checkpoint layout of
// docs/spec.md) and how training treats it ("Initialisation and weight decay").
struct PositionParameter {
  std::string name;
  Dims shape;
  // AdamW decays it: the 2-d projections a scheme adds do; angles, phase
  // offsets, gates and bias tables do not.
  bool decays = false;
  // Drawn again from Normal(0, 0.02), in registration order, with the model's
  // other 2-d weights (GPT-2's initialisation, models/transformer.cpp) instead
  // of keeping the scheme's initial value.
  bool drawn_as_weight = false;
};

// One value per head of a layer, logged under `key` by `train --log-heads`
// and drawn by `plot --heads` ("delta_mean": the mean over pairs of delta).
struct HeadStatistic {
  std::string key;
  std::vector<double> per_head;
};

// What a scheme's rotation reads from the attention layer it runs in.
struct RotationArgs {
  int64_t offset = 0;  // the position of the first row
  int64_t origin = 0;  // where xpos measures its scales from (PositionScheme::origin)
  const std::vector<Tensor>* parameters = nullptr;  // the layer's own, in layer_parameters() order
  bool composed = false;  // the readable composition of autograd ops, where the scheme has one (RotationImpl::Composed)
  const Tensor* input = nullptr;  // the layer's normalised input x [B, N, D], which q, k and v read (carope's frequencies read it too)
  // A KV cache's running state of the scheme (carope: the phases summed over
  // the positions before `offset`), read and replaced by each chunk; null without a cache.
  Tensor* state = nullptr;
  // The Euler transform's intermediates (complexformer, composed), each kept when not null.
  Tensor *q_r = nullptr, *q_phi = nullptr, *k_r = nullptr, *k_phi = nullptr;
};

class PositionScheme {
 public:
  // `scaling`: context extension or the angle warm-up (models/rotary_scaling.h), already validated for this variant.
  explicit PositionScheme(const ModelConfig& config, const PositionScaling& scaling = {}) : config_(config), scaling_(scaling) {}
  virtual ~PositionScheme() = default;
  PositionScheme(const PositionScheme&) = delete;
  PositionScheme& operator=(const PositionScheme&) = delete;

  const ModelConfig& config() const { return config_; }
  const PositionVariant& variant() const { return config_.variant(); }
  std::string_view name() const { return variant().name; }
  const PositionScaling& scaling() const { return scaling_; }
  // The factor on the attention logits, after the 1/sqrt(d) scale: YaRN's, else 1.
  double logit_factor() const { return phasor::logit_factor(scaling_); }

  // ---- parameters
  // Each attention layer's own ("delta", ...), in registration order.
  virtual std::vector<PositionParameter> layer_parameters() const { return {}; }
  // Their initial values, in that order, drawing from `gen` as the spec's initialisation does.
  virtual std::vector<Tensor> initial_layer_parameters(Generator* gen) const;
  // The model's own, registered before the first layer ("pos_emb.weight"), and their initial values.
  virtual std::vector<PositionParameter> model_parameters() const { return {}; }
  virtual std::vector<Tensor> initial_model_parameters(Generator* gen) const;
  // A layer's statistics per head, from its parameters (in layer_parameters()
  // order); empty where the scheme has nothing per head to show.
  virtual std::vector<HeadStatistic> head_statistics(const std::vector<Tensor>& /*layer*/) const { return {}; }
  // d theta / d phi of the Euler transform, where the rotation's phase weighs
  // each pair's own phase (complexformer's delta [H, P]); undefined otherwise.
  // The gradient studies (app/gradient.h) read the gradients reaching r and phi through it.
  virtual Tensor phase_weight(const std::vector<Tensor>& /*layer*/) const { return Tensor(); }
  // Whether phase_weight() is defined: the scheme turns q and k by an Euler transform.
  virtual bool has_euler_transform() const { return false; }
  // How many numbers all of them hold in a model of config().n_layers layers. In
  // double so a hostile config cannot overflow it (exact below 2^53).
  double parameter_count() const;

  // ---- positions
  // The most positions one forward may cover (docs/spec.md, "Positions far out").
  int64_t max_positions() const;
  // Throws phasor::Error "<what> <positions> exceeds ..." past max_positions().
  void check_fit(int64_t positions, std::string_view what) const;
  // The origin of a window of `positions` positions (0 for every variant but xpos).
  virtual int64_t origin(int64_t /*positions*/) const { return 0; }

  // ---- the forward
  // Queries and keys after the variant's rotation (unchanged where it has none):
  // for the pair-rotary variants (variant().rotary) q and k are complex
  // [B, N, H, P] views of the projections and so is the result; for the
  // variants whose components each become complex (variant().complex_components:
  // pope) q and k are the real projections [B, N, H, d] and the result is
  // complex [B, N, H, d], read by the scores as 2d reals.
  virtual std::pair<Tensor, Tensor> rotate(const Tensor& q, const Tensor& k, const RotationArgs& args) const;
  // ALiBi's slopes [H] on `device`; undefined where the scores take no bias.
  virtual Tensor slopes(Device /*device*/) const { return Tensor(); }
  // A bias per head and distance [H, R + 1] added to the scores (distance
  // m - n reads bin min(m - n, R)), from the layer's parameters, with
  // gradients; undefined where the scores take none (complexformer-seed's
  // sigmoid(beta_h) rel_bias).
  virtual Tensor distance_bias(const std::vector<Tensor>& /*layer*/) const { return Tensor(); }
  // Added to the token embeddings x [B, N, D] at positions offset..offset+N-1;
  // `model` holds the model's own parameters, in model_parameters() order.
  virtual Tensor embed(const Tensor& x, int64_t /*offset*/, const std::vector<Tensor>& /*model*/) const { return x; }

  // How many constant tables the scheme holds now (at most kMaxTables).
  size_t cached_tables() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return tables_.size();
  }
  static constexpr size_t kMaxTables = 16;

 protected:
  // The `count` rotary frequencies of config().rope_base as scaling() changes
  // them (scaled_frequencies, models/rotary_scaling.h).
  std::vector<double> frequencies(int64_t count) const { return scaled_frequencies(config_.rope_base, count, scaling_); }

  // A scheme's own limit, checked before the kMaxPositions every variant
  // keeps, and what the refusal says of it ("max_seq_len 64 of this 'learned'
  // position model"). None by default.
  virtual int64_t own_limit() const { return std::numeric_limits<int64_t>::max(); }
  virtual std::string own_limit_reason() const { return {}; }

  // Constant tables (rotations, slopes, sinusoids) are built once per key and
  // device and shared by every layer and forward: a bounded cache, locked (a
  // model may be shared by threads that run forwards one at a time each).
  struct TableKey {
    int kind = 0;  // which table of the scheme
    int64_t rows = 0, offset = 0, origin = 0;
    Device device;
    DType dtype = DType::Float32;
    bool operator==(const TableKey&) const = default;
  };
  template <class Build>
  Tensor cached(const TableKey& key, Build&& build) const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [k, table] : tables_)
        if (k == key) return table;
    }
    Tensor table = build();  // outside the lock: two threads may build one table, both get equal values
    std::lock_guard<std::mutex> lock(mutex_);
    if (tables_.size() == kMaxTables) tables_.pop_front();  // the oldest: a training run's few keys stay in use
    tables_.emplace_back(key, table);
    return table;
  }

 private:
  ModelConfig config_;
  PositionScaling scaling_;
  mutable std::mutex mutex_;
  mutable std::deque<std::pair<TableKey, Tensor>> tables_;
};

// The scheme of config.position (config valid), with `scaling` (refused with a
// one-line phasor::Error where the variant cannot take it: PositionScaling::validate).
std::shared_ptr<const PositionScheme> make_position_scheme(const ModelConfig& config, const PositionScaling& scaling = {});

// XPos scales a query by zeta_j^((m - o)/S) and a key by zeta_j^(-(n - o)/S);
// the scores depend on m - n only, so the origin o is free. The scales stay
// within e^+-82 (float32 ends at e^88.7, and the products with q and k need
// headroom) while |m - o| <= xpos_max_distance. Positions 0..N-1 measure from
// o = 0 when that fits, else from the middle, o = N / 2: so N up to
// 2 xpos_max_distance + 1 positions (67,027 for S = 512).
int64_t xpos_max_distance(double scale_base);
int64_t xpos_max_positions(double scale_base);
int64_t xpos_origin(double scale_base, int64_t positions);

// ALiBi slopes of the spec (including the rule for head counts that are not powers of two).
std::vector<double> alibi_slopes(int64_t n_heads);
// Sinusoidal position encodings PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...), rows offset..offset+n-1.
Tensor sinusoidal_positions(int64_t n, int64_t d_model, int64_t offset);

}  // namespace phasor
