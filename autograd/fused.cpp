// Derivatives of the fused ops: each backward is one hand-written kernel
// (tensor/fused.h; kernels in tensor/cpu/fused.cpp), with the maths stated there.
#include "autograd/fused.h"

#include "autograd/functions.h"
#include "autograd/node.h"

namespace phasor {

using Grads = std::vector<Tensor>;

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  ops::RmsNormResult r = ops::rms_norm(x, weight, eps);
  return record("rms_norm", r.y, {x, weight},
                [sx = SavedTensor(x), sw = SavedTensor(weight), sr = SavedTensor(r.inv_rms)](const Tensor& g) -> Grads {
                  ops::RmsNormGrads d = ops::rms_norm_backward(g, sx.get(), sw.get(), sr.get());
                  return {d.dx, d.dweight};
                });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return record("swiglu", ops::swiglu(gate, up), {gate, up}, [sg = SavedTensor(gate), su = SavedTensor(up)](const Tensor& g) -> Grads {
    ops::SwigluGrads d = ops::swiglu_backward(g, sg.get(), su.get());
    return {d.dgate, d.dup};
  });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool mean) {
  ops::CrossEntropyResult r = ops::cross_entropy(logits, targets, ignore_index, mean);
  const double scale = mean ? 1.0 / static_cast<double>(std::max<int64_t>(r.count, 1)) : 1.0;
  return record("cross_entropy", r.loss, {logits},
                [sl = SavedTensor(logits), st = SavedTensor(targets), slse = SavedTensor(r.logsumexp), ignore_index,
                 scale](const Tensor& g) -> Grads {
                  return {ops::cross_entropy_backward(g.item<double>(), sl.get(), st.get(), slse.get(), ignore_index, scale)};
                });
}

// d(z t)/dz = t, so G_z = G conj(t): the same kernel with the conjugate table.
Tensor rotate(const Tensor& z, const Tensor& table) {
  return record("rotate", ops::rotate(z, table, false), {z},
                [st = SavedTensor(table)](const Tensor& g) -> Grads { return {ops::rotate(g, st.get(), true)}; });
}

Tensor cmha_rotate(const Tensor& z, const Tensor& delta, const Tensor& phase_bias, const Tensor& beta, int64_t offset,
                   double rope_base) {
  const ops::CmhaParams params{delta, phase_bias, beta, offset, rope_base};
  return record("cmha_rotate", ops::cmha_rotate(z, params), {z, delta, phase_bias, beta},
                [sz = SavedTensor(z), sd = SavedTensor(delta), sp = SavedTensor(phase_bias), sb = SavedTensor(beta), offset,
                 rope_base](const Tensor& g) -> Grads {
                  ops::CmhaGrads d = ops::cmha_rotate_backward(g, sz.get(), {sd.get(), sp.get(), sb.get(), offset, rope_base});
                  return {d.dz, d.ddelta, d.dphase_bias, d.dbeta};
                });
}

Tensor attention_softmax(const Tensor& scores, double scale, int64_t offset, const Tensor& slopes) {
  Tensor probs = ops::attention_softmax(scores, scale, offset, slopes);
  return record("attention_softmax", probs, {scores}, [sp = SavedTensor(probs), scale](const Tensor& g) -> Grads {
    return {ops::attention_softmax_backward(g, sp.get(), scale)};
  });
}

// The backward recomputes the probabilities from q, k, v and the saved
// log-sum-exps (FlashAttention-2): nothing of size Nq x Nk is saved.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset, const Tensor& slopes) {
  const ops::AttentionParams params{scale, offset, slopes};
  ops::AttentionResult r = ops::causal_attention(q, k, v, params);
  return record("causal_attention", r.out, {q, k, v},
                [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), so = SavedTensor(r.out), sl = SavedTensor(r.logsumexp),
                 params](const Tensor& g) -> Grads {
                  ops::AttentionGrads d = ops::causal_attention_backward(g, sq.get(), sk.get(), sv.get(), {so.get(), sl.get()}, params);
                  return {d.dq, d.dk, d.dv};
                });
}

// Scores = Re(q' k'^H) = q_real k_real^T over the interleaved layout: one real GEMM per (batch, head).
Tensor materialized_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t offset, const Tensor& slopes,
                              Tensor* probs) {
  const Tensor s = matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
  const Tensor p = attention_softmax(s, scale, offset, slopes);
  if (probs) *probs = p;
  return permute(matmul(p, permute(v, {0, 2, 1, 3})), {0, 2, 1, 3});
}

}  // namespace phasor
