// Built against the Phasor package with the components run.sh asks for: the
// library alone (a complex gradient; device cuda must be absent), with the
// CUDA backend (the gradient on device cuda), with the application layer (a
// small model's greedy continuation) and with the MPI transports (which
// distributed training knows only where they are linked).
#include <cstdio>
#include <string>

#ifdef CONSUMER_APP
#include "app/distributed.h"
#include "app/evaluate.h"
#endif
#include "phasor.h"

namespace {

using namespace phasor;

// |z|^2 at 3 + 4i on `device`: the gradient is 2z = 6 + 8i (dL/dx + i dL/dy).
int check_gradient(Device device) {
  Tensor z = from_vector<c128>({{3.0, 4.0}}).to(device).requires_grad_();
  sum(square(abs(z))).backward();
  const c128 g = z.grad().to(kCPU).to_vector<c128>()[0];
  std::printf("consumer: gradient on %s: %g%+gi\n", device.is_cpu() ? "cpu" : "cuda", g.real(), g.imag());
  return std::abs(g - c128(6.0, 8.0)) > 1e-12 ? 1 : 0;
}

}  // namespace

int main() {
  int failures = 0;
  if (std::string(PHASOR_VERSION) != EXPECTED_VERSION) {
    std::printf("consumer: the headers say version %s, the package %s\n", PHASOR_VERSION, EXPECTED_VERSION);
    ++failures;
  }
  failures += check_gradient(kCPU);
#ifdef CONSUMER_CUDA
  failures += check_gradient(cuda());
#else
  // Without Phasor::cuda the backend is not linked: device cuda is refused.
  try {
    (void)from_vector<c128>({{1.0, 0.0}}).to(cuda());
    std::printf("consumer: device cuda exists without Phasor::cuda\n");
    ++failures;
  } catch (const Error&) {
  }
#endif
#ifdef CONSUMER_APP
  ModelConfig config;
  config.d_model = 16, config.n_layers = 1, config.n_heads = 2, config.d_ff = 32;
  const CausalLM model(config, 1);
  SampleOptions greedy;
  greedy.tokens = 5, greedy.temperature = 0;
  const std::vector<int64_t> out = generate(model, {72, 105}, greedy);
  if (out.size() != 5) ++failures;
  std::printf("consumer: %zu tokens generated\n", out.size());
  std::string transports;
  for (const std::string& t : built_transports()) transports += " " + t;
#ifdef CONSUMER_MPI
  const bool expected = transports.find(" mpi") != std::string::npos;
#else
  const bool expected = transports == " single";
#endif
  std::printf("consumer: distributed transports:%s\n", transports.c_str());
  if (!expected) ++failures;
#endif
  std::printf("consumer: Phasor %s: %s\n", PHASOR_VERSION, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
