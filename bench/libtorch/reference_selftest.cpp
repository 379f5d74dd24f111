// Self-checks of the LibTorch reference against docs/spec.md, written
// independently of Phasor: closed-form scores, relative-position invariance,
// ALiBi slopes, the untrained loss, training, checkpoints and eval windows.
#include <cmath>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <unistd.h>

#include "bench/libtorch/positions.h"
#include "bench/libtorch/reference_model.h"
#include "tensor/error.h"

namespace {

using phasor::CmhaInit;
using phasor::ModelConfig;
using phasor::Position;
using namespace phasor::torch_ref;

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

bool throws_phasor_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const phasor::Error&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

ModelConfig small(Position position, int64_t n_heads = 4) {
  ModelConfig c;
  c.position = position;
  c.d_model = 48;
  c.n_heads = n_heads;
  c.n_layers = 2;
  c.d_ff = 96;
  c.max_seq_len = 32;
  return c;
}

torch::Tensor random_tokens(int64_t b, int64_t n, int64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, 256, {b, n}, torch::kLong);
}

std::string name(Position p) { return std::string(phasor::position_name(p)); }

void parameter_names() {
  Model m(small(Position::ComplexFormer));
  std::set<std::string> names;
  for (const auto& item : m.named_parameters()) names.insert(item.key());
  const std::set<std::string> layer = {"attn_norm.weight", "attn.wq.weight", "attn.wk.weight", "attn.wv.weight",
                                       "attn.wo.weight",   "attn.delta",     "attn.phase_bias", "attn.beta",
                                       "ffn_norm.weight",  "ffn.w1.weight",  "ffn.w2.weight",  "ffn.w3.weight"};
  std::set<std::string> expected = {"tok_emb.weight", "norm.weight"};
  for (int l = 0; l < 2; ++l)
    for (const auto& n : layer) expected.insert("layers." + std::to_string(l) + "." + n);
  check(names == expected, "complexformer parameter names are the checkpoint's (tied head)");
  check(m.named_parameters()["layers.1.attn.delta"].sizes() == torch::IntArrayRef({4, 6}), "delta is [H, P]");

  auto untied = small(Position::Learned);
  untied.tie_embeddings = false;
  Model u(untied);
  check(u.named_parameters().contains("lm_head.weight") && u.named_parameters().contains("pos_emb.weight") &&
            !u.named_parameters().contains("layers.0.attn.delta"),
        "learned + untied has pos_emb and lm_head, no CMHA parameters");
}

void alibi_slopes_rule() {
  const auto s8 = alibi_slopes(8);
  bool ok8 = s8.size() == 8;
  for (int h = 0; ok8 && h < 8; ++h) ok8 = s8[h] == std::pow(2.0, -(h + 1));
  check(ok8, "alibi slopes H=8 are 2^-1 .. 2^-8");
  const std::vector<double> e6 = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  check(alibi_slopes(6) == e6, "alibi slopes H=6 are the H=4 series then every other of the H=8 series");
  check(alibi_slopes(1) == std::vector<double>{1.0 / 256.0}, "alibi slope H=1 is 2^-8");
}

void rope_equivalence() {
  auto cf_config = small(Position::ComplexFormer);
  Model cf(cf_config, 7);
  Model rope(small(Position::Rope), 0);
  auto weights = state(cf);
  for (const auto& name : {"delta", "phase_bias", "beta"})
    for (int l = 0; l < 2; ++l) weights.erase("layers." + std::to_string(l) + ".attn." + name);
  load_state(rope, weights);
  auto tokens = random_tokens(2, 24, 1);
  torch::NoGradGuard no_grad;
  const double d = max_diff(cf.forward(tokens), rope.forward(tokens));
  check(d < 1e-5, "untrained complexformer (cmha_init=rope) equals rope on the same weights, max diff " + num(d));
}

// The spec's closed form for one head, in float64 loops:
// sum_j r^q r^k cos(delta (phi^q - phi^k) + phase_bias + beta (m - n) w_j) / sqrt(d).
void complexformer_closed_form() {
  auto config = small(Position::ComplexFormer);
  Attention attn(config);
  torch::manual_seed(3);
  const auto parameters = attn->named_parameters(/*recurse=*/false);
  const torch::Tensor &delta_p = parameters["delta"], &phase_bias_p = parameters["phase_bias"], &beta_p = parameters["beta"];
  {
    torch::NoGradGuard no_grad;
    delta_p.normal_(1.0, 0.3);
    phase_bias_p.normal_(0.0, 0.5);
    beta_p.uniform_(0.5, 1.5);
  }
  const int64_t N = 6, d = config.head_dim(), P = config.pairs(), h = 2;
  auto x = torch::randn({1, N, config.d_model});
  auto scores = attn->scores(x).to(torch::kFloat64);
  auto q = attn->wq(x).detach().to(torch::kFloat64)[0], k = attn->wk(x).detach().to(torch::kFloat64)[0];
  auto delta = delta_p.detach().to(torch::kFloat64), bias = phase_bias_p.detach().to(torch::kFloat64);
  const double beta = beta_p[h].item<double>();
  double worst = 0;
  for (int64_t m = 0; m < N; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t j = 0; j < P; ++j) {
        const auto at = [&](const torch::Tensor& t, int64_t pos, int64_t c) { return t[pos][h * d + c].item<double>(); };
        const double qr = at(q, m, 2 * j), qi = at(q, m, 2 * j + 1), kr = at(k, n, 2 * j), ki = at(k, n, 2 * j + 1);
        const double w = std::pow(config.rope_base, -2.0 * j / d);
        const double rq = std::sqrt(qr * qr + qi * qi + kEulerEps), rk = std::sqrt(kr * kr + ki * ki + kEulerEps);
        const double dl = delta[h][j].item<double>(), b = bias[h][j].item<double>();
        s += rq * rk * std::cos(dl * (std::atan2(qi, qr) - std::atan2(ki, kr)) + b + beta * (m - n) * w);
      }
      worst = std::max(worst, std::abs(s / std::sqrt(double(d)) - scores[0][h][m][n].item<double>()));
    }
  check(worst < 1e-5, "complexformer scores match the spec's closed form, max diff " + num(worst));
}

void xpos_closed_form() {
  auto config = small(Position::XPos);
  Attention attn(config);
  const int64_t N = 6, d = config.head_dim(), P = config.pairs(), h = 1, offset = 100;
  auto x = torch::randn({1, N, config.d_model});
  auto scores = attn->scores(x, offset).to(torch::kFloat64);
  auto q = attn->wq(x).detach().to(torch::kFloat64)[0], k = attn->wk(x).detach().to(torch::kFloat64)[0];
  double worst = 0;
  for (int64_t m = 0; m < N; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t j = 0; j < P; ++j) {
        const std::complex<double> zq(q[m][h * d + 2 * j].item<double>(), q[m][h * d + 2 * j + 1].item<double>());
        const std::complex<double> zk(k[n][h * d + 2 * j].item<double>(), k[n][h * d + 2 * j + 1].item<double>());
        const double w = std::pow(config.rope_base, -2.0 * j / d), zeta = (2.0 * j + 0.4 * d) / (1.4 * d);
        const double mm = double(m + offset), nn = double(n + offset);
        const auto qt = zq * std::polar(std::pow(zeta, mm / config.xpos_scale_base), mm * w);
        const auto kt = zk * std::polar(std::pow(zeta, -nn / config.xpos_scale_base), nn * w);
        s += (qt * std::conj(kt)).real();
      }
      worst = std::max(worst, std::abs(s / std::sqrt(double(d)) - scores[0][h][m][n].item<double>()));
    }
  check(worst < 1e-5, "xpos scores match the spec's formula at offset 100, max diff " + num(worst));
}

void relative_positions() {
  for (const Position position : {Position::Rope, Position::XPos, Position::ComplexFormer, Position::Alibi}) {
    auto config = small(position, position == Position::Alibi ? 6 : 4);
    config.cmha_init = CmhaInit::Paper;
    Model model(config, 11);
    auto& attn = model.blocks[0]->attn;
    if (position == Position::ComplexFormer) {
      torch::NoGradGuard no_grad;
      attn->position_parameters.at(1).normal_(0.0, 0.5);  // phase_bias
      attn->position_parameters.at(2).uniform_(0.5, 1.5);  // beta
    }
    torch::manual_seed(5);
    auto x = torch::randn({2, 16, config.d_model});
    torch::NoGradGuard no_grad;
    const double ds = max_diff(attn->scores(x, 0), attn->scores(x, 37));
    check(ds < 1e-4, name(position) + " scores depend on m - n only (offset 37), max diff " + num(ds));
    auto tokens = random_tokens(1, 16, 2);
    const double dl = max_diff(model.forward(tokens, 0), model.forward(tokens, 37));
    check(dl < 1e-4, name(position) + " logits are unchanged by a position offset, max diff " + num(dl));
  }
}

void euler_phase_gradient() {
  auto re = torch::tensor({0.0, 0.3, -1e-6}, torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true));
  auto im = torch::tensor({0.0, -0.4, 2e-6}, torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true));
  auto phi = euler_phase(re, im);
  phi.sum().backward();
  check(phi[0].item<double>() == 0.0, "atan2(0, 0) = 0");
  const bool finite = torch::isfinite(re.grad()).all().item<bool>() && torch::isfinite(im.grad()).all().item<bool>();
  check(finite && re.grad()[0].item<double>() == 0.0, "the phase gradient is finite at z = 0");
  // Away from zero it is atan2's gradient up to eps: (re, im) = (0.3, -0.4), |z|^2 = 0.25.
  const double denom = 0.25 + kEulerEps;
  check(std::abs(re.grad()[1].item<double>() - 0.4 / denom) < 1e-12 &&
            std::abs(im.grad()[1].item<double>() - 0.3 / denom) < 1e-12,
        "the phase gradient is (-im, re) / (|z|^2 + eps)");
  // Near zero the eps denominator bounds it: |z|^2 = 5e-12 << eps.
  const double expected = -2e-6 / (5e-12 + kEulerEps);
  check(std::abs(re.grad()[2].item<double>() - expected) < 1e-9 * std::abs(expected), "near z = 0 the eps denominator applies");
}

// Central differences in float64 against backward(), through every op of the
// layer (Euler transform, polar, view_as_complex/view_as_real, softmax, SwiGLU).
void finite_differences() {
  for (const Position position : {Position::ComplexFormer, Position::XPos, Position::Alibi}) {
    auto config = small(position);
    config.n_layers = 1;
    config.cmha_init = CmhaInit::Paper;
    Model model(config, 13);
    model.to(torch::kFloat64);
    auto params = model.named_parameters();
    {
      // Sharper attention than at init, so the position parameters matter.
      torch::NoGradGuard no_grad;
      params["layers.0.attn.wq.weight"].mul_(5.0);
      params["layers.0.attn.wk.weight"].mul_(5.0);
      if (position == Position::ComplexFormer) {
        params["layers.0.attn.phase_bias"].normal_(0.0, 0.5);
        params["layers.0.attn.beta"].uniform_(0.5, 1.5);
      }
    }
    auto tokens = random_tokens(2, 10, 8);
    auto targets = torch::roll(tokens, -1, 1);
    model.zero_grad();
    model.loss(tokens, targets).backward();
    double worst = 0;
    for (const auto& item : params) {
      auto flat = item.value().view(-1);
      const auto grad = item.value().grad().view(-1);
      for (const int64_t i : {int64_t{0}, flat.numel() / 2, flat.numel() - 1}) {
        torch::NoGradGuard no_grad;
        const double orig = flat[i].item<double>(), h = 1e-5;
        flat[i] = orig + h;
        const double up = model.loss(tokens, targets).item<double>();
        flat[i] = orig - h;
        const double down = model.loss(tokens, targets).item<double>();
        flat[i] = orig;
        const double fd = (up - down) / (2 * h), an = grad[i].item<double>();
        worst = std::max(worst, std::abs(fd - an) / (1e-8 + std::abs(fd)));
      }
    }
    check(worst < 1e-4, name(position) + " float64 gradients match central differences, worst rel err " + num(worst));
  }
}

void sinusoidal_values() {
  auto table = sinusoidal_table(10, 0, 48, torch::kCPU);
  const double pos = 7, i = 5;
  const double a = pos / std::pow(10000.0, 2 * i / 48.0);
  check(std::abs(table[7][10].item<double>() - std::sin(a)) < 1e-7 && std::abs(table[7][11].item<double>() - std::cos(a)) < 1e-7,
        "sinusoidal PE(pos, 2i) = sin, PE(pos, 2i+1) = cos");
}

void untrained_loss_and_training() {
  const double log_v = std::log(256.0);
  for (const Position position : phasor::all_positions()) {
    Model model(small(position), 1);
    auto tokens = random_tokens(2, 32, 9);
    torch::NoGradGuard no_grad;
    const double loss = model.loss(tokens, torch::roll(tokens, -1, 1)).item<double>();
    check(std::abs(loss - log_v) < 0.1, name(position) + " untrained loss " + std::to_string(loss) + " is near log(256)");
  }
  for (const Position position : phasor::all_positions()) {
    Model model(small(position), 2);
    torch::optim::AdamW opt(model.parameters(), torch::optim::AdamWOptions(3e-3));
    auto tokens = random_tokens(4, 16, 4);
    auto targets = torch::roll(tokens, -1, 1);
    double first = 0, last = 0;
    for (int step = 0; step < 8; ++step) {
      opt.zero_grad();
      auto loss = model.loss(tokens, targets);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    check(last < first - 0.2, name(position) + " AdamW on a repeated batch: loss " + std::to_string(first) + " -> " +
                                  std::to_string(last));
  }
}

void checkpoints(const std::string& dir) {
  auto config = small(Position::ComplexFormer);
  config.cmha_init = CmhaInit::Paper;
  Model model(config, 21);
  const std::string path = dir + "/model.safetensors";
  save_safetensors(model, path);
  check(read_config(path).cmha_init == CmhaInit::Paper, "read_config gives back the saved config");
  auto loaded = load_model(path);
  auto tokens = random_tokens(2, 12, 6);
  torch::NoGradGuard no_grad;
  check(max_diff(model.forward(tokens), loaded->forward(tokens)) == 0.0, "save_safetensors / load_model round trip is exact");

  Model other(config, 22);
  load_safetensors(other, path);
  check(max_diff(model.forward(tokens), other.forward(tokens)) == 0.0, "load_safetensors into a model of the same config");

  check(throws_phasor_error([&] {
          Model rope(small(Position::Rope));
          load_safetensors(rope, path);
        }),
        "a checkpoint of another position variant is refused");
  check(throws_phasor_error([&] {
          auto weights = state(model);
          weights.erase("layers.1.ffn.w2.weight");
          load_state(other, weights);
        }),
        "a missing tensor is refused");
  check(throws_phasor_error([&] {
          auto weights = state(model);
          weights["layers.0.attn.delta"] = torch::zeros({4, 5});
          load_state(other, weights);
        }),
        "a wrong shape is refused");
  check(throws_phasor_error([&] { Model(small(Position::Learned)).forward(random_tokens(1, 33, 0)); }),
        "learned past max_seq_len is a phasor::Error");
  check(throws_phasor_error([&] { model.forward(torch::full({1, 4}, 256, torch::kLong)); }),
        "a token outside the vocabulary is a phasor::Error");
  check(throws_phasor_error([] {
          auto bad = small(Position::Rope);
          bad.n_heads = 5;
          Model m(bad);
        }),
        "an invalid config is a phasor::Error");
}

void evaluation_windows() {
  check(eval_windows(50, 8, 0) == 6 && eval_windows(49, 8, 0) == 6 && eval_windows(57, 8, 0) == 7 &&
            eval_windows(57, 8, 3) == 3 && eval_windows(8, 8, 0) == 0,
        "W = floor((T - 1) / L), capped by max_windows");
  Model model(small(Position::Alibi), 3);
  std::vector<int64_t> text(53);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<int64_t>((i * 37 + 11) % 256);
  // By hand: six windows of 8, each from position 0, targets shifted by one.
  auto all = torch::tensor(text, torch::kLong);
  auto inputs = all.narrow(0, 0, 48).view({6, 8}), targets = all.narrow(0, 1, 48).view({6, 8});
  torch::NoGradGuard no_grad;
  const double expected = model.loss(inputs, targets).item<double>();
  const double got = evaluate(model, text, 8, 0, 4);
  check(std::abs(got - expected) < 1e-5, "evaluate matches the windows built by hand (" + std::to_string(got) + ")");
  const double first_two = model.loss(inputs.narrow(0, 0, 2), targets.narrow(0, 0, 2)).item<double>();
  check(std::abs(evaluate(model, text, 8, 2, 8) - first_two) < 1e-5, "max_windows keeps the first K windows");
  check(throws_phasor_error([&] { evaluate(model, std::vector<int64_t>(8, 1), 8); }), "too short a text is refused");
}

}  // namespace

int main() {
  torch::set_num_threads(1);
  const auto dir = std::filesystem::temp_directory_path() / ("phasor_torch_selftest." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  try {
    parameter_names();
    alibi_slopes_rule();
    rope_equivalence();
    complexformer_closed_form();
    xpos_closed_form();
    relative_positions();
    euler_phase_gradient();
    finite_differences();
    sinusoidal_values();
    untrained_loss_and_training();
    checkpoints(dir.string());
    evaluation_windows();
  } catch (const std::exception& e) {
    std::printf("FAIL  unexpected exception: %s\n", e.what());
    ++failures;
  }
  std::filesystem::remove_all(dir);
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
