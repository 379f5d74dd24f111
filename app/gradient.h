#pragma once
// The complex-gradient study (docs/complex-gradients.md, section 8): the
// gradient of one evaluation window's loss with respect to every parameter,
// and the gradients reaching each layer's Euler transform of queries and keys.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/data/dataset.h"
#include "models/transformer.h"
#include "nn/module.h"

namespace phasor {

// dL/dr and dL/dphi at the Euler transform z = r e^{i phi} of one layer's
// queries and keys (r = sqrt(|z|^2 + eps_euler), phi = atan2(Im z, Re z)),
// each real [B, N, H, P] in the model's real dtype.
struct EulerGradients {
  Tensor q_r, q_phi, k_r, k_phi;
};

// From a probe (models/probe.h) filled by one forward and backward of `layer`
// with grad mode on, under either RotationImpl; its scheme's phase_weight
// (complexformer's delta) carries dL/dtheta to dL/dphi. phasor::Error if the
// scheme has no Euler transform or the probe holds no rotated queries and keys.
EulerGradients euler_gradients(const AttentionProbe& probe, const Attention& layer);

// Per-head 2-norms over batch, positions and pairs: H values each.
struct EulerGradientNorms {
  std::vector<double> q_r, q_phi, k_r, k_phi;
};
EulerGradientNorms euler_gradient_norms(const EulerGradients& g);

// How a window study's caller names the study and its arguments in the
// messages of its errors: the CLI's command and flags (the default), or the
// Python method and its keyword arguments.
struct StudyNames {
  std::string command = "grad", seq_len = "--seq-len", window = "--window", activations = "--activations";
};

// One of the spec's evaluation windows of `tokens` at length seq_len, as a
// batch of one: what the window studies (`grad`, `curvature`) differentiate.
// phasor::Error (one line, starting with names.command) for a seq_len that is
// not positive or that the model cannot take, or a window past the end.
struct StudyWindow {
  Batch batch;
  int64_t count = 0;  // the windows the tokens hold
};
StudyWindow study_window(const ModelConfig& c, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t window,
                         const StudyNames& names);

struct WindowGradients {
  double loss = 0;  // mean of the window's L predictions
  int64_t window = 0, windows = 0, seq_len = 0;
  nn::NamedTensors parameters;   // by checkpoint name, each shaped like its parameter
  nn::NamedTensors activations;  // layers.{l}.attn.{q,k}_grad_{r,phi} [L, H, P]; empty unless asked for
};

// The gradient of the loss of evaluation window `window` (the spec's windows of
// `tokens` at length seq_len; loss = mean over its seq_len predictions) with
// respect to every parameter, and with `activations` the Euler-transform
// gradients of every layer (complexformer only). Leaves the model's .grad
// empty. phasor::Error (one line) for a window past the end, a seq_len a
// `learned` model cannot take, or activations of another variant.
// Errors name the arguments as `names` says.
WindowGradients window_gradients(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t window,
                                 bool activations, const StudyNames& names = {});

// Every tensor as F32 safetensors, written atomically. __metadata__: format
// "phasor-gradient", the model's config, window, seq_len and loss.
void save_gradients(const std::string& path, const WindowGradients& g, const ModelConfig& config);

// {"loss", "window", "windows", "seq_len", "grad_norms": {name: 2-norm, ...}}
// plus "activation_norms" when the activation gradients were computed.
nlohmann::json gradient_norms_json(const WindowGradients& g);

}  // namespace phasor
