#pragma once
// Differentiable fused ops of the transformer (kernels in tensor/fused.h).
// Those of the list PHASOR_DIFFERENTIABLE_FUSED_OPS (tensor/fused_ops.h, with
// their maths) are declared from it with their composed references; the
// others below.
#include "tensor/attention.h"
#include "tensor/fused.h"

namespace phasor {

// For each op of the list: the fused op, one pass each way, and its composed
// reference path, one autograd op at a time: the spec's formulas, and what the
// fused backward differentiates under create_graph (autograd/fused.cpp).
// Their maths: their sections of tensor/fused_ops.h.
#define PHASOR_DECLARE_DIFFERENTIABLE(name, parameters) \
  Tensor name parameters;                               \
  Tensor name##_reference parameters;
PHASOR_DIFFERENTIABLE_FUSED_OPS(PHASOR_DECLARE_DIFFERENTIABLE)
#undef PHASOR_DECLARE_DIFFERENTIABLE

// ComplexFormer's Euler transform + adaptive differential rotation, one pass each way.
// `frequencies` (float64 [P], constant): the w_j to use instead of rope_base's (ops::CmhaParams).
Tensor cmha_rotate(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                   double rope_base, const Tensor& frequencies = Tensor());
// The polar rotation of pope, carope and complexformer-seed, one pass each way
// (ops::PolarParams, tensor/fused_ops.h): gain_h m(z) exp(i f(angle)), with
// angle any real tensor that broadcasts to z's shape [B, N, H, W] (its
// gradient summed back to its shape) and gain [H] or undefined.
Tensor polar_rotate(const Tensor& z, const Tensor& angle, const Tensor& gain = Tensor(),
                    ops::PolarMagnitude magnitude = ops::PolarMagnitude::Identity, ops::PolarAngle angle_map = ops::PolarAngle::Identity);
// Its composed reference: the same maths, one autograd op at a time.
Tensor polar_rotate_reference(const Tensor& z, const Tensor& angle, const Tensor& gain = Tensor(),
                              ops::PolarMagnitude magnitude = ops::PolarMagnitude::Identity,
                              ops::PolarAngle angle_map = ops::PolarAngle::Identity);
// Fused causal attention over q [B, Nq, H, d] and k, v [B, Nk, H, d] (see
// ops::causal_attention): softmax(scale q k^T - ALiBi bias, causal) v, with O(N d)
// memory. Query i sits at position offset + i; slopes [H] may be undefined.
// distance_bias [H, R + 1] (may be undefined) adds distance_bias[h, min(m - n, R)]
// to each score, with its gradient (complexformer-seed's gated table).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset = 0, const Tensor& slopes = Tensor(),
                        const Tensor& distance_bias = Tensor());
// causal_attention with q, k and v stored in `inputs` (bfloat16: mixed
// precision, nn/precision.h): rounded once, read so by the fused kernels and
// saved so for backward (half float32's memory), while the scores, softmax and
// weighted sum accumulate in float32. The output is float32, and the gradients
// reach q, k and v in float32, unrounded. First order only: create_graph is
// refused. `inputs` equal to q's dtype is causal_attention.
Tensor causal_attention_in(DType inputs, const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset = 0,
                           const Tensor& slopes = Tensor(), const Tensor& distance_bias = Tensor());
// The same attention composed of autograd ops, every score and probability
// materialised ([B, H, Nq, Nk]): the readable reference of causal_attention.
// `probs`, when given, receives the probabilities.
Tensor materialized_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset = 0,
                              const Tensor& slopes = Tensor(), Tensor* probs = nullptr, const Tensor& distance_bias = Tensor());
// Causal softmax of scale * scores (minus ALiBi slopes * distance when given).
Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes = Tensor());

// cmha_rotate's composed reference, which can hand out the Euler transform's
// modulus r and phase phi.
Tensor cmha_rotate_reference(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                             double rope_base, Tensor* r_out = nullptr, Tensor* phi_out = nullptr, const Tensor& frequencies = Tensor());

}  // namespace phasor
