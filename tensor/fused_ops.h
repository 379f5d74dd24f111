#pragma once
// The results and parameters of the fused ops (tensor/fused.h, tensor/attention.h),
// a leaf below their front-ends: the kernel interface (tensor/backend.h)
// takes them without including any front-end. Includes tensor.h only.
#include "tensor/tensor.h"

namespace phasor::ops {

// ---- RMSNorm (tensor/fused.h)
struct RmsNormResult {
  Tensor y, inv_rms;  // inv_rms: one float per row, saved for backward
};
struct RmsNormGrads {
  Tensor dx, dweight;
};

// ---- SwiGLU
struct SwigluGrads {
  Tensor dgate, dup;
};

// ---- cross-entropy; count: the rows whose target is not ignore_index
struct CrossEntropyResult {
  Tensor loss, logsumexp;
  Tensor count;  // float64 0-d, on the op's device: the rows counted (target != ignore_index)
};

// ---- ComplexFormer rotation: delta, phase_bias [H, P] (phase_bias may be
// undefined), beta [H]; positions start at offset
struct CmhaParams {
  Tensor delta, phase_bias, beta;
  int64_t offset = 0;
  double rope_base = 10000.0;
};
constexpr double kEulerEps = 1e-9;
struct CmhaGrads {
  Tensor dz, ddelta, dphase_bias, dbeta;
};

// ---- AdamW: the step's bias corrections precomputed
struct AdamWStep {
  double lr, weight_decay, beta1, beta2, eps, bias_correction1, bias_correction2_sqrt;
};

// ---- fused causal attention (tensor/attention.h): query row i sits at
// position offset + i; slopes [H] (ALiBi) may be undefined
struct AttentionParams {
  double scale = 1.0;
  int64_t offset = 0;
  Tensor slopes;
};
struct AttentionResult {
  Tensor out;        // [B, Nq, H, d], contiguous
  Tensor logsumexp;  // [B, H, Nq]: log sum_n exp(score(i, n)) over the visible keys
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // contiguous, shaped like q, k, v
};

// ---- the one list of fused ops ----
// X(name, Args) for each kernel: from it come the Backend's methods
// (virtual void name(const Args&), tensor/backend.h), the CPU and CUDA
// declarations (tensor/cpu/backend.h, cuda/kernels.h) and the cross-backend
// cases of tests/test_cuda.cpp, which do not compile while an op lacks one.
// A new fused op: its Args here, its front-end (tensor/fused.h, fused.cpp),
// its kernels (tensor/cpu/fused.cpp, cuda/fused.cu), its autograd
// (autograd/fused.*) and its tests. Operands are contiguous unless stated,
// parameters in the (real) dtype of the data; the front-ends allocate the
// outputs (the `out` members) and make the layouts so.
#define PHASOR_FUSED_OPS(X)                                   \
  X(rms_norm, RmsNormArgs)                                    \
  X(rms_norm_backward, RmsNormBackwardArgs)                   \
  X(cross_entropy, CrossEntropyArgs)                          \
  X(cross_entropy_backward, CrossEntropyBackwardArgs)         \
  X(swiglu, SwigluArgs)                                       \
  X(swiglu_backward, SwigluBackwardArgs)                      \
  X(rotate, RotateArgs)                                       \
  X(cmha_rotate, CmhaRotateArgs)                              \
  X(cmha_rotate_backward, CmhaRotateBackwardArgs)             \
  X(attention_softmax, AttentionSoftmaxArgs)                  \
  X(attention_softmax_backward, AttentionSoftmaxBackwardArgs) \
  X(attention_forward, AttentionForwardArgs)                  \
  X(attention_backward, AttentionBackwardArgs)                \
  X(adamw_step, AdamWArgs)

struct RmsNormArgs {  // x [.., d], weight [d]; out.inv_rms one per row
  RmsNormResult out;
  Tensor x, weight;
  double eps;
};
struct RmsNormBackwardArgs {
  RmsNormGrads out;
  Tensor grad, x, weight, inv_rms;
};
// logits [R, V], targets int64 [R], checked by the front-end: out.count rows
// count (target != ignore_index), each target in [0, V). The kernel fills the
// loss (their sum, over out.count when mean) and each row's logsumexp.
struct CrossEntropyArgs {
  CrossEntropyResult out;
  Tensor logits, targets;
  int64_t ignore_index;
  bool mean;
};
struct CrossEntropyBackwardArgs {  // dlogits = grad / count (softmax - onehot), 0 on ignored rows
  Tensor dlogits;
  Tensor grad;   // float64 0-d, on the device: the loss's gradient
  Tensor count;  // float64 0-d (the mean's rows, at least 1 used), or undefined (a sum: no division)
  Tensor logits, targets, logsumexp;
  int64_t ignore_index;
};
struct SwigluArgs {  // out = silu(gate) up; one shape and dtype
  Tensor out, gate, up;
};
struct SwigluBackwardArgs {
  SwigluGrads out;
  Tensor grad, gate, up;
};
struct RotateArgs {  // out = z [B, N, H, P] times table [N, P] (conjugated if asked)
  Tensor out, z, table;
  bool conjugate_table;
};
struct CmhaRotateArgs {  // z [B, N, H, P]
  Tensor out, z;
  CmhaParams p;
};
struct CmhaRotateBackwardArgs {  // out.dphase_bias undefined when p.phase_bias is
  CmhaGrads out;
  Tensor grad, z;
  CmhaParams p;
};
struct AttentionSoftmaxArgs {  // scores, probs [B, H, Nq, Nk]; slopes [H] or undefined
  Tensor probs, scores, slopes;
  double scale;
  int64_t offset;
};
struct AttentionSoftmaxBackwardArgs {
  Tensor dscores, grad, probs;
  double scale;
};
// q, k, v, grad and forward.out have packed heads ([.., H, d] contiguous) but
// may have any batch and row strides; the results are contiguous.
struct AttentionForwardArgs {
  AttentionResult out;
  Tensor q, k, v;
  AttentionParams p;
};
struct AttentionBackwardArgs {
  AttentionGrads out;
  Tensor grad, q, k, v;
  AttentionResult forward;
  AttentionParams p;
};
struct AdamWArgs {  // in place on param, exp_avg, exp_avg_sq: contiguous real arrays of one size
  Tensor param, grad, exp_avg, exp_avg_sq;
  AdamWStep step;
};

}  // namespace phasor::ops
