#include "app/gradient.h"

#include <optional>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "models/data/dataset.h"
#include "models/probe.h"
#include "nn/checkpoint.h"

namespace phasor {

namespace {

Tensor grad_or_zeros(const Tensor& t) {
  const Tensor g = t.grad();
  return g.defined() ? g : zeros(t.shape(), t.dtype(), t.device());
}

// One side of the transform. The rotation is w = polar(r, theta) with
// theta = delta phi + phase_bias + beta m w_j. With G = w.grad (the repo's
// convention: G = dL/dRe w + i dL/dIm w, docs/design.md "Complex gradients"), polar's derivative
// (docs/complex-gradients.md, section 4) gives
//   dL/dr     = Re(conj(G) e^{i theta}) = Re(G conj(w)) / r       (e^{i theta} = w / r)
//   dL/dtheta = Re(conj(G) i w)         = Im(G conj(w))
// and theta depends on phi only through delta phi, so dL/dphi = delta dL/dtheta.
// Exact (no division by |z|: r >= sqrt(eps_euler)), and the same for the fused
// and the composed rotation, since both receive the same G.
std::pair<Tensor, Tensor> euler_side(const Tensor& z, const Tensor& rotated, const Tensor& delta) {
  PHASOR_CHECK(z.defined() && rotated.defined(),
               "euler_gradients: the probe holds no rotated queries or keys (run a complexformer forward with a probe attached)");
  NoGradGuard no_grad;
  const Tensor w = rotated.detach();
  const Tensor g_conj_w = grad_or_zeros(rotated) * conj(w);
  const Tensor r = sqrt(square(abs(z.detach())) + ops::kEulerEps);
  return {contiguous(real(g_conj_w) / r), contiguous(imag(g_conj_w) * delta.detach())};
}

std::vector<double> per_head_norm(const Tensor& t) {  // [B, N, H, P] -> H norms
  NoGradGuard no_grad;
  return sqrt(sum(square(t), {0, 1, 3})).to_vector<double>();
}


}  // namespace

EulerGradients euler_gradients(const AttentionProbe& probe, const Attention& layer) {
  const Tensor delta = layer.positions().phase_weight(layer.position_parameters());
  PHASOR_CHECK(delta.defined(), "euler_gradients: a '", layer.positions().name(), "' layer has no Euler transform");
  auto [q_r, q_phi] = euler_side(probe.q, probe.q_rotated, delta);
  auto [k_r, k_phi] = euler_side(probe.k, probe.k_rotated, delta);
  return {q_r, q_phi, k_r, k_phi};
}

EulerGradientNorms euler_gradient_norms(const EulerGradients& g) {
  return {per_head_norm(g.q_r), per_head_norm(g.q_phi), per_head_norm(g.k_r), per_head_norm(g.k_phi)};
}

StudyWindow study_window(const ModelConfig& c, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t window,
                         const StudyNames& names) {
  const std::string& command = names.command;
  PHASOR_CHECK(seq_len > 0, command, ": ", names.seq_len, " must be positive, got ", seq_len);
  check_positions_fit(c, seq_len, command + ": " + names.seq_len);
  PHASOR_CHECK(window >= 0, command, ": ", names.window, " must be non-negative, got ", window);
  const EvalWindows windows(tokens, seq_len);
  PHASOR_CHECK(window < windows.count(), command, ": ", names.window, " ", window, " is past the end: ", tokens.size(), " tokens hold ",
               windows.count(), " window(s) of seq_len ", seq_len, " (0..", windows.count() - 1, ")");
  return {windows.batch(window, 1), windows.count()};
}

WindowGradients window_gradients(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t window,
                                 bool activations, const StudyNames& names) {
  const ModelConfig& c = model.config();
  PHASOR_CHECK(!activations || model.positions().has_euler_transform(), names.command, ": ", names.activations,
                " needs a complexformer model (the gradients reaching its Euler transform); this one is '", c.position, "'");
  const StudyWindow w = study_window(c, tokens, seq_len, window, names);
  const Batch& b = w.batch;

  AutoGradMode grad_mode(true);  // a gradient study needs a graph even when called under NoGradGuard
  model.zero_grad();
  std::optional<ProbeScope> probes;
  if (activations) probes.emplace(model);
  const Tensor loss = model.loss(from_vector(b.inputs, {1, seq_len}), from_vector(b.targets, {1, seq_len}));
  loss.backward();

  WindowGradients out;
  out.loss = loss.item<double>();
  out.window = window;
  out.windows = w.count;
  out.seq_len = seq_len;
  for (const auto& [name, p] : model.named_parameters()) out.parameters.emplace_back(name, to_cpu(grad_or_zeros(p)));
  if (probes) {
    for (size_t l = 0; l < model.layers.size(); ++l) {
      const EulerGradients g = euler_gradients(probes->layer(l), *model.layers[l]->attn);
      const std::string prefix = "layers." + std::to_string(l) + ".attn.";
      // The window is batch row 0: [1, L, H, P] -> [L, H, P].
      const std::pair<const char*, Tensor> parts[] = {{"q_grad_r", g.q_r}, {"q_grad_phi", g.q_phi}, {"k_grad_r", g.k_r}, {"k_grad_phi", g.k_phi}};
      for (const auto& [suffix, t] : parts)
        out.activations.emplace_back(prefix + suffix, to_cpu(ops::contiguous(ops::select(t, 0, 0))));
    }
  }
  model.zero_grad();
  return out;
}

void save_gradients(const std::string& path, const WindowGradients& g, const ModelConfig& config) {
  nn::StateDict tensors;
  for (const auto* group : {&g.parameters, &g.activations})
    for (const auto& [name, t] : *group) tensors.emplace(name, ops::to(t, DType::Float32));
  nn::save_tensors(path, tensors,
                   {{"format", "phasor-gradient"}, {"config", to_json(config).dump()}, {"window", std::to_string(g.window)},
                    {"seq_len", std::to_string(g.seq_len)}, {"loss", nlohmann::json(g.loss).dump()}});
}

nlohmann::json gradient_norms_json(const WindowGradients& g) {
  const auto norms = [](const nn::NamedTensors& tensors) {
    nlohmann::json out = nlohmann::json::object();
    NoGradGuard no_grad;
    for (const auto& [name, t] : tensors) out[name] = norm(t).item<double>();
    return out;
  };
  nlohmann::json j = {{"loss", g.loss}, {"window", g.window}, {"windows", g.windows}, {"seq_len", g.seq_len},
                      {"grad_norms", norms(g.parameters)}};
  if (!g.activations.empty()) j["activation_norms"] = norms(g.activations);
  return j;
}

}  // namespace phasor
