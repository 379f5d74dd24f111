#pragma once
// Fused causal attention, FlashAttention-2's scheme: softmax(scale q k^T + bias)
// v computed tile by tile with an online softmax, so no [Nq, Nk] matrix of
// scores or probabilities is ever held. The forward keeps the output and one
// log-sum-exp per query row; the backward recomputes the scores tile by tile
// from q, k, v, the output and those log-sum-exps. Memory is O(N d).
//
// These are the raw front-ends (tensor/attention.cpp; kernels in
// tensor/cpu/attention.cpp and cuda/attention.cu); the differentiable op is
// causal_attention in autograd/fused.h. The materialised path (scores, then
// attention_softmax of tensor/fused.h, then a GEMM) computes the same numbers
// and stays as the readable reference.
#include "tensor/fused_ops.h"

namespace phasor::ops {

// Query row i sits at position offset + i and sees the keys n <= offset + i
// (offset > 0: a KV cache holds the earlier keys). Its score against key n is
//   scale (q_i . k_n) - slope_h (offset + i - n),
// the second term only when slopes ([H], ALiBi) are given (AttentionParams,
// AttentionResult and AttentionGrads: tensor/fused_ops.h).

// q [B, Nq, H, d], k [B, Nk, H, d] and v [B, Nk, H, dv] (Nk >= 1; the value
// width dv may differ from the query/key width d, as pope's 2d-wide rotated
// queries and keys against d-wide values; the output is [B, Nq, H, dv]), one real floating dtype,
// or bfloat16 (mixed precision: the scores, the softmax and the weighted sum
// accumulate in float32, and the output, log-sum-exps and gradients are float32).
// Any batch and row strides are accepted (a KV cache's narrowed view); heads
// and elements must be packed ([.., H, d] contiguous), else a copy is made.
AttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p);

// grad: d loss / d out. `forward` is what causal_attention returned for these inputs.
AttentionGrads causal_attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionResult& forward, const AttentionParams& p);

}  // namespace phasor::ops
