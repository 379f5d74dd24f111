// Built against the installed package: the library (a complex gradient) and
// the application layer (a small model's greedy continuation).
#include <cstdio>
#include <string>

#include "app/evaluate.h"
#include "phasor.h"

int main() {
  using namespace phasor;
  int failures = 0;
  if (std::string(PHASOR_VERSION) != EXPECTED_VERSION) {
    std::printf("consumer: the headers say version %s, the package %s\n", PHASOR_VERSION, EXPECTED_VERSION);
    ++failures;
  }
  // |z|^2 at 3 + 4i: the gradient is 2z = 6 + 8i (dL/dx + i dL/dy).
  Tensor z = from_vector<c128>({{3.0, 4.0}}).requires_grad_();
  sum(square(abs(z))).backward();
  const c128 g = z.grad().to_vector<c128>()[0];
  if (std::abs(g - c128(6.0, 8.0)) > 1e-12) {
    std::printf("consumer: gradient %g%+gi, expected 6+8i\n", g.real(), g.imag());
    ++failures;
  }
  ModelConfig config;
  config.d_model = 16, config.n_layers = 1, config.n_heads = 2, config.d_ff = 32;
  const CausalLM model(config, 1);
  SampleOptions greedy;
  greedy.tokens = 5, greedy.temperature = 0;
  const std::vector<int64_t> out = generate(model, {72, 105}, greedy);
  if (out.size() != 5) ++failures;
  std::printf("consumer: Phasor %s, gradient %g%+gi, %zu tokens generated: %s\n", PHASOR_VERSION, g.real(), g.imag(), out.size(),
              failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
