// `phasor grad` against the LibTorch version of the model (bench/libtorch):
// the same weights, loaded from the same checkpoint file, backward of the
// same evaluation window, and every parameter's gradient compared with
// atol 1e-5 + rtol 1e-4; in process for every position variant, and once
// through the command line's safetensors output.
#define PHASOR_TEST_WITH_TORCH  // LibTorch first, then doctest: see tests/helpers.h
#include "tests/helpers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "app/gradient.h"
#include "bench/libtorch/reference_model.h"
#include "models/data/dataset.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/checkpoint.h"
#include "phasor.h"

namespace P = phasor;
namespace T = phasor::torch_ref;
namespace fs = std::filesystem;
using namespace phasor::test;

namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;
constexpr int64_t kSeqLen = 20, kWindow = 2;

fs::path scratch() { return scratch_root("torch_grad"); }

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "def f" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i * 13 % 17) + " + 1\n";
  return text;
}

// A checkpoint of the parity model (tests/helpers.h): CMHA parameters and norm gains off their initial values.
fs::path checkpoint(const P::ModelConfig& c, uint64_t seed) {
  const fs::path path = scratch() / (std::string(P::position_name(c.position)) + "_" + std::string(P::cmha_init_name(c.cmha_init)) +
                                     (c.tie_embeddings ? "_tied" : "_untied") + ".safetensors");
  P::save_model(path.string(), *parity_model(c, seed));
  return path;
}

// LibTorch's gradient of window kWindow's loss, by parameter name.
std::map<std::string, torch::Tensor> torch_gradients(const fs::path& ckpt, const std::vector<int64_t>& tokens) {
  auto ref = T::load_model(ckpt.string());
  const P::Batch b = P::EvalWindows(tokens, kSeqLen).batch(kWindow, 1);
  const torch::Tensor inputs = torch::tensor(b.inputs, torch::kLong).view({1, kSeqLen});
  const torch::Tensor targets = torch::tensor(b.targets, torch::kLong).view({1, kSeqLen});
  ref->loss(inputs, targets).backward();
  std::map<std::string, torch::Tensor> out;
  for (auto& item : ref->named_parameters()) out.emplace(item.key(), item.value().grad());
  return out;
}

// The worst |phasor - torch| / (atol + rtol |torch|) over every element of every tensor (<= 1 passes).
// Many gradients are far below atol, so each tensor must also agree relative
// to its own size: max |phasor - torch| / max |torch| <= 1e-4 (checked here).
double compare_all(const std::map<std::string, P::Tensor>& phasor_grads, const std::map<std::string, torch::Tensor>& torch_grads,
                   std::string* worst_name) {
  REQUIRE(phasor_grads.size() == torch_grads.size());
  double worst = 0;
  for (const auto& [name, g] : phasor_grads) {
    REQUIRE_MESSAGE(torch_grads.contains(name), name, " has no LibTorch gradient");
    const torch::Tensor t = torch_grads.at(name).to(torch::kFloat64).contiguous();
    REQUIRE_MESSAGE(std::vector<int64_t>(g.shape().begin(), g.shape().end()) == t.sizes().vec(), name);
    const std::vector<double> a = g.to_vector<double>();
    const double* b = t.data_ptr<double>();
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      double ratio = std::abs(a[i] - b[i]) / (kAtol + kRtol * std::abs(b[i]));
      if (std::isnan(ratio)) ratio = INFINITY;
      if (ratio > worst) worst = ratio, *worst_name = name + "[" + std::to_string(i) + "]";
      max_diff = std::max(max_diff, std::isnan(a[i]) ? INFINITY : std::abs(a[i] - b[i]));
      max_ref = std::max(max_ref, std::abs(b[i]));
    }
    CHECK_MESSAGE(max_diff <= 1e-4 * max_ref, name, ": max |diff| ", max_diff, " against max |LibTorch| ", max_ref);
  }
  return worst;
}

}  // namespace

TEST_CASE("window gradients of every variant match LibTorch's backward of the same window") {
  torch::set_num_threads(1);
  const std::vector<int64_t> tokens = P::ByteTokenizer().encode(sample_text());
  uint64_t seed = 20;
  for (const bool tie : {true, false})
    for (const P::Position position : P::all_positions())
      for (const P::CmhaInit init : position == P::Position::ComplexFormer ? std::vector{P::CmhaInit::Paper, P::CmhaInit::Rope}
                                                                           : std::vector{P::CmhaInit::Rope}) {
        CAPTURE(position);
        CAPTURE(init);
        CAPTURE(tie);
        const fs::path ckpt = checkpoint(parity_config(position, init, tie), ++seed);
        const auto model = P::load_model(ckpt.string());
        const P::WindowGradients g = P::window_gradients(*model, tokens, kSeqLen, kWindow, false);
        std::map<std::string, P::Tensor> grads(g.parameters.begin(), g.parameters.end());
        std::string where;
        const double worst = compare_all(grads, torch_gradients(ckpt, tokens), &where);
        INFO("worst: ", where, " at ", worst, "x the tolerance");
        CHECK(worst <= 1.0);
        MESSAGE(position, "/", init, std::string(tie ? "/tied" : "/untied"), ": ", grads.size(), " gradients agree; worst ", where, " at ", worst,
                "x the tolerance");
      }
}

TEST_CASE("phasor grad's safetensors file matches LibTorch's gradients") {
  const std::vector<int64_t> tokens = P::ByteTokenizer().encode(sample_text());
  const fs::path ckpt = checkpoint(parity_config(P::Position::ComplexFormer, P::CmhaInit::Paper, false), 99), data = scratch() / "text.txt",
                 out = scratch() / "grad.safetensors";
  std::ofstream(data, std::ios::binary) << sample_text();
  const Cli r = run_shell(phasor_command() + " grad --checkpoint " + quote(ckpt) + " --data " + quote(data) + " --seq-len " +
                              std::to_string(kSeqLen) + " --window " + std::to_string(kWindow) + " --activations --out " + quote(out),
                          scratch());
  INFO("stderr: ", r.err);
  REQUIRE(r.status == 0);
  P::nn::StateDict file = P::nn::load_tensors(out.string());
  for (auto it = file.begin(); it != file.end();)  // the activation gradients have no LibTorch counterpart here
    it = it->first.find("_grad_") != std::string::npos ? file.erase(it) : std::next(it);
  torch::set_num_threads(1);
  std::string where;
  const double worst = compare_all(file, torch_gradients(ckpt, tokens), &where);
  INFO("worst: ", where, " at ", worst, "x the tolerance");
  CHECK(worst <= 1.0);
  MESSAGE("phasor grad file: ", file.size(), " gradients agree; worst ", where, " at ", worst, "x the tolerance");
}
