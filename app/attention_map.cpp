#include "app/attention_map.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "app/svg.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "models/probe.h"

namespace phasor {

Tensor attention_map(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t layer, int64_t head) {
  const ModelConfig& c = model.config();
  const auto n = static_cast<int64_t>(tokens.size());
  PHASOR_CHECK(n > 0, "attention: --text is empty (give at least one token)");
  PHASOR_CHECK(n <= kMaxAttentionTokens, "attention: --text has ", n, " tokens, more than the limit of ", kMaxAttentionTokens,
               " (the layer's probabilities are N^2 per head)");
  PHASOR_CHECK(layer >= 0 && layer < c.n_layers, "attention: --layer ", layer, " is out of range: the model has ", c.n_layers,
               " layer(s), 0..", c.n_layers - 1);
  PHASOR_CHECK(head >= 0 && head < c.n_heads, "attention: --head ", head, " is out of range: the model has ", c.n_heads,
               " head(s) per layer, 0..", c.n_heads - 1);
  NoGradGuard no_grad;
  const ProbeScope probes(model, /*probs_layer=*/layer);  // the forward pass keeps this layer's probabilities
  model.forward(from_vector(tokens, {1, n}));
  const Tensor probs = probes.layer(static_cast<size_t>(layer)).probs;  // [1, H, N, N]
  return ops::to(ops::contiguous(to_cpu(ops::select(ops::select(probs, 0, 0), 0, head))), DType::Float64);
}

std::string token_label(int64_t token) {
  if (token == ' ') return "\u2423";
  if (token == '\n') return "\u21b5";
  if (token == '\t') return "\u21e5";
  if (token > ' ' && token < 0x7f) return std::string(1, static_cast<char>(token));
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(token & 0xff));
  return hex;
}

namespace {

// White at 0 to dark blue (#08306b) at 1.
std::string shade(double p) {
  const double t = std::clamp(p, 0.0, 1.0);
  const auto mix = [t](int to) { return static_cast<int>(std::lround(255.0 + (to - 255.0) * t)); };
  char colour[8];
  std::snprintf(colour, sizeof colour, "#%02x%02x%02x", mix(0x08), mix(0x30), mix(0x6b));
  return colour;
}

// The map in b x b blocks of positions (b = 1 up to kMaxDrawnCells positions),
// each the mean of its attendable (non-zero) pairs, 0 where it has none.
struct Blocks {
  int64_t size = 1, count = 0;
  std::vector<double> mean;  // [count, count]
};
Blocks pool(const std::vector<double>& a, int64_t n) {
  Blocks r;
  r.size = (n + kMaxDrawnCells - 1) / kMaxDrawnCells;
  r.count = (n + r.size - 1) / r.size;
  if (r.size == 1) {
    r.mean = a;
    return r;
  }
  std::vector<double> sum(static_cast<size_t>(r.count * r.count), 0.0), cells(sum.size(), 0.0);
  for (int64_t m = 0; m < n; ++m)
    for (int64_t k = 0; k < n; ++k)
      if (const double p = a[static_cast<size_t>(m * n + k)]; p > 0) {
        const auto at = static_cast<size_t>((m / r.size) * r.count + k / r.size);
        sum[at] += p;
        cells[at] += 1;
      }
  r.mean.resize(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) r.mean[i] = cells[i] > 0 ? sum[i] / cells[i] : 0.0;
  return r;
}

}  // namespace

std::string attention_map_svg(const Tensor& map, const std::vector<int64_t>& tokens, const std::string& title) {
  const auto positions = static_cast<int64_t>(tokens.size());
  PHASOR_CHECK(map.dim() == 2 && map.size(0) == positions && map.size(1) == positions, "attention_map_svg: map of shape ", map.shape(),
               " does not match ", positions, " tokens");
  const Blocks blocks = pool(map.to_vector<double>(), positions);
  const std::vector<double>& a = blocks.mean;
  const int64_t n = blocks.count, b = blocks.size;
  const double cell = std::clamp(640.0 / static_cast<double>(n), 3.0, 28.0);
  // Every character labels its row and column where each fits (9 px); else the
  // axes show positions, at a round step wide enough for their digits.
  const bool characters = b == 1 && cell >= 9.0;
  int64_t step = 1;
  for (const int64_t s : {1, 2, 5, 10, 20, 50, 100, 200, 500})  // in cells, labelled with the first position of each
    if ((step = s) * cell >= 7.0 * static_cast<double>(std::to_string(positions - 1).size()) + 6.0) break;
  const double font = std::min(13.0, std::max(8.0, cell * 0.7));
  const double left = 70, top = 90, side = cell * static_cast<double>(n);
  const double width = left + side + 140, height = top + side + 40;

  std::ostringstream out;
  out << svg::begin_document(width, height) << "<text x=\"" << svg::fixed(left + side / 2) << "\" y=\"28\" text-anchor=\"middle\" "
      << "font-size=\"17\" font-weight=\"bold\">" << svg::escape(title) << "</text>\n"
      << "<text x=\"" << svg::fixed(left + side / 2) << "\" y=\"52\" text-anchor=\"middle\">key" << (characters ? "" : " position")
      << " (attended to)" << (b > 1 ? "; each cell " + std::to_string(b) + " x " + std::to_string(b) + " positions, their mean" : "")
      << "</text>\n"
      << "<text x=\"20\" y=\"" << svg::fixed(top + side / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
      << svg::fixed(top + side / 2) << ")\">query" << (characters ? "" : " position") << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << svg::fixed(side) << "\" height=\"" << svg::fixed(side)
      << "\" fill=\"#f4f4f4\" stroke=\"#333\"/>\n";
  // Only the cells a query can attend to (non-zero probability) are drawn.
  for (int64_t m = 0; m < n; ++m)
    for (int64_t k = 0; k < n; ++k) {
      const double p = a[static_cast<size_t>(m * n + k)];
      if (!(p > 0)) continue;
      out << "<rect class=\"cell\" x=\"" << svg::fixed(left + cell * static_cast<double>(k), 2) << "\" y=\""
          << svg::fixed(top + cell * static_cast<double>(m), 2) << "\" width=\"" << svg::fixed(cell, 2) << "\" height=\""
          << svg::fixed(cell, 2) << "\" fill=\"" << shade(p) << "\"><title>";
      if (b == 1)
        out << "query " << m << " '" << svg::escape(token_label(tokens[m])) << "' to key " << k << " '" << svg::escape(token_label(tokens[k]))
            << "': " << svg::fixed(p, 4);
      else
        out << "queries " << m * b << "-" << std::min(positions, (m + 1) * b) - 1 << " to keys " << k * b << "-"
            << std::min(positions, (k + 1) * b) - 1 << ": mean " << svg::fixed(p, 4);
      out << "</title></rect>\n";
    }
  out << "<g font-family=\"monospace\" font-size=\"" << svg::fixed(font) << "\" fill=\"#333\">\n";
  for (int64_t i = 0; i < n; i += characters ? 1 : step) {
    const std::string label = characters ? svg::escape(token_label(tokens[i])) : std::to_string(i * b);
    const char* kind = characters ? "label" : "position";
    const double middle = cell * (static_cast<double>(i) + 0.5);
    out << "<text class=\"key-" << kind << "\" x=\"" << svg::fixed(left + middle) << "\" y=\"" << top - 6 << "\" text-anchor=\"middle\">"
        << label << "</text>\n"
        << "<text class=\"query-" << kind << "\" x=\"" << left - 6 << "\" y=\"" << svg::fixed(top + middle + font / 3)
        << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
  out << "</g>\n";
  // Colour bar: probability 0 (bottom) to 1 (top).
  const double bar_x = left + side + 40, bar_h = std::min(side, 200.0), steps = 20;
  for (int i = 0; i < steps; ++i)
    out << "<rect x=\"" << svg::fixed(bar_x) << "\" y=\"" << svg::fixed(top + bar_h * (1 - (i + 1) / steps)) << "\" width=\"16\" height=\""
        << svg::fixed(bar_h / steps + 0.5) << "\" fill=\"" << shade((i + 0.5) / steps) << "\"/>\n";
  out << "<rect x=\"" << svg::fixed(bar_x) << "\" y=\"" << top << "\" width=\"16\" height=\"" << svg::fixed(bar_h)
      << "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double v : {0.0, 0.5, 1.0})
    out << "<text x=\"" << svg::fixed(bar_x + 22) << "\" y=\"" << svg::fixed(top + bar_h * (1 - v) + 4) << "\">" << svg::fixed(v, 1)
        << "</text>\n";
  const double label_x = bar_x + 62, label_y = top + bar_h / 2;
  out << "<text class=\"bar-label\" x=\"" << svg::fixed(label_x) << "\" y=\"" << svg::fixed(label_y) << "\" text-anchor=\"middle\" transform=\"rotate(-90 "
      << svg::fixed(label_x) << " " << svg::fixed(label_y) << ")\">attention probability</text>\n";
  out << "</svg>\n";
  return out.str();
}

}  // namespace phasor
