// Derivatives of the fused ops: each backward is one hand-written kernel
// (tensor/fused.h; kernels in tensor/cpu/fused.cpp and, for the rotations,
// tensor/cpu/rotation.cpp), with the maths stated there.
//
// Under create_graph (grad mode on during backward) a fused backward instead
// differentiates the op's composed reference path (the *_reference functions
// below, made of autograd ops) at the saved inputs, recorded: the gradient is
// the same, and it has derivatives of every order. A first-order backward
// never takes that path.
#include "autograd/fused.h"

#include <algorithm>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/scalar_math.h"

namespace phasor {

using Grads = std::vector<Tensor>;

namespace {
// A differentiable identity with a node of its own, so that the walk of
// reference_backward can stop there.
Tensor alias(const Tensor& t) {
  return record("alias", t.detach(), {t}, [](const Tensor& g) -> Grads { return {g}; });
}

// The gradients of reference(inputs) seeded with g, recorded (create_graph):
// undefined for inputs that need none.
Grads reference_backward(const std::function<Tensor(const std::vector<Tensor>&)>& reference, std::vector<Tensor> inputs,
                         const Tensor& g) {
  Grads out(inputs.size());
  std::vector<Tensor> wanted;
  std::vector<size_t> at;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      inputs[i] = alias(inputs[i]);
      wanted.push_back(inputs[i]);
      at.push_back(i);
    }
  if (wanted.empty()) return out;
  const Tensor y = reference(inputs);
  if (!y.requires_grad()) return out;
  const Tensor seed = g.dtype() == y.dtype() ? g : to(g, y.dtype());
  const std::vector<Tensor> grads = run_grad({y}, {seed}, wanted, /*retain_graph=*/true, /*create_graph=*/true, /*inputs_are_frontier=*/true);
  for (size_t k = 0; k < at.size(); ++k) out[at[k]] = grads[k];
  return out;
}
bool create_graph() { return GradMode::enabled(); }  // grad mode is on during a backward only under create_graph
}  // namespace

Tensor rms_norm_reference(const Tensor& x, const Tensor& weight, double eps) {
  return x * rsqrt(mean(real(x * conj(x)), {-1}, true) + eps) * weight;
}

Tensor swiglu_reference(const Tensor& gate, const Tensor& up) { return silu(gate) * up; }

Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean) {
  // The rows to count and their (in range) targets, read on the host: targets are int64 ids, not differentiated.
  std::vector<int64_t> ids = ops::to_device(targets, kCPU).to_vector<int64_t>();
  std::vector<uint8_t> ignored(ids.size());
  int64_t count = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    ignored[i] = ids[i] == ignore_index;
    if (ignored[i]) ids[i] = 0;
    else ++count;
  }
  const int64_t rows = static_cast<int64_t>(ids.size());
  const Tensor index = ops::to_device(from_vector(ids, {rows, 1}), logits.device());
  const Tensor mask = ops::to_device(from_vector(std::vector<bool>(ignored.begin(), ignored.end()), {rows, 1}), logits.device());
  const Tensor picked = masked_fill(gather(log_softmax(logits, 1), 1, index), mask, c128(0.0));
  const double scale = mean ? 1.0 / static_cast<double>(std::max<int64_t>(count, 1)) : 1.0;
  return sum(picked) * (-scale);
}

Tensor rotate_reference(const Tensor& z, const Tensor& table) {
  return z * ops::unsqueeze(ops::to(table, z.dtype()), 1);
}

Tensor cmha_rotate_reference(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                             double rope_base, Tensor* r_out, Tensor* phi_out, const Tensor& frequencies) {
  const int64_t n = z.size(1), h = z.size(2), p = z.size(3);
  const Tensor r = sqrt(square(abs(z)) + ops::kEulerEps);  // Euler transform: modulus...
  const Tensor phi = euler_phase(z, ops::kEulerEps);        // ...and phase, with the spec's regularised derivative
  if (r_out) *r_out = r;
  if (phi_out) *phi_out = phi;
  // Relative-position angle m w_j, formed in float64 and rounded once to the
  // working precision, scaled per head by beta.
  std::vector<double> w(static_cast<size_t>(p));
  for (int64_t j = 0; j < p; ++j) w[static_cast<size_t>(j)] = scalar::rope_frequency(rope_base, j, p);
  if (frequencies.defined()) w = frequencies.to_vector<double>();
  std::vector<double> mw(static_cast<size_t>(n * p));
  for (int64_t m = 0; m < n; ++m)
    for (int64_t j = 0; j < p; ++j) mw[m * p + j] = static_cast<double>(offset + m) * w[static_cast<size_t>(j)];
  const Tensor angles = ops::to_device(ops::to(from_vector(mw, {n, 1, p}), real_dtype(z.dtype())), z.device());
  const Tensor position = reshape(beta, {h, 1}) * angles;  // [N, H, P]
  Tensor theta = delta * phi + position;
  if (phase_bias.defined()) theta = theta + phase_bias;
  return polar(r, theta);
}


Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  ops::RmsNormResult r = ops::rms_norm(x, weight, eps);
  return record("rms_norm", r.y, {x, weight},
                [sx = SavedTensor(x), sw = SavedTensor(weight), sr = SavedTensor(r.inv_rms), eps](const Tensor& g) -> Grads {
                  if (create_graph())
                    return reference_backward([eps](const std::vector<Tensor>& in) { return rms_norm_reference(in[0], in[1], eps); },
                                              {sx.get(), sw.get()}, g);
                  ops::RmsNormGrads d = ops::rms_norm_backward(g, sx.get(), sw.get(), sr.get());
                  return {d.dx, d.dweight};
                });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return record("swiglu", ops::swiglu(gate, up), {gate, up}, [sg = SavedTensor(gate), su = SavedTensor(up)](const Tensor& g) -> Grads {
    if (create_graph())
      return reference_backward([](const std::vector<Tensor>& in) { return swiglu_reference(in[0], in[1]); }, {sg.get(), su.get()}, g);
    ops::SwigluGrads d = ops::swiglu_backward(g, sg.get(), su.get());
    return {d.dgate, d.dup};
  });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean) {
  ops::CrossEntropyResult r = ops::cross_entropy(logits, targets, ignore_index, mean);
  const Tensor count = mean ? r.count : Tensor();  // a device scalar: the backward reads nothing on the host
  return record("cross_entropy", r.loss, {logits},
                [sl = SavedTensor(logits), st = SavedTensor(targets), slse = SavedTensor(r.logsumexp), ignore_index,
                 count, mean](const Tensor& g) -> Grads {
                  if (create_graph())
                    return reference_backward([&](const std::vector<Tensor>& in) { return cross_entropy_reference(in[0], st.get(), ignore_index, mean); },
                                              {sl.get()}, g);
                  return {ops::cross_entropy_backward(g, sl.get(), st.get(), slse.get(), ignore_index, count)};
                });
}

// d(z t)/dz = t, so G_z = G conj(t): the same kernel with the conjugate table.
Tensor rotate(const Tensor& z, const Tensor& table) {
  return record("rotate", ops::rotate(z, table, false), {z},
                [st = SavedTensor(table)](const Tensor& g) -> Grads {
                  if (create_graph()) return {rotate_reference(g, ops::unary(ops::Unary::Conj, st.get()))};  // linear in z
                  return {ops::rotate(g, st.get(), true)};
                });
}

Tensor cmha_rotate(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                   double rope_base, const Tensor& frequencies) {
  const ops::CmhaParams params{delta, phase_bias, beta, offset, rope_base, frequencies};
  return record("cmha_rotate", ops::cmha_rotate(z, params), {z, delta, phase_bias, beta},
                [sz = SavedTensor(z), sd = SavedTensor(delta), sp = SavedTensor(phase_bias), sb = SavedTensor(beta), offset,
                 rope_base, frequencies](const Tensor& g) -> Grads {
                  if (create_graph())
                    return reference_backward([&](const std::vector<Tensor>& in) {
                      return cmha_rotate_reference(in[0], in[1], in[2], in[3], offset, rope_base, nullptr, nullptr, frequencies);
                    }, {sz.get(), sd.get(), sp.get(), sb.get()}, g);
                  ops::CmhaGrads d =
                      ops::cmha_rotate_backward(g, sz.get(), {sd.get(), sp.get(), sb.get(), offset, rope_base, frequencies});
                  return {d.dz, d.ddelta, d.dphase_bias, d.dbeta};
                });
}

Tensor polar_rotate_reference(const Tensor& z, const Tensor& angle, const Tensor& gain, ops::PolarMagnitude magnitude,
                              ops::PolarAngle angle_map) {
  const Tensor m = magnitude == ops::PolarMagnitude::Softplus ? softplus(z) : z;
  const Tensor a = angle_map == ops::PolarAngle::Tanh ? tanh(angle) : angle;
  const Tensor out = m * polar(ones(a.shape(), a.dtype(), a.device()), a);
  return gain.defined() ? out * reshape(gain, {1, 1, gain.numel(), 1}) : out;
}

// The kernel takes the angle as [A, N, H, W], A = B or 1: a broadcast angle is
// laid out so (a small copy: no batch), and its gradient summed back.
Tensor polar_rotate(const Tensor& z, const Tensor& angle, const Tensor& gain, ops::PolarMagnitude magnitude, ops::PolarAngle angle_map) {
  PHASOR_CHECK(z.dim() == 4, "polar_rotate: expected z [B, N, H, W], got ", z.shape());
  const bool batched = angle.dim() == 4 && angle.size(0) == z.size(0);
  const Tensor laid = batched ? angle : ops::expand(angle, {1, z.size(1), z.size(2), z.size(3)});
  const ops::PolarParams params{laid, gain, magnitude, angle_map};
  return record("polar_rotate", ops::polar_rotate(z, params), {z, angle, gain},
                [sz = SavedTensor(z), sa = SavedTensor(angle), sg = SavedTensor(gain), laid_shape = laid.shape(), magnitude,
                 angle_map](const Tensor& g) -> Grads {
                  if (create_graph())
                    return reference_backward([&](const std::vector<Tensor>& in) {
                      return polar_rotate_reference(in[0], in[1], in[2], magnitude, angle_map);
                    }, {sz.get(), sa.get(), sg.get()}, g);
                  const Tensor a = sa.get();
                  const Tensor laid_angle = laid_shape == a.shape() ? a : ops::expand(a, laid_shape);
                  ops::PolarGrads d = ops::polar_rotate_backward(g, sz.get(), {laid_angle, sg.get(), magnitude, angle_map});
                  return {d.dz, ops::sum_to(d.dangle, a.shape()), d.dgain};
                });
}

Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes) {
  Tensor probs = ops::attention_softmax(scores, scale, offset, slopes);
  return record("attention_softmax", probs, {scores}, [sp = SavedTensor(probs, SavedTensor::Role::Output), scale](const Tensor& g) -> Grads {
    // Under create_graph, the kernel's formula as autograd ops: it reads only
    // the probabilities (re-linked to this node), so its derivatives follow.
    if (create_graph()) {
      const Tensor p = sp.get();
      return {p * (g - sum(g * p, {-1}, true)) * scale};
    }
    return {ops::attention_softmax_backward(g, sp.get(), scale)};
  });
}

// The backward recomputes the probabilities from q, k, v and the saved
// log-sum-exps (FlashAttention-2): nothing of size Nq x Nk is saved.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset, const Tensor& slopes,
                        const Tensor& distance_bias) {
  const ops::AttentionParams params{scale, offset, slopes, distance_bias};
  ops::AttentionResult r = ops::causal_attention(q, k, v, params);
  return record("causal_attention", r.out, {q, k, v, distance_bias},
                [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), so = SavedTensor(r.out), sl = SavedTensor(r.logsumexp),
                 sb = SavedTensor(distance_bias), scale, offset, slopes](const Tensor& g) -> Grads {
                  if (create_graph())
                    return reference_backward([&](const std::vector<Tensor>& in) {
                      return materialized_attention(in[0], in[1], in[2], scale, offset, slopes, nullptr, in[3]);
                    }, {sq.get(), sk.get(), sv.get(), sb.get()}, g);
                  const ops::AttentionParams p{scale, offset, slopes, sb.get()};
                  ops::AttentionGrads d = ops::causal_attention_backward(g, sq.get(), sk.get(), sv.get(), {so.get(), sl.get()}, p);
                  return {d.dq, d.dk, d.dv, d.ddistance_bias};
                });
}

Tensor causal_attention_in(DType inputs, const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset,
                           const Tensor& slopes, const Tensor& distance_bias) {
  if (inputs == q.dtype()) return causal_attention(q, k, v, scale, offset, slopes, distance_bias);
  const ops::AttentionParams params{scale, offset, slopes, distance_bias};
  const Tensor qs = ops::to(q, inputs), ks = ops::to(k, inputs), vs = ops::to(v, inputs);
  ops::AttentionResult r = ops::causal_attention(qs, ks, vs, params);
  // The gradients come back in the kernels' float32; the engine gives each input its own dtype.
  return record("causal_attention_in", r.out, {q, k, v, distance_bias},
                [qs, ks, vs, so = SavedTensor(r.out), sl = SavedTensor(r.logsumexp), sb = SavedTensor(distance_bias), scale, offset,
                 slopes](const Tensor& g) -> Grads {
                  PHASOR_CHECK(!create_graph(), "causal_attention_in: no second order through mixed precision (create_graph)");
                  const ops::AttentionParams p{scale, offset, slopes, sb.get()};
                  ops::AttentionGrads d = ops::causal_attention_backward(g, qs, ks, vs, {so.get(), sl.get()}, p);
                  return {d.dq, d.dk, d.dv, d.ddistance_bias};
                });
}

// Scores = Re(q' k'^H) = q_real k_real^T over the interleaved layout: one real GEMM per (batch, head).
// A distance bias is gathered into [H, Nq, Nk] (0 where the key is past the query, which the softmax masks).
Tensor materialized_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset, const Tensor& slopes,
                              Tensor* probs, const Tensor& distance_bias) {
  Tensor s = matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
  double softmax_scale = scale;
  if (distance_bias.defined()) {
    const int64_t nq = q.size(1), nk = k.size(1), last = distance_bias.size(1) - 1;
    std::vector<int64_t> bin(static_cast<size_t>(nq * nk));
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t n = 0; n < nk; ++n) bin[static_cast<size_t>(i * nk + n)] = std::clamp<int64_t>(offset + i - n, 0, last);
    const Tensor index = ops::to_device(from_vector(bin), distance_bias.device());
    const Tensor bias = reshape(index_select(distance_bias, 1, index), {distance_bias.size(0), nq, nk});
    s = s * scale + bias;  // scaled here, so the softmax takes scale 1
    softmax_scale = 1.0;
  }
  const Tensor p = attention_softmax(s, softmax_scale, offset, slopes);
  if (probs) *probs = p;
  return permute(matmul(p, permute(v, {0, 2, 1, 3})), {0, 2, 1, 3});
}

}  // namespace phasor
