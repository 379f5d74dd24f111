// A complex-valued network that is not ComplexFormer: a learned complex FIR
// filter, y[n] = sum_k h[k] x[n-k], fitted by Adam to a signal passed through
// an unknown filter, with the taps h as complex parameters. Adam treats the
// real and imaginary parts of each tap as separate scalars (as PyTorch does),
// so no conjugate or special case appears anywhere below.
//
// It prints the loss as it falls and the fitted taps, checks them, and exits 1
// on a mismatch. ctest runs it (example_complex_filter); alone:
//   build/examples/complex_filter
#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "nn/optim.h"
#include "phasor.h"

using namespace phasor;

int main() {
  constexpr int64_t kTaps = 4, kSamples = 256;
  const std::vector<c128> h_true = {{0.8, -0.3}, {-0.2, 0.5}, {0.1, 0.1}, {0.0, -0.25}};

  // The signal and the data matrix X[n, k] = x[n - k] (zero before the start),
  // so the filter is one complex matrix product: y = X h.
  Generator gen(3);
  const std::vector<c128> x = randn({kSamples}, DType::Complex128, &gen).to_vector<c128>();
  std::vector<c128> rows(kSamples * kTaps);
  for (int64_t n = 0; n < kSamples; ++n)
    for (int64_t k = 0; k < kTaps && k <= n; ++k) rows[n * kTaps + k] = x[n - k];
  const Tensor X = from_vector(rows, {kSamples, kTaps});
  const Tensor noise = randn({kSamples, 1}, DType::Complex128, &gen) * 1e-3;
  const Tensor y = matmul(X, from_vector(h_true, {kTaps, 1})) + noise;

  // The parameters: complex taps, from zero; Adam without weight decay.
  Tensor h = zeros({kTaps, 1}, DType::Complex128).requires_grad_();
  nn::AdamW adam({nn::ParamGroup{{{"h", h}}, /*weight_decay=*/0.0}}, nn::AdamWOptions{.lr = 0.05});
  double first = 0, last = 0;
  for (int step = 0; step <= 300; ++step) {
    adam.zero_grad();
    const Tensor loss = mean(square(abs(matmul(X, h) - y)));  // a real loss of complex values
    loss.backward();
    adam.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 50 == 0) std::printf("step %3d: loss %.3e\n", step, last);
  }

  int mismatches = 0;
  const std::vector<c128> fitted = h.to_vector<c128>();
  for (int64_t k = 0; k < kTaps; ++k) {
    std::printf("h[%ld] = % .4f %+.4fi   (true % .2f %+.2fi)\n", static_cast<long>(k), fitted[k].real(), fitted[k].imag(),
                h_true[k].real(), h_true[k].imag());
    if (std::abs(fitted[k] - h_true[k]) > 1e-2) ++mismatches;
  }
  // The noise floor is 1e-6 (|noise|^2): the loss must fall from about 1 to near it.
  if (!(last < 1e-4 * first)) ++mismatches;
  if (mismatches > 0) std::printf("MISMATCH: the loss fell from %.3e to %.3e, or a tap is off by more than 1e-2\n", first, last);
  return mismatches == 0 ? 0 : 1;
}
