#pragma once
// Attaches a fresh AttentionProbe (models/transformer.h) to every layer of a
// model for the life of the scope, and detaches them at its end, so a study
// never leaves a model holding tensors (or retaining gradients) afterwards.
#include <memory>
#include <vector>

#include "models/transformer.h"

namespace phasor {

class ProbeScope {
 public:
  // probs_layer >= 0: that layer also keeps its attention probabilities (an attention map).
  explicit ProbeScope(const CausalLM& model, int64_t probs_layer = -1) : model_(model) {
    for (size_t l = 0; l < model_.layers.size(); ++l) {
      model_.layers[l]->attn->probe = std::make_shared<AttentionProbe>();
      model_.layers[l]->attn->probe->keep_probs = static_cast<int64_t>(l) == probs_layer;
    }
  }
  ~ProbeScope() {
    for (const auto& layer : model_.layers) layer->attn->probe.reset();
  }
  ProbeScope(const ProbeScope&) = delete;
  ProbeScope& operator=(const ProbeScope&) = delete;

  // What the latest forward left in layer l.
  const AttentionProbe& layer(size_t l) const { return *model_.layers.at(l)->attn->probe; }

 private:
  const CausalLM& model_;
};

}  // namespace phasor
