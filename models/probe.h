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
  // keep_probs: each layer's attention probabilities too (an attention map).
  explicit ProbeScope(const CausalLM& model, bool keep_probs = false) : model_(model) {
    for (const auto& layer : model_.layers) {
      layer->attn->probe = std::make_shared<AttentionProbe>();
      layer->attn->probe->keep_probs = keep_probs;
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
