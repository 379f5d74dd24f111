#pragma once
// Fused transformer ops: one pass over memory where the composed ops would
// take several. Each forward has its backward beside it. These are the raw
// front-ends (tensor/fused.cpp; kernels in tensor/cpu/fused.cpp and
// cuda/fused.cu); the differentiable ones are in autograd/fused.h. Their
// result and parameter structs are in tensor/fused_ops.h.
#include "tensor/fused_ops.h"

namespace phasor::ops {

// ---- RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) * w ----
RmsNormResult rms_norm(const Tensor& x, const Tensor& weight, double eps);
RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& inv_rms);

// ---- SwiGLU's gate: silu(gate) * up, elementwise, same shapes ----
// The feed-forward's activation in one pass each way instead of four (silu,
// its product, and their backwards), never storing silu(gate).
Tensor swiglu(const Tensor& gate, const Tensor& up);
SwigluGrads swiglu_backward(const Tensor& grad, const Tensor& gate, const Tensor& up);

// ---- cross-entropy from logits [R, V] and int64 targets [R] ----
// Mean over rows whose target != ignore_index; also returns each row's logsumexp.
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean);
// d loss / d logits = (softmax - onehot) * grad / count, where grad is the
// loss's 0-d gradient and count the forward's (undefined for a sum: no division).
// Both stay on the device: a GPU backward reads nothing on the host.
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              int64_t ignore_index, const Tensor& count);

// ---- rotary position tables ----
// table[m, j] = exp(i (offset + m) w_j) * zeta_j^(sign (offset + m - origin) / S)
// with w_j = base^(-2j/d) (d = 2 P); zeta = 1 (plain RoPE) when xpos_scale_base
// is 0. The XPos scales of a query and a key multiply to a function of their
// distance alone, so any common origin gives the same scores; a far one keeps
// the scales in range (models/config.h, xpos_origin). Phases are computed in
// float64 and stored in `dtype` (complex64 or complex128).
Tensor rotary_table(int64_t n, int64_t pairs, int64_t offset, double base, double xpos_scale_base, int xpos_sign, DType dtype,
                    int64_t xpos_origin = 0);
// z [B, N, H, P] complex times table [N, P] (broadcast over B and H). The
// backward of a multiplication by a table is the multiplication by its conjugate.
Tensor rotate(const Tensor& z, const Tensor& table, bool conjugate_table);

// ---- ComplexFormer: Euler transform + adaptive differential rotation ----
// z [B, N, H, P] complex; delta, phase_bias [H, P]; beta [H] (real). For head h,
// position m = offset + n and pair j:
//   out = r exp(i (delta phi + phase_bias + beta m w_j)),  r = sqrt(|z|^2 + eps), phi = atan2(Im z, Re z).
// phase_bias may be undefined (keys take none).
Tensor cmha_rotate(const Tensor& z, const CmhaParams& p);
CmhaGrads cmha_rotate_backward(const Tensor& grad, const Tensor& z, const CmhaParams& p);

// ---- attention probabilities ----
// probs = softmax over keys n <= m + offset of (scale * scores - slope_h (m + offset - n)),
// scores [B, H, Nq, Nk]; slopes [H] may be undefined (no ALiBi bias).
Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes);
// d scores = scale * probs * (grad - sum(grad * probs)).
Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale);

// ---- AdamW over one parameter (PyTorch's formula), in place ----
// param, exp_avg, exp_avg_sq contiguous real (complex parameters pass their
// real views); the step's bias corrections precomputed.
void adamw_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const AdamWStep& step);

}  // namespace phasor::ops
