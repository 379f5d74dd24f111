// The curvature study (app/curvature.h, `phasor curvature`): the exact
// Hessian over the angle parameters against finite differences of the
// gradient (float64), Lanczos against the exact eigenvalues, the Jacobi
// eigensolver on a known matrix, one CLI run read back from its JSON and its
// eigenvector file, and the command's bad input.
#include <doctest/doctest.h>

#include <regex>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/curvature.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/checkpoint.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

fs::path scratch() { return scratch_root("curvature"); }

std::string sample_text() {
  std::string text;
  for (int i = 0; i < 12; ++i) text += "In the beginning was the word " + std::to_string(i * 5 % 17) + ".\n";
  return text;
}

std::vector<int64_t> sample_tokens() { return ByteTokenizer().encode(sample_text()); }

// d = 8, P = 4, two heads, one layer: 18 angle parameters (delta, phase_bias [2, 4], beta [2]).
std::unique_ptr<CausalLM> tiny_model() {
  auto model = std::make_unique<CausalLM>(
      model_config(Position::ComplexFormer, {.d_model = 16, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 24, .cmha_init = CmhaInit::Paper}),
      3);
  Generator gen(4);
  NoGradGuard no_grad;
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.ends_with(".phase_bias")) ops::axpy_(p, uniform(p.shape(), -2.0, 2.0, DType::Float32, &gen), 1.0);
    if (name.ends_with(".beta")) ops::axpy_(p, uniform(p.shape(), -0.5, 0.8, DType::Float32, &gen), 1.0);
  }
  return model;
}

CurvatureOptions angle_options(int64_t top) {
  CurvatureOptions o;
  o.seq_len = 12;
  o.window = 1;
  o.top = top;
  return o;
}

}  // namespace

TEST_CASE("the exact Hessian over delta, phase_bias and beta matches finite differences of the gradient (float64)") {
  const auto model = tiny_model();
  for (const auto& [name, p] : model->named_parameters()) p.set_data(ops::contiguous(ops::to(p, DType::Float64)));
  const CurvatureOptions o = angle_options(0);
  const std::vector<double> h = exact_hessian(*model, sample_tokens(), o);
  std::vector<Tensor> params;
  for (const auto& [name, p] : model->named_parameters())
    if (name.ends_with(".delta") || name.ends_with(".phase_bias") || name.ends_with(".beta")) params.push_back(p);
  int64_t n = 0;
  for (const Tensor& p : params) n += p.numel();
  REQUIRE(n == 18);
  REQUIRE(h.size() == static_cast<size_t>(n * n));
  // The same window's loss, as window_hessian forms it.
  const std::vector<int64_t> tokens = sample_tokens();
  const Tensor inputs = from_vector(std::vector<int64_t>(tokens.begin() + 12, tokens.begin() + 24), {1, 12});
  const Tensor targets = from_vector(std::vector<int64_t>(tokens.begin() + 13, tokens.begin() + 25), {1, 12});
  auto gradient = [&] {
    std::vector<double> out;
    for (const Tensor& g : grad({model->loss(inputs, targets)}, params)) {
      const auto v = g.to_vector<double>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  constexpr double kEps = 1e-5;
  double worst = 0, largest = 0;
  int64_t column = 0;
  for (const Tensor& p : params)
    for (int64_t i = 0; i < p.numel(); ++i, ++column) {
      double* x = p.data<double>() + i;
      const double saved = *x;
      *x = saved + kEps;
      const std::vector<double> up = gradient();
      *x = saved - kEps;
      const std::vector<double> down = gradient();
      *x = saved;
      for (int64_t r = 0; r < n; ++r) {
        const double fd = (up[r] - down[r]) / (2 * kEps);
        worst = std::max(worst, std::abs(h[r * n + column] - fd));
        largest = std::max(largest, std::abs(fd));
      }
    }
  INFO("max |H - H_fd| = ", worst, ", max |H_fd| = ", largest);
  CHECK(largest > 1e-6);  // an untrained model: small, but far above the differences
  CHECK(worst <= 1e-6 * largest);
}

TEST_CASE("the Hessian over several windows is the mean of each window's Hessian") {
  const auto model = tiny_model();
  CurvatureOptions o = angle_options(0);
  o.window = 0;
  std::vector<double> mean(18 * 18, 0.0);
  for (int64_t w = 0; w < 3; ++w) {
    o.window = w;
    const std::vector<double> h = exact_hessian(*model, sample_tokens(), o);
    for (size_t i = 0; i < h.size(); ++i) mean[i] += h[i] / 3;
  }
  o.window = 0;
  o.window_count = 3;
  const std::vector<double> together = exact_hessian(*model, sample_tokens(), o);
  REQUIRE(together.size() == mean.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < mean.size(); ++i) diff = std::max(diff, std::abs(together[i] - mean[i])), scale = std::max(scale, std::abs(mean[i]));
  CHECK(scale > 0);
  CHECK(diff <= 1e-10 * scale);
  const CurvatureResult r = curvature(*model, sample_tokens(), o);
  CHECK(r.window_count == 3);
  CHECK(curvature_json(r)["window_count"] == 3);
}

TEST_CASE("Lanczos finds the exact Hessian's top eigenvalues; residuals are checked with one more product each") {
  const auto model = tiny_model();
  const CurvatureResult exact = curvature(*model, sample_tokens(), angle_options(0));
  CHECK(exact.method == "exact");
  CHECK(exact.dimension == 18);
  CHECK(exact.products == 18);
  REQUIRE(exact.eigenvalues.size() == 18);
  CHECK(exact.asymmetry < 1e-10);
  CHECK(exact.converged);
  CHECK(std::is_sorted(exact.eigenvalues.rbegin(), exact.eigenvalues.rend()));
  const CurvatureResult top = curvature(*model, sample_tokens(), angle_options(3));
  CHECK(top.method == "lanczos");
  REQUIRE(top.eigenvalues.size() == 3);
  CHECK(top.converged);
  CHECK(top.products <= 18 + 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(std::abs(top.eigenvalues[i] - exact.eigenvalues[i]) <= 1e-7 * std::abs(exact.eigenvalues[0]));
    CHECK(top.residuals[i] <= 1e-6);
    // the eigenvector is the exact one up to sign
    double d = 0;
    for (size_t k = 0; k < 18; ++k) d += top.eigenvectors[i][k] * exact.eigenvectors[i][k];
    CHECK(std::abs(std::abs(d) - 1.0) < 1e-5);
  }
  // The model's weights are float32 again afterwards.
  for (const auto& [name, p] : model->named_parameters()) CHECK(p.dtype() == DType::Float32);
}

TEST_CASE("Lanczos at the smallest end, and at both, finds the exact Hessian's eigenpairs there") {
  const auto model = tiny_model();
  const CurvatureResult exact = curvature(*model, sample_tokens(), angle_options(0));
  REQUIRE(exact.eigenvalues.size() == 18);
  const double scale = std::max(std::abs(exact.eigenvalues.front()), std::abs(exact.eigenvalues.back()));
  // Compares the i-th pair found with the exact pair of index e (eigenvectors up to sign).
  const auto check_pair = [&](const CurvatureResult& r, size_t i, size_t e) {
    CAPTURE(i);
    CAPTURE(e);
    CHECK(std::abs(r.eigenvalues[i] - exact.eigenvalues[e]) <= 1e-7 * scale);
    CHECK(r.residuals[i] <= 1e-6);
    double d = 0;
    for (size_t k = 0; k < 18; ++k) d += r.eigenvectors[i][k] * exact.eigenvectors[e][k];
    CHECK(std::abs(std::abs(d) - 1.0) < 1e-5);
  };
  CurvatureOptions o = angle_options(3);
  o.which = SpectrumEnd::Smallest;
  const CurvatureResult smallest = curvature(*model, sample_tokens(), o);
  REQUIRE(smallest.eigenvalues.size() == 3);
  CHECK(smallest.converged);
  for (size_t i = 0; i < 3; ++i) check_pair(smallest, i, 17 - i);  // smallest first
  o.top = 2;
  o.which = SpectrumEnd::Both;
  const CurvatureResult both = curvature(*model, sample_tokens(), o);
  REQUIRE(both.eigenvalues.size() == 4);
  CHECK(both.converged);
  for (size_t i = 0; i < 2; ++i) {
    check_pair(both, i, i);
    check_pair(both, 2 + i, 17 - i);
  }
  o.top = 10;  // 20 eigenvalues of 18 parameters
  CHECK_THROWS_WITH_AS(curvature(*model, sample_tokens(), o),
                       "curvature: --top 10 at both ends needs 20 eigenvalues, more than the 18 selected parameters", Error);
}

TEST_CASE("symmetric_eigen: a known matrix") {
  // [[2, 1, 0], [1, 2, 0], [0, 0, -1]]: 3, 1, -1 with (1, 1, 0)/sqrt 2, (1, -1, 0)/sqrt 2, (0, 0, 1).
  const auto [values, vectors] = symmetric_eigen({2, 1, 0, 1, 2, 0, 0, 0, -1}, 3);
  check_close(values, std::vector<double>{3.0, 1.0, -1.0}, {.rtol = 1e-12});
  CHECK(std::abs(std::abs(vectors[0][0]) - std::sqrt(0.5)) < 1e-12);
  CHECK(std::abs(vectors[0][0] - vectors[0][1]) < 1e-12);
  CHECK(std::abs(std::abs(vectors[2][2]) - 1.0) < 1e-12);
}

TEST_CASE("phasor curvature: JSON and eigenvector file, and bad input refused with one line") {
  const fs::path ckpt = scratch() / "cf.safetensors", text = write_bytes(scratch() / "text.txt", sample_text());
  save_model(ckpt.string(), *tiny_model());
  const fs::path out = scratch() / "eig.safetensors";
  const std::string base = phasor_command() + " curvature --checkpoint " + quote(ckpt) + " --data " + quote(text) + " --seq-len 12";
  const Cli r = run_shell(base + " --params delta,beta --top 2 --json --out " + quote(out), scratch());
  REQUIRE_MESSAGE(r.status == 0, r.err);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["method"] == "lanczos");
  CHECK(j["dimension"] == 10);
  CHECK(j["eigenvalues"].size() == 2);
  CHECK(j["hvps"].get<int64_t>() >= 2);
  CHECK(j["converged"] == true);
  CHECK(j["parameters"][0]["name"] == "layers.0.attn.delta");
  std::map<std::string, std::string> meta;
  const nn::StateDict saved = nn::load_tensors(out.string(), &meta);
  CHECK(meta["format"] == "phasor-curvature");
  REQUIRE(saved.contains("layers.0.attn.delta"));
  CHECK(saved.at("layers.0.attn.delta").shape() == Dims{2, 2, 4});
  CHECK(saved.at("layers.0.attn.beta").shape() == Dims{2, 2});
  const auto lambdas = saved.at("eigenvalues").to_vector<float>();
  CHECK(std::abs(lambdas[0] - j["eigenvalues"][0].get<double>()) <= 1e-6 * std::abs(j["eigenvalues"][0].get<double>()));
  const Cli plain = run_shell(base + " --top 1", scratch());
  CHECK(plain.status == 0);
  CHECK(contains(plain.out, "lanczos Hessian of window 0"));

  const auto refused = [&](const std::string& args, const std::string& must_mention) {
    const Cli bad = run_shell(base + " " + args, scratch());
    CAPTURE(args);
    check_one_line_failure(bad, must_mention);
    CHECK(bad.out.empty());
  };
  refused("--params nonsense", "curvature: --params 'nonsense' matches no parameter");
  refused("--params delta,,beta", "has an empty entry");
  refused("--top 0", "--top must be a positive integer or 'all', got '0'");
  refused("--top many", "--top must be a positive integer or 'all'");
  refused("--top all --params all", "at most 1024 parameters");
  refused("--params beta --top 5", "--top 5 exceeds the 2 selected parameters");
  refused("--window 99", "curvature: --window 99 is past the end");
  refused("--windows 0", "--windows");
  refused("--window 1 --windows 99", "is past the end");

  // Several windows: their mean loss; the exact method also prints its asymmetry.
  const Cli mean = run_shell(base + " --params beta --top all --window 0 --windows 3", scratch());
  REQUIRE_MESSAGE(mean.status == 0, mean.err);
  CHECK(contains(mean.out, "exact Hessian of windows 0-2 (mean)"));
  CHECK(std::regex_search(mean.out, std::regex(R"(asymmetry \|\|H - H\^T\|\| / \|\|H\|\| = \d)")));

  // A window whose second-order graph cannot fit: refused before anything is
  // allocated (without the check, the allocator fails minutes in or the kernel kills it).
  const fs::path long_text = write_bytes(scratch() / "long.txt", std::string(300001, 'a'));
  const Cli huge = run_shell(phasor_command() + " curvature --checkpoint " + quote(ckpt) + " --data " + quote(long_text) +
                                 " --seq-len 300000 --top 1", scratch());
  check_one_line_failure(huge, "curvature: --seq-len 300000 over 1 window(s) needs at least");
  CHECK_MESSAGE(contains(huge.err, "GiB of memory available to this process"), huge.err);
}
