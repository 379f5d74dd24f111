#pragma once
// Differentiable fused ops of the transformer (kernels in tensor/fused.h).
#include "tensor/attention.h"
#include "tensor/fused.h"

namespace phasor {

// x / sqrt(mean(x^2, -1) + eps) * weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// silu(gate) * up, SwiGLU's activation, in one pass each way.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// Mean (or sum) of -log softmax(logits)[target] over rows; rows whose target is
// ignore_index count for nothing. logits [R, V], targets int64 [R].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100, bool mean = true);
// RoPE / XPos: z [B, N, H, P] complex times the rotary table [N, P] (see ops::rotary_table).
Tensor rotate(const Tensor& z, const Tensor& table);
// ComplexFormer's Euler transform + adaptive differential rotation, one pass each way.
Tensor cmha_rotate(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                   double rope_base);
// Fused causal attention over q [B, Nq, H, d] and k, v [B, Nk, H, d] (see
// ops::causal_attention): softmax(scale q k^T - ALiBi bias, causal) v, with O(N d)
// memory. Query i sits at position offset + i; slopes [H] may be undefined.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset = 0, const Tensor& slopes = Tensor());
// The same attention composed of autograd ops, every score and probability
// materialised ([B, H, Nq, Nk]): the readable reference of causal_attention.
// `probs`, when given, receives the probabilities.
Tensor materialized_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset = 0,
                              const Tensor& slopes = Tensor(), Tensor* probs = nullptr);
// Causal softmax of scale * scores (minus ALiBi slopes * distance when given).
Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes = Tensor());

// The composed reference paths of the fused ops, one autograd op at a time:
// the spec's formulas, and what a fused backward differentiates under
// create_graph (autograd/fused.cpp). cmha_rotate_reference can hand out the
// Euler transform's modulus r and phase phi.
Tensor rms_norm_reference(const Tensor& x, const Tensor& weight, double eps);
Tensor swiglu_reference(const Tensor& gate, const Tensor& up);
Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100, bool mean = true);
Tensor rotate_reference(const Tensor& z, const Tensor& table);
Tensor cmha_rotate_reference(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                             double rope_base, Tensor* r_out = nullptr, Tensor* phi_out = nullptr);

}  // namespace phasor
