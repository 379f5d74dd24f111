// Front-ends of the fused causal attention (tensor/attention.h): argument
// checks, output allocation and operand layout, once for every backend.
#include "tensor/attention.h"

#include <algorithm>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor::ops {

namespace {

// `t` on `device` with packed heads and elements ([.., H, d] contiguous); batch
// and row strides are kept, so a narrowed KV cache is read in place.
Tensor packed_heads(const Tensor& t, Device device) {
  const Tensor on = on_device(t, device);
  const bool packed = on.stride(3) == 1 && on.stride(2) == on.size(3);
  return packed ? on : contiguous(on);
}

void check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p) {
  PHASOR_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": expected q [B, Nq, H, d], k [B, Nk, H, d] and v [B, Nk, H, dv], got ",
               q.shape(), ", ", k.shape(), ", ", v.shape());
  PHASOR_CHECK((is_floating(q.dtype()) || q.dtype() == DType::BFloat16) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
               ": q, k and v must share one real floating dtype or bfloat16, got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype());
  const int64_t b = q.size(0), h = q.size(2), d = q.size(3);
  PHASOR_CHECK(k.size(0) == b && k.size(2) == h && k.size(3) == d && v.size(0) == b && v.size(1) == k.size(1) && v.size(2) == h, op, ": k ",
               k.shape(), " and v ", v.shape(), " do not match q ", q.shape(), " in batch, keys, heads and the query/key width");
  PHASOR_CHECK(k.size(1) >= 1 && d >= 1 && v.size(3) >= 1, op, ": needs at least one key and head widths of at least 1, got k ", k.shape(),
               " and v ", v.shape());
  PHASOR_CHECK(p.offset >= 0, op, ": the query offset must be non-negative, got ", p.offset);
  PHASOR_CHECK(!p.slopes.defined() || p.slopes.shape() == Dims({h}), op, ": slopes shape ", p.slopes.shape(), " is not [", h, "]");
  PHASOR_CHECK(!p.distance_bias.defined() || (p.distance_bias.dim() == 2 && p.distance_bias.size(0) == h && p.distance_bias.size(1) >= 2), op,
               ": distance_bias shape ", p.distance_bias.shape(), " is not [", h, ", R + 1] with R >= 1");
}

// The distances a call's scores reach, clamped to the table's last bin R:
// 0 .. min(R, offset + Nq - 1), so min(R + 1, offset + Nq) bins.
int64_t distance_bins(const Tensor& q, const AttentionParams& p) { return std::min(p.distance_bias.size(1), p.offset + q.size(1)); }

// The dtype the kernels accumulate in, and of every result: bfloat16 inputs accumulate in float32.
DType accumulation_dtype(DType inputs) { return inputs == DType::BFloat16 ? DType::Float32 : inputs; }

// The operands of a kernel: the slopes on `device`, in `dtype`, contiguous.
AttentionParams operand(const AttentionParams& p, DType dtype, Device device) {
  const auto as_operand = [&](const Tensor& t) { return t.defined() ? contiguous(to(on_device(t, device), dtype)) : Tensor(); };
  return {p.scale, p.offset, as_operand(p.slopes), as_operand(p.distance_bias)};
}

}  // namespace

AttentionResult causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionParams& p) {
  const Device device = op_device("causal_attention", q_in, {k_in, v_in, p.slopes, p.distance_bias});
  check_inputs("causal_attention", q_in, k_in, v_in, p);
  const Tensor q = packed_heads(q_in, device), k = packed_heads(k_in, device), v = packed_heads(v_in, device);
  const DType t = accumulation_dtype(q.dtype());
  AttentionResult r{empty({q.size(0), q.size(1), q.size(2), v.size(3)}, t, device), empty({q.size(0), q.size(2), q.size(1)}, t, device)};
  backend(device).attention_forward({r, q, k, v, operand(p, t, device)});
  return r;
}

AttentionGrads causal_attention_backward(const Tensor& grad_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                         const AttentionResult& fwd, const AttentionParams& p) {
  const Device device = op_device("causal_attention_backward", grad_in, {q_in, k_in, v_in, fwd.out, fwd.logsumexp, p.slopes, p.distance_bias});
  check_inputs("causal_attention_backward", q_in, k_in, v_in, p);
  const Dims out_shape{q_in.size(0), q_in.size(1), q_in.size(2), v_in.size(3)};
  PHASOR_CHECK(grad_in.shape() == out_shape && fwd.out.shape() == out_shape &&
                   fwd.logsumexp.shape() == Dims({q_in.size(0), q_in.size(2), q_in.size(1)}),
               "causal_attention_backward: gradient ", grad_in.shape(), ", output ", fwd.out.shape(), " and logsumexp ",
               fwd.logsumexp.shape(), " do not match q ", q_in.shape(), " and v ", v_in.shape());
  const Tensor q = packed_heads(q_in, device), k = packed_heads(k_in, device), v = packed_heads(v_in, device);
  const DType t = accumulation_dtype(q.dtype());
  const AttentionResult saved{packed_heads(to(fwd.out, t), device), contiguous(to(on_device(fwd.logsumexp, device), t))};
  AttentionGrads g{empty(q.shape(), t, device), empty(k.shape(), t, device), empty(v.shape(), t, device)};
  if (p.distance_bias.defined()) g.ddistance_bias_rows = zeros({q.size(0), q.size(2), distance_bins(q, p)}, t, device);
  backend(device).attention_backward({g, packed_heads(to(grad_in, t), device), q, k, v, saved, operand(p, t, device)});
  if (p.distance_bias.defined()) {  // the batch rows summed in order; the bins no distance reached stay 0
    g.ddistance_bias = zeros({q.size(2), p.distance_bias.size(1)}, t, device);
    copy_(narrow(g.ddistance_bias, 1, 0, g.ddistance_bias_rows.size(2)), sum(g.ddistance_bias_rows, {0}));
    g.ddistance_bias_rows = Tensor();
  }
  return g;
}

}  // namespace phasor::ops
