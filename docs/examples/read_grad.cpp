// Reading a `phasor grad` file: the gradient of one evaluation window's loss
// with respect to every parameter, as F32 safetensors under the checkpoint's
// names, with the window, seq_len and loss in its metadata
// (docs/complex-gradients.md). It prints what the file holds and checks it
// against the gradient the library computes for the same window.
//   phasor grad --checkpoint M --data TEXT --seq-len L --window W --out G.safetensors
//   build/examples/read_grad G.safetensors M TEXT
// ctest runs both (example_read_grad, on the model example_train_sample trains).
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "app/gradient.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/checkpoint.h"
#include "phasor.h"
#include "tensor/startup.h"

using namespace phasor;

int main(int argc, char** argv) {
  // The same OpenBLAS kernels as the `phasor` that wrote the file, so the
  // gradients can agree to the last bits (tensor/startup.h).
  use_best_openblas_core(argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: read_grad G.safetensors MODEL.safetensors TEXT\n");
    return 2;
  }
  std::map<std::string, std::string> meta;
  const nn::StateDict grads = nn::load_tensors(argv[1], &meta);
  const int64_t window = std::stoll(meta.at("window")), seq_len = std::stoll(meta.at("seq_len"));
  std::printf("%s: format %s, window %ld, seq_len %ld, loss %s, %zu tensors\n", argv[1], meta.at("format").c_str(),
              static_cast<long>(window), static_cast<long>(seq_len), meta.at("loss").c_str(), grads.size());
  NoGradGuard no_grad;
  for (const auto& [name, g] : grads)
    if (name.starts_with("layers.0.") || name.find('.') == std::string::npos || name.starts_with("tok"))
      std::printf("  %-28s %-8s |grad| %.6f\n", name.c_str(), (std::ostringstream() << g.shape()).str().c_str(),
                  norm(g).item<double>());

  // The same window's gradients from the library: the file holds them in F32.
  const auto model = load_model(argv[2]);
  const WindowGradients want = window_gradients(*model, ByteTokenizer().encode(load_text(argv[3])), seq_len, window, false);
  int mismatches = std::abs(std::stod(meta.at("loss")) - want.loss) <= 1e-12 * std::abs(want.loss) ? 0 : 1;
  for (const auto& [name, w] : want.parameters) {
    const auto it = grads.find(name);
    const double scale = norm(w).item<double>();
    if (it == grads.end() || norm(it->second.to(DType::Float64) - w.to(DType::Float64)).item<double>() > 1e-6 * scale + 1e-30) {
      std::printf("MISMATCH: %s differs from the library's gradient\n", name.c_str());
      ++mismatches;
    }
  }
  std::printf("%zu gradients and the loss agree with the library's\n", want.parameters.size() - mismatches);
  return mismatches == 0 ? 0 : 1;
}
