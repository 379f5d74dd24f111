#pragma once
// The fused ops, each declared once: its maths, its argument struct and its
// lines in the lists below, from which come the kernel interface
// (PHASOR_FUSED_OPS: tensor/backend.h, tensor/cpu/backend.h, cuda/kernels.h),
// the raw front-ends' declarations (PHASOR_FUSED_FRONT_ENDS: tensor/fused.h)
// and the differentiable ops' (PHASOR_DIFFERENTIABLE_FUSED_OPS:
// autograd/fused.h). A leaf below their front-ends: the lists are text until a
// header expands them, so the kernel interface takes the structs without
// including any front-end. Fused causal attention's front-ends are in
// tensor/attention.h. Includes tensor.h only.
#include "tensor/tensor.h"

namespace phasor::ops {

// ---- RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) * w
struct RmsNormResult {
  Tensor y, inv_rms;  // inv_rms: one float per row, saved for backward
};
struct RmsNormGrads {
  Tensor dx, dweight;
};

// ---- SwiGLU's gate: silu(gate) * up, elementwise, same shapes
// The feed-forward's activation in one pass each way instead of four (silu,
// its product, and their backwards), never storing silu(gate).
struct SwigluGrads {
  Tensor dgate, dup;
};

// ---- cross-entropy from logits [R, V] and int64 targets [R]
// Mean (or sum) of -log softmax(logits)[target] over the rows whose target !=
// ignore_index (count: how many); also returns each row's logsumexp. Its
// backward: d loss / d logits = (softmax - onehot) * grad / count, where grad
// is the loss's 0-d gradient and count the forward's (undefined for a sum: no
// division). Both stay on the device: a GPU backward reads nothing on the host.
struct CrossEntropyResult {
  Tensor loss, logsumexp;
  Tensor count;  // float64 0-d, on the op's device: the rows counted (target != ignore_index)
};

// ---- ComplexFormer: Euler transform + adaptive differential rotation
// z [B, N, H, P] complex; delta, phase_bias [H, P]; beta [H] (real). For head h,
// position m = offset + n and pair j:
//   out = r exp(i (delta phi + phase_bias + beta m w_j)),  r = sqrt(|z|^2 + eps), phi = atan2(Im z, Re z).
// phase_bias may be undefined (keys take none). The frequencies are
// w_j = rope_base^(-2j/d) (d = 2P), or those of `frequencies` (float64 [P],
// no gradient) when given: context extension and the angle warm-up
// (models/rotary_scaling.h).
struct CmhaParams {
  Tensor delta, phase_bias, beta;
  int64_t offset = 0;
  double rope_base = 10000.0;
  Tensor frequencies{};
};
constexpr double kEulerEps = 1e-9;
struct CmhaGrads {
  Tensor dz, ddelta, dphase_bias, dbeta;
};

// ---- polar rotation (pope, carope, complexformer-seed): z [B, N, H, W]
// turned by angles of its own. With u = m(z) exp(i f(angle)):
//   out = gain_h u,
//   m(z) = z for complex z; z or softplus(z) for real z (the magnitude),
//   f    = identity or tanh (of the angle),
// angle real [A, N, H, W] with A = B, or A = 1 (one angle per position, head
// and component, shared by the batch); gain [H] real, or undefined (1).
// out is complex, of z's precision. With G the gradient of out:
//   dz     = gain conj(t) G (complex z),  gain m'(z) Re(conj(t) G) (real z), t = exp(i f(angle))
//   dangle = gain f'(angle) Im(conj(u) G), summed over the batch when A = 1
//   dgain  = sum of Re(conj(u) G) over every element of head h
enum class PolarMagnitude { Identity, Softplus };
enum class PolarAngle { Identity, Tanh };
struct PolarParams {
  Tensor angle;
  Tensor gain{};
  PolarMagnitude magnitude = PolarMagnitude::Identity;
  PolarAngle angle_map = PolarAngle::Identity;
};
struct PolarGrads {
  Tensor dz, dangle, dgain;  // dgain undefined without a gain
};

// ---- rotary position tables (RoPE / XPos; tensor/fused.h, rotary_table)
// rotate: z [B, N, H, P] complex times table [N, P] (broadcast over B and H).
// The backward of a multiplication by a table is the multiplication by its
// conjugate.

// ---- attention probabilities
// probs = softmax over keys n <= m + offset of (scale * scores - slope_h (m + offset - n)),
// scores [B, H, Nq, Nk]; slopes [H] may be undefined (no ALiBi bias). Its
// backward: d scores = scale * probs * (grad - sum(grad * probs)).

// ---- AdamW over one parameter (PyTorch's formula), in place
// param, exp_avg, exp_avg_sq contiguous real (complex parameters pass their
// real views); the step's bias corrections precomputed. When `schedule` is
// defined (a contiguous float64 [3] on the parameter's device: {apply,
// bias_correction1, bias_correction2_sqrt}), the kernel reads the corrections
// there instead, and leaves everything as it was where apply is 0: the device
// decides whether a step is taken, so the host never waits to know (nn::AdamW).
// A 4th element multiplies lr: the learning rate kept on the device, so that
// a step captured in a CUDA Graph follows the schedule it is replayed under.
struct AdamWStep {
  double lr, weight_decay, beta1, beta2, eps, bias_correction1, bias_correction2_sqrt;
  Tensor schedule;
};

// ---- fused causal attention (tensor/attention.h): query row i sits at
// position offset + i; slopes [H] (ALiBi) may be undefined, and so may
// distance_bias [H, R + 1], a learned bias per head and distance, added as
// distance_bias[h, min(offset + i - n, R)] (complexformer-seed's gated table)
struct AttentionParams {
  double scale = 1.0;
  int64_t offset = 0;
  Tensor slopes;
  Tensor distance_bias{};
};
struct AttentionResult {
  Tensor out;        // [B, Nq, H, d], contiguous
  Tensor logsumexp;  // [B, H, Nq]: log sum_n exp(score(i, n)) over the visible keys
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // contiguous, shaped like q, k, v
  // With a distance_bias: its gradient [H, R + 1]. A backend fills
  // ddistance_bias_rows [B, H, bins] instead, bins = min(R + 1, offset + Nq)
  // (no distance reaches past it), one row per batch item, and the front-end
  // sums them in batch order: the same numbers on every backend, no atomics.
  Tensor ddistance_bias{}, ddistance_bias_rows{};
};

// ---- the lists ----
// A new fused op: its section above (maths, results) with its Args below and
// its lines in the three lists; its front-end (tensor/fused.cpp), kernels
// (tensor/cpu/fused.cpp, cuda/fused.cu) and autograd (autograd/fused.cpp);
// its cross-backend case with its gradcheck (tests/test_cuda.cpp); a scalar formula
// both backends share goes in tensor/scalar_math.h (docs/design.md, "Adding a
// fused op").
//
// X(Result, name, (parameters)) for each raw front-end, ops::name (tensor/fused.h):
// where the arguments are checked and the outputs allocated, on any backend.
#define PHASOR_FUSED_FRONT_ENDS(X)                                                                                                  \
  X(RmsNormResult, rms_norm, (const Tensor& x, const Tensor& weight, double eps))                                                 \
  X(RmsNormGrads, rms_norm_backward, (const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& inv_rms))          \
  X(Tensor, swiglu, (const Tensor& gate, const Tensor& up))                                                                        \
  X(SwigluGrads, swiglu_backward, (const Tensor& grad, const Tensor& gate, const Tensor& up))                                      \
  X(CrossEntropyResult, cross_entropy, (const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean))             \
  X(Tensor, cross_entropy_backward,                                                                                                \
    (const Tensor& grad, const Tensor& logits, const Tensor& targets, const Tensor& logsumexp, int64_t ignore_index,              \
     const Tensor& count))                                                                                                        \
  X(Tensor, rotate, (const Tensor& z, const Tensor& table, bool conjugate_table))                                                  \
  X(Tensor, cmha_rotate, (const Tensor& z, const CmhaParams& p))                                                                   \
  X(CmhaGrads, cmha_rotate_backward, (const Tensor& grad, const Tensor& z, const CmhaParams& p))                                   \
  X(Tensor, polar_rotate, (const Tensor& z, const PolarParams& p))                                                                 \
  X(PolarGrads, polar_rotate_backward, (const Tensor& grad, const Tensor& z, const PolarParams& p))                                \
  X(Tensor, attention_softmax, (const Tensor& scores, double scale, int64_t offset, const Tensor& slopes))                          \
  X(Tensor, attention_softmax_backward, (const Tensor& grad, const Tensor& probs, double scale))                                   \
  X(void, adamw_step_,                                                                                                             \
    (const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const AdamWStep& step))

// X(name, (parameters)) for each differentiable op whose composed reference
// takes the same arguments: phasor::name and phasor::name_reference
// (autograd/fused.h), both returning a Tensor. The others are declared there by hand.
#define PHASOR_DIFFERENTIABLE_FUSED_OPS(X)                                                                      \
  X(rms_norm, (const Tensor& x, const Tensor& weight, double eps))                                             \
  X(swiglu, (const Tensor& gate, const Tensor& up))                                                             \
  X(cross_entropy, (const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100, bool mean = true)) \
  X(rotate, (const Tensor& z, const Tensor& table))

// X(name, Args) for each kernel: from it come the Backend's methods
// (virtual void name(const Args&), tensor/backend.h), the CPU and CUDA
// declarations (tensor/cpu/backend.h, cuda/kernels.h) and the cross-backend
// cases of tests/test_cuda.cpp, which do not compile while an op lacks one.
// Operands are contiguous unless stated, parameters in the (real) dtype of
// the data; the front-ends allocate the outputs (the `out` members) and make
// the layouts so.
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
  X(polar_rotate, PolarRotateArgs)                            \
  X(polar_rotate_backward, PolarRotateBackwardArgs)           \
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
// z [B, N, H, W] real or complex; angle [A, N, H, W] (A = B or 1) and gain
// [H] in z's real dtype; out complex. The backend fills out.dgain's place
// with dgain_columns [N, H, W] instead: each column's Re(conj(u) G) summed
// over the batch, which the front-end sums per head (the same numbers on
// every backend, no atomics).
struct PolarRotateArgs {
  Tensor out, z;
  PolarParams p;
};
struct PolarRotateBackwardArgs {
  PolarGrads out;  // dz like z, dangle like p.angle, dgain [N, H, W] (see above) or undefined
  Tensor grad, z;
  PolarParams p;
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
