// The spec's evaluation windows: non-overlapping, each starting at position 0,
// the tail that does not fill a window dropped.
#include <algorithm>

#include "bench/libtorch/reference_model.h"
#include "tensor/error.h"

namespace phasor::torch_ref {

int64_t eval_windows(int64_t n_tokens, int64_t seq_len, int64_t max_windows) {
  PHASOR_CHECK(seq_len > 0, "evaluate: seq_len must be positive, got ", seq_len);
  const int64_t w = n_tokens > 0 ? (n_tokens - 1) / seq_len : 0;
  return max_windows > 0 ? std::min(w, max_windows) : w;
}

double evaluate(Model& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t max_windows, int64_t batch) {
  const int64_t T = static_cast<int64_t>(tokens.size()), L = seq_len;
  const int64_t W = eval_windows(T, L, max_windows);
  PHASOR_CHECK(W > 0, "evaluate: ", T, " tokens do not fill one window of ", L, " predictions (need ", L + 1, ")");
  PHASOR_CHECK(batch > 0, "evaluate: batch must be positive, got ", batch);

  torch::NoGradGuard no_grad;
  const auto text = torch::tensor(tokens, torch::kLong).to(model.device());
  const int64_t V = model.config().vocab_size;
  double total = 0.0;
  for (int64_t w0 = 0; w0 < W; w0 += batch) {
    const int64_t nb = std::min(batch, W - w0);
    // Consecutive windows are consecutive slices of the text: inputs and
    // targets are the same span shifted by one.
    auto inputs = text.narrow(0, w0 * L, nb * L).view({nb, L});
    auto targets = text.narrow(0, w0 * L + 1, nb * L).view({nb, L});
    auto nll = torch::nn::functional::cross_entropy(
        model.forward(inputs).reshape({-1, V}), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    total += nll.to(torch::kFloat64).sum().item<double>();
  }
  return total / static_cast<double>(W * L);
}

}  // namespace phasor::torch_ref
