#pragma once
// Attention maps: the attention probabilities of one head of one layer for a
// token sequence, and an SVG heat map of them (`phasor attention`).
#include <cstdint>
#include <string>
#include <vector>

#include "models/transformer.h"

namespace phasor {

// a(m, n) [N, N] float64 on the CPU: the probabilities the model's own forward
// pass uses (the variant's exact scores, 1/sqrt(d), ALiBi, causal softmax), so
// row m sums to 1 over n <= m and is 0 for n > m. phasor::Error (one line) for
// an empty sequence, a layer or head out of range, or a sequence longer than
// kMaxAttentionTokens. Only the chosen layer keeps its probabilities.
Tensor attention_map(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t layer, int64_t head);
constexpr int64_t kMaxAttentionTokens = 4096;  // the layer's [heads, N, N] probabilities: 256 MiB at 4 heads

// The map as a heat map: one cell for every non-zero a(m, n) (queries down,
// keys across), shaded white (0) to dark blue (1), each with a tooltip, and
// the byte tokens (or, where they do not fit, positions) as axis labels.
// Beyond kMaxDrawnCells cells a side, each cell is a b x b block of positions
// drawn with the mean probability of its attendable pairs (b the smallest that fits).
constexpr int64_t kMaxDrawnCells = 512;
std::string attention_map_svg(const Tensor& map, const std::vector<int64_t>& tokens, const std::string& title);

// How a byte token is written as an axis label: printable ASCII as itself,
// space as "␣", newline "↵", tab "⇥", any other byte as \xNN.
std::string token_label(int64_t token);

}  // namespace phasor
