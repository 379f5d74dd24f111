// Front-ends of the fused transformer kernels (tensor/fused.h): argument
// checks, output allocation and operand layout, written once for every
// backend; the kernels are in tensor/cpu/fused.cpp and cuda/fused.cu.
#include "tensor/fused.h"

#include <cmath>
#include <limits>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/scalar_math.h"

namespace phasor::ops {

namespace {
// The operand of a kernel: `t` on `device`, in `dtype`, contiguous; undefined stays undefined.
Tensor operand(const Tensor& t, DType dtype, Device device) {
  return t.defined() ? contiguous(to(on_device(t, device), dtype)) : t;
}
Tensor operand(const Tensor& t, Device device) { return t.defined() ? operand(t, t.dtype(), device) : t; }
Dims without_last(Dims shape) {
  shape.erase(shape.size() - 1);
  return shape;
}
}  // namespace

// ---------------------------------------------------------------- RMSNorm

RmsNormResult rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  const Device device = op_device("rms_norm", x_in, {weight});
  PHASOR_CHECK(x_in.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x_in.size(-1), "rms_norm: weight shape ", weight.shape(),
               " does not match the last dim of input ", x_in.shape());
  PHASOR_CHECK(x_in.dtype() == weight.dtype(), "rms_norm: input dtype ", x_in.dtype(), " differs from weight dtype ", weight.dtype());
  PHASOR_CHECK(is_floating(x_in.dtype()), "rms_norm: not defined for dtype ", x_in.dtype(), " (real floating dtypes only)");
  const Tensor x = operand(x_in, device), w = operand(weight, device);
  RmsNormResult r{empty(x.shape(), x.dtype(), device), empty(without_last(x.shape()), x.dtype(), device)};
  backend(device).rms_norm({r, x, w, eps});
  return r;
}

RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x_in, const Tensor& weight, const Tensor& inv_rms) {
  const Device device = op_device("rms_norm_backward", grad, {x_in, weight, inv_rms});
  PHASOR_CHECK(is_floating(x_in.dtype()), "rms_norm_backward: not defined for dtype ", x_in.dtype(), " (real floating dtypes only)");
  PHASOR_CHECK(grad.shape() == x_in.shape(), "rms_norm_backward: gradient shape ", grad.shape(), " differs from input shape ", x_in.shape());
  const Tensor x = operand(x_in, device), w = operand(weight, device);
  RmsNormGrads out{empty(x.shape(), x.dtype(), device), empty(w.shape(), w.dtype(), device)};
  backend(device).rms_norm_backward({out, operand(grad, x.dtype(), device), x, w, operand(inv_rms, x.dtype(), device)});
  return out;
}

// ---------------------------------------------------------------- SwiGLU

namespace {
void check_swiglu(const char* op, const Tensor& gate, const Tensor& up) {
  PHASOR_CHECK(gate.shape() == up.shape(), op, ": gate shape ", gate.shape(), " differs from up shape ", up.shape());
  PHASOR_CHECK(gate.dtype() == up.dtype(), op, ": gate dtype ", gate.dtype(), " differs from up dtype ", up.dtype());
  PHASOR_CHECK(is_floating(gate.dtype()), op, ": not defined for dtype ", gate.dtype(), " (real floating dtypes only)");
}
}  // namespace

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  const Device device = op_device("swiglu", gate_in, {up_in});
  check_swiglu("swiglu", gate_in, up_in);
  const Tensor gate = operand(gate_in, device), up = operand(up_in, device);
  Tensor out = empty(gate.shape(), gate.dtype(), device);
  backend(device).swiglu({out, gate, up});
  return out;
}

SwigluGrads swiglu_backward(const Tensor& grad, const Tensor& gate_in, const Tensor& up_in) {
  const Device device = op_device("swiglu_backward", grad, {gate_in, up_in});
  check_swiglu("swiglu_backward", gate_in, up_in);
  PHASOR_CHECK(grad.shape() == gate_in.shape(), "swiglu_backward: gradient shape ", grad.shape(), " differs from ", gate_in.shape());
  const Tensor gate = operand(gate_in, device), up = operand(up_in, device);
  SwigluGrads out{empty(gate.shape(), gate.dtype(), device), empty(gate.shape(), gate.dtype(), device)};
  backend(device).swiglu_backward({out, operand(grad, gate.dtype(), device), gate, up});
  return out;
}

// ---------------------------------------------------------------- cross-entropy

CrossEntropyResult cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index, bool mean) {
  const Device device = op_device("cross_entropy", logits_in, {targets_in});
  PHASOR_CHECK(logits_in.dim() == 2, "cross_entropy: logits must be [rows, classes], got ", logits_in.shape());
  PHASOR_CHECK(targets_in.dtype() == DType::Int64 && targets_in.dim() == 1 && targets_in.size(0) == logits_in.size(0),
               "cross_entropy: targets must be int64 [", logits_in.size(0), "], got ", targets_in.dtype(), " ", targets_in.shape());
  PHASOR_CHECK(is_floating(logits_in.dtype()), "cross_entropy: not defined for dtype ", logits_in.dtype(), " (real floating dtypes only)");
  const Tensor logits = operand(logits_in, device);
  // The backend checks the targets (each a class in [0, classes) or
  // ignore_index: a GPU reports a bad one at its next synchronisation), counts
  // them into r.count, and writes the mean over no counted row (no rows, or
  // every target ignored) as 0/0, as PyTorch does.
  CrossEntropyResult r{empty({}, logits.dtype(), device), empty({logits.size(0)}, logits.dtype(), device), empty({}, DType::Float64, device)};
  backend(device).cross_entropy({r, logits, operand(targets_in, device), ignore_index, mean});
  return r;
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits_in, const Tensor& targets_in, const Tensor& logsumexp,
                              int64_t ignore_index, const Tensor& count) {
  const Device device = op_device("cross_entropy_backward", logits_in, {targets_in, logsumexp});
  PHASOR_CHECK(is_floating(logits_in.dtype()), "cross_entropy_backward: not defined for dtype ", logits_in.dtype());
  PHASOR_CHECK(grad.numel() == 1 && (!count.defined() || count.numel() == 1), "cross_entropy_backward: grad and count must be scalars");
  const Tensor logits = operand(logits_in, device);
  Tensor d = empty(logits.shape(), logits.dtype(), device);
  // float64 holds any grad exactly (the old host read's item<double>())
  backend(device).cross_entropy_backward({d, operand(grad, DType::Float64, device),
                                          count.defined() ? operand(count, DType::Float64, device) : Tensor(), logits,
                                          operand(targets_in, device), operand(logsumexp, logits.dtype(), device), ignore_index});
  return d;
}

// ---------------------------------------------------------------- rotary

Tensor rotary_table(int64_t n, int64_t pairs, int64_t offset, double base, double xpos_scale_base, int xpos_sign, DType dtype,
                    int64_t xpos_origin) {
  std::vector<double> w(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j) w[static_cast<size_t>(j)] = scalar::rope_frequency(base, j, pairs);
  return rotary_table(n, w, offset, xpos_scale_base, xpos_sign, dtype, xpos_origin);
}

Tensor rotary_table(int64_t n, const std::vector<double>& frequencies, int64_t offset, double xpos_scale_base, int xpos_sign, DType dtype,
                    int64_t xpos_origin) {
  PHASOR_CHECK(is_complex(dtype), "rotary_table: dtype must be complex, got ", dtype);
  const int64_t pairs = static_cast<int64_t>(frequencies.size());
  Tensor table = empty({n, pairs}, dtype);
  const double d = 2.0 * static_cast<double>(pairs);
  dispatch_inexact(dtype, "rotary_table", [&]<class C>() {
    if constexpr (is_complex_v<C>) {
      using R = real_of<C>;
      C* p = table.data<C>();
      for (int64_t m = 0; m < n; ++m) {
        const double pos = static_cast<double>(offset + m);
        for (int64_t j = 0; j < pairs; ++j) {
          const double w = frequencies[static_cast<size_t>(j)];
          double scale = 1.0;
          if (xpos_scale_base > 0) {
            const double zeta = (2.0 * static_cast<double>(j) + 0.4 * d) / (1.4 * d);
            scale = std::pow(zeta, xpos_sign * (pos - static_cast<double>(xpos_origin)) / xpos_scale_base);
          }
          p[m * pairs + j] = C(static_cast<R>(scale * std::cos(pos * w)), static_cast<R>(scale * std::sin(pos * w)));
        }
      }
    }
  });
  return table;
}

Tensor rotate(const Tensor& z_in, const Tensor& table_in, bool conjugate_table) {
  const Device device = op_device("rotate", z_in, {table_in});
  PHASOR_CHECK(z_in.is_complex() && z_in.dim() == 4, "rotate: expected complex [B, N, H, P], got ", z_in.dtype(), " ", z_in.shape());
  PHASOR_CHECK(table_in.dim() == 2 && table_in.size(0) == z_in.size(1) && table_in.size(1) == z_in.size(3),
               "rotate: table shape ", table_in.shape(), " does not match [N, P] of ", z_in.shape());
  const Tensor z = operand(z_in, device);
  Tensor out = empty(z.shape(), z.dtype(), device);
  backend(device).rotate({out, z, operand(table_in, z.dtype(), device), conjugate_table});
  return out;
}

// ---------------------------------------------------------------- ComplexFormer rotation

namespace {
void check_cmha(const Tensor& z, const CmhaParams& p) {
  PHASOR_CHECK(z.is_complex() && z.dim() == 4, "cmha_rotate: expected complex [B, N, H, P], got ", z.dtype(), " ", z.shape());
  const int64_t h = z.size(2), pairs = z.size(3);
  PHASOR_CHECK(p.delta.shape() == Dims({h, pairs}), "cmha_rotate: delta shape ", p.delta.shape(), " is not [H, P] = [", h, ", ", pairs, "]");
  PHASOR_CHECK(!p.phase_bias.defined() || p.phase_bias.shape() == Dims({h, pairs}), "cmha_rotate: phase_bias shape ",
               p.phase_bias.shape(), " is not [", h, ", ", pairs, "]");
  PHASOR_CHECK(p.beta.shape() == Dims({h}), "cmha_rotate: beta shape ", p.beta.shape(), " is not [", h, "]");
  PHASOR_CHECK(!p.frequencies.defined() || (p.frequencies.shape() == Dims({pairs}) && p.frequencies.dtype() == DType::Float64),
               "cmha_rotate: frequencies must be float64 [P] = [", pairs, "], got ", p.frequencies.dtype(), " ", p.frequencies.shape());
}

// The parameters as contiguous arrays in the real dtype of z, on its device.
CmhaParams operand_params(const Tensor& z, const CmhaParams& p, Device device) {
  const DType rt = real_dtype(z.dtype());
  CmhaParams q = p;
  q.delta = operand(p.delta, rt, device);
  q.phase_bias = operand(p.phase_bias, rt, device);
  q.beta = operand(p.beta, rt, device);
  q.frequencies = operand(p.frequencies, device);
  return q;
}
}  // namespace

Tensor cmha_rotate(const Tensor& z_in, const CmhaParams& p) {
  const Device device = op_device("cmha_rotate", z_in, {p.delta, p.phase_bias, p.beta, p.frequencies});
  check_cmha(z_in, p);
  const Tensor z = operand(z_in, device);
  Tensor out = empty(z.shape(), z.dtype(), device);
  backend(device).cmha_rotate({out, z, operand_params(z, p, device)});
  return out;
}

CmhaGrads cmha_rotate_backward(const Tensor& grad, const Tensor& z_in, const CmhaParams& p) {
  const Device device = op_device("cmha_rotate_backward", grad, {z_in, p.delta, p.phase_bias, p.beta, p.frequencies});
  check_cmha(z_in, p);
  PHASOR_CHECK(grad.shape() == z_in.shape(), "cmha_rotate_backward: gradient shape ", grad.shape(), " differs from ", z_in.shape());
  const Tensor z = operand(z_in, device);
  const int64_t h = z.size(2), pairs = z.size(3);
  const DType rt = real_dtype(z.dtype());
  CmhaGrads out{empty(z.shape(), z.dtype(), device), empty({h, pairs}, rt, device),
                p.phase_bias.defined() ? empty({h, pairs}, rt, device) : Tensor(), empty({h}, rt, device)};
  backend(device).cmha_rotate_backward({out, operand(grad, z.dtype(), device), z, operand_params(z, p, device)});
  return out;
}

// ---------------------------------------------------------------- polar rotation

namespace {
void check_polar(const char* op, const Tensor& z, const PolarParams& p) {
  PHASOR_CHECK(is_inexact(z.dtype()) && z.dim() == 4, op, ": expected z [B, N, H, W] of a floating or complex dtype, got ", z.dtype(), " ",
               z.shape());
  const int64_t b = z.size(0), n = z.size(1), h = z.size(2), w = z.size(3);
  PHASOR_CHECK(p.angle.defined() && is_floating(p.angle.dtype()) && p.angle.dim() == 4 && (p.angle.size(0) == b || p.angle.size(0) == 1) &&
                   p.angle.size(1) == n && p.angle.size(2) == h && p.angle.size(3) == w,
               op, ": angle must be real [B or 1, N, H, W] = [", b, " or 1, ", n, ", ", h, ", ", w, "], got ",
               p.angle.defined() ? dtype_name(p.angle.dtype()) : "undefined", " ", p.angle.defined() ? p.angle.shape() : Dims{});
  PHASOR_CHECK(!p.gain.defined() || (is_floating(p.gain.dtype()) && p.gain.shape() == Dims({h})), op, ": gain must be real [H] = [", h,
               "], got ", p.gain.dtype(), " ", p.gain.shape());
  PHASOR_CHECK(p.magnitude == PolarMagnitude::Identity || !z.is_complex(), op, ": a softplus magnitude needs a real z, got ", z.dtype());
}

// The angle and gain as contiguous arrays in the real dtype of z, on its device.
PolarParams operand_params(const Tensor& z, const PolarParams& p, Device device) {
  const DType rt = real_dtype(z.dtype());
  PolarParams q = p;
  q.angle = operand(p.angle, rt, device);
  q.gain = operand(p.gain, rt, device);
  return q;
}
}  // namespace

Tensor polar_rotate(const Tensor& z_in, const PolarParams& p) {
  const Device device = op_device("polar_rotate", z_in, {p.angle, p.gain});
  check_polar("polar_rotate", z_in, p);
  const Tensor z = operand(z_in, device);
  Tensor out = empty(z.shape(), complex_dtype(z.dtype()), device);
  backend(device).polar_rotate({out, z, operand_params(z, p, device)});
  return out;
}

PolarGrads polar_rotate_backward(const Tensor& grad, const Tensor& z_in, const PolarParams& p) {
  const Device device = op_device("polar_rotate_backward", grad, {z_in, p.angle, p.gain});
  check_polar("polar_rotate_backward", z_in, p);
  PHASOR_CHECK(grad.shape() == z_in.shape(), "polar_rotate_backward: gradient shape ", grad.shape(), " differs from ", z_in.shape());
  const Tensor z = operand(z_in, device);
  const DType rt = real_dtype(z.dtype());
  const int64_t n = z.size(1), h = z.size(2), w = z.size(3);
  PolarGrads out{empty(z.shape(), z.dtype(), device), empty(p.angle.shape(), rt, device), p.gain.defined() ? empty({n, h, w}, rt, device) : Tensor()};
  backend(device).polar_rotate_backward({out, operand(grad, complex_dtype(z.dtype()), device), z, operand_params(z, p, device)});
  if (out.dgain.defined()) out.dgain = sum(out.dgain, {0, 2});  // the columns' sums, per head, in one fixed order
  return out;
}

// ---------------------------------------------------------------- attention softmax

Tensor attention_softmax(const Tensor& scores_in, double scale, int64_t offset, const Tensor& slopes_in) {
  const Device device = op_device("attention_softmax", scores_in, {slopes_in});
  PHASOR_CHECK(scores_in.dim() == 4, "attention_softmax: expected scores [B, H, Nq, Nk], got ", scores_in.shape());
  PHASOR_CHECK(is_floating(scores_in.dtype()), "attention_softmax: not defined for dtype ", scores_in.dtype(), " (real floating dtypes only)");
  const int64_t h = scores_in.size(1);
  PHASOR_CHECK(!slopes_in.defined() || slopes_in.shape() == Dims({h}), "attention_softmax: slopes shape ", slopes_in.shape(),
               " is not [", h, "]");
  const Tensor scores = operand(scores_in, device);
  Tensor probs = empty(scores.shape(), scores.dtype(), device);
  backend(device).attention_softmax({probs, scores, operand(slopes_in, scores.dtype(), device), scale, offset});
  return probs;
}

Tensor attention_softmax_backward(const Tensor& grad_in, const Tensor& probs_in, double scale) {
  const Device device = op_device("attention_softmax_backward", grad_in, {probs_in});
  PHASOR_CHECK(grad_in.shape() == probs_in.shape(), "attention_softmax_backward: gradient shape ", grad_in.shape(), " differs from ",
               probs_in.shape());
  PHASOR_CHECK(is_floating(probs_in.dtype()), "attention_softmax_backward: not defined for dtype ", probs_in.dtype());
  const Tensor probs = operand(probs_in, device);
  Tensor d = empty(probs.shape(), probs.dtype(), device);
  backend(device).attention_softmax_backward({d, operand(grad_in, probs.dtype(), device), probs, scale});
  return d;
}

// ---------------------------------------------------------------- AdamW

void adamw_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const AdamWStep& step) {
  const Device device = op_device("AdamW", param, {grad, exp_avg, exp_avg_sq});
  PHASOR_CHECK(param.is_contiguous() && exp_avg.is_contiguous() && exp_avg_sq.is_contiguous(),
               "AdamW: parameter and optimizer state must be contiguous");
  PHASOR_CHECK(is_floating(param.dtype()), "AdamW: not defined for dtype ", param.dtype(), " (pass complex tensors as their real views)");
  PHASOR_CHECK(grad.numel() == param.numel() && exp_avg.numel() == param.numel() && exp_avg_sq.numel() == param.numel(),
               "AdamW: gradient or state of shape ", grad.shape(), " does not match parameter shape ", param.shape());
  AdamWStep taken = step;
  if (step.schedule.defined()) {
    PHASOR_CHECK(step.schedule.device() == device && step.schedule.dtype() == DType::Float64 &&
                     (step.schedule.numel() == 3 || step.schedule.numel() == 4) && step.schedule.is_contiguous(),
                 "AdamW: the step's schedule must be a contiguous float64 tensor of 3 or 4 elements on the parameter's device, got ",
                 step.schedule.dtype(), " ", step.schedule.shape(), " on ", step.schedule.device());
    // The learning rate's factor: a GPU's kernel reads it on the device; on the CPU it is at hand.
    if (step.schedule.numel() == 4 && device.is_cpu()) taken.lr *= step.schedule.data<double>()[3];
  }
  backend(device).adamw_step({param, operand(grad, param.dtype(), device), exp_avg, exp_avg_sq, taken});
  param.storage()->bump_version();
}

}  // namespace phasor::ops
