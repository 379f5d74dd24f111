// The rivals of ComplexFormer and what stretches a trained model's context
// (docs/spec.md, "carope" and "Context extension and the angle warm-up"):
// each formula against an independent computation, carope's rotation against
// its definition, and the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/rotary_scaling.h"
#include "models/transformer.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

ModelConfig small_config(Position position) {
  return model_config(position, {.d_model = 32, .n_layers = 2, .n_heads = 4, .d_ff = 64, .max_seq_len = 64});
}

Tensor random_tokens(int64_t b, int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> ids(static_cast<size_t>(b * n));
  for (auto& t : ids) t = static_cast<int64_t>(g.next_u64() % 256);
  return from_vector(ids, {b, n});
}

PositionScaling scaling(RopeScaling method, double factor, int64_t original_length = 0) {
  PositionScaling s;
  s.method = method;
  s.factor = factor;
  s.original_length = original_length;
  return s;
}

// The largest |a - b| relative to the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("context extension: pi, ntk and yarn frequencies follow their definitions") {
  const double base = 10000.0;
  const int64_t K = 16;
  const std::vector<double> plain = scaled_frequencies(base, K, {});
  for (int64_t k = 0; k < K; ++k) CHECK(plain[k] == doctest::Approx(std::pow(base, -static_cast<double>(k) / K)).epsilon(1e-15));

  // pi: every frequency divided by S.
  const std::vector<double> pi = scaled_frequencies(base, K, scaling(RopeScaling::PI, 4.0));
  for (int64_t k = 0; k < K; ++k) CHECK(pi[k] == doctest::Approx(plain[k] / 4.0).epsilon(1e-15));

  // ntk: w_0 = 1 kept, the lowest frequency divided by S, a geometric series between.
  const std::vector<double> ntk = scaled_frequencies(base, K, scaling(RopeScaling::NTK, 4.0));
  CHECK(ntk[0] == 1.0);
  CHECK(ntk[K - 1] == doctest::Approx(plain[K - 1] / 4.0).epsilon(1e-13));
  for (int64_t k = 1; k < K; ++k) CHECK(ntk[k] / ntk[k - 1] == doctest::Approx(ntk[1]).epsilon(1e-13));
  // One frequency: ntk divides it by S, as pi does.
  CHECK(scaled_frequencies(base, 1, scaling(RopeScaling::NTK, 3.0))[0] == doctest::Approx(1.0 / 3.0).epsilon(1e-15));

  // yarn at L = 128, S = 8: a frequency turning more than 32 times in L is kept,
  // one turning less than once is divided by S, one between is blended.
  const PositionScaling y = scaling(RopeScaling::YaRN, 8.0, 128);
  const std::vector<double> yarn = scaled_frequencies(base, K, y);
  for (int64_t k = 0; k < K; ++k) {
    const double turns = 128.0 * plain[k] / (2 * M_PI);
    double expected = plain[k] / 8.0;                                        // turns <= 1
    if (turns >= 32.0) expected = plain[k];                                   // turns >= 32
    else if (turns > 1.0) expected = plain[k] / 8.0 + (turns - 1.0) / 31.0 * (plain[k] - plain[k] / 8.0);
    CAPTURE(k);
    CHECK(yarn[k] == doctest::Approx(expected).epsilon(1e-13));
  }
  // w_0 = 1 turns 128 / (2 pi) = 20.4 times in L: blended, between w_0 / S and w_0.
  CHECK(yarn[0] > plain[0] / 8.0);
  CHECK(yarn[0] < plain[0]);
  CHECK(yarn[K - 1] == doctest::Approx(plain[K - 1] / 8.0).epsilon(1e-15));
  // The logits: (0.1 ln S + 1)^2 for yarn, 1 for the rest.
  CHECK(logit_factor(y) == doctest::Approx(std::pow(0.1 * std::log(8.0) + 1.0, 2)).epsilon(1e-15));
  CHECK(logit_factor(scaling(RopeScaling::PI, 8.0)) == 1.0);

  // The warm-up multiplies whatever the method gives.
  PositionScaling warm = scaling(RopeScaling::PI, 2.0);
  warm.warmup = 0.25;
  const std::vector<double> w = scaled_frequencies(base, K, warm);
  for (int64_t k = 0; k < K; ++k) CHECK(w[k] == doctest::Approx(plain[k] / 8.0).epsilon(1e-15));
}

TEST_CASE("context extension: a scaled rope model turns pair j of position m by m w'_j") {
  ModelConfig c = small_config(Position::Rope);
  const int64_t n = 12, pairs = c.pairs();
  const PositionScaling s = scaling(RopeScaling::YaRN, 4.0, 8);
  const std::vector<double> w = scaled_frequencies(c.rope_base, pairs, s);
  const Tensor table = ops::rotary_table(n, w, 3, 0.0, +1, DType::Complex128);
  const auto values = table.to_vector<std::complex<double>>();
  for (int64_t m = 0; m < n; ++m)
    for (int64_t j = 0; j < pairs; ++j) {
      const std::complex<double> expected = std::polar(1.0, static_cast<double>(m + 3) * w[j]);
      CHECK(std::abs(values[m * pairs + j] - expected) < 1e-15);
    }
}

TEST_CASE("context extension: no scaling changes nothing, bit for bit, for every rotary variant") {
  for (Position p : {Position::Rope, Position::XPos, Position::ComplexFormer, Position::CARoPE}) {
    CAPTURE(p);
    const ModelConfig c = small_config(p);
    CausalLM plain(c, 5), reset(c, 5);
    reset.set_position_scaling(scaling(RopeScaling::None, 1.0, 128));  // a recorded length alone changes no number
    const Tensor tokens = random_tokens(2, 16, 3);
    CHECK(plain.forward(tokens).to_vector<float>() == reset.forward(tokens).to_vector<float>());
  }
}

TEST_CASE("context extension: complexformer's fused and composed rotations agree under pi, ntk and yarn") {
  ModelConfig c = small_config(Position::ComplexFormer);
  c.cmha_init = CmhaInit::Paper;
  for (RopeScaling method : {RopeScaling::PI, RopeScaling::NTK, RopeScaling::YaRN}) {
    CAPTURE(rope_scaling_name(method));
    CausalLM fused(c, 2), composed(c, 2), plain(c, 2);
    fused.set_position_scaling(scaling(method, 4.0, 16));
    composed.set_position_scaling(scaling(method, 4.0, 16));
    composed.set_rotation(RotationImpl::Composed);
    const Tensor tokens = random_tokens(2, 24, 9);
    const auto f = fused.forward(tokens).to_vector<float>(), k = composed.forward(tokens).to_vector<float>();
    CHECK(relative_difference(f, k) < 1e-5);
    CHECK(relative_difference(f, plain.forward(tokens).to_vector<float>()) > 1e-4);  // the scaling does change the model
  }
}

TEST_CASE("context extension: cmha_rotate with the plain frequencies given is cmha_rotate without them") {
  Generator g(11);
  const Tensor z = randn({2, 5, 3, 4}, DType::Complex64, &g);
  const Tensor delta = normal({3, 4}, 1.0, 0.5, DType::Float32, &g), bias = randn({3, 4}, DType::Float32, &g);
  const Tensor beta = normal({3}, 1.0, 0.3, DType::Float32, &g);
  std::vector<double> w(4);
  for (int64_t j = 0; j < 4; ++j) w[j] = std::pow(10000.0, -2.0 * static_cast<double>(j) / 8.0);
  const Tensor given = cmha_rotate(z, delta, bias, beta, 7, 10000.0, from_vector(w));
  CHECK(given.to_vector<std::complex<float>>() == cmha_rotate(z, delta, bias, beta, 7, 10000.0).to_vector<std::complex<float>>());
}

TEST_CASE("cmha_rotate with given frequencies passes gradcheck in float64") {
  Generator g(3);
  const Tensor z = randn({2, 5, 3, 4}, DType::Complex128, &g).requires_grad_();
  const Tensor delta = normal({3, 4}, 1.0, 0.5, DType::Float64, &g).requires_grad_();
  const Tensor bias = randn({3, 4}, DType::Float64, &g).requires_grad_();
  const Tensor beta = normal({3}, 1.0, 0.3, DType::Float64, &g).requires_grad_();
  const Tensor w = from_vector<double>({0.9, 0.3, 0.07, 0.01});
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return cmha_rotate(in[0], in[1], in[2], in[3], 7, 10000.0, w); },
                     {z, delta, bias, beta}, {1e-6, 1e-6, 1e-5});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("context extension: yarn multiplies the attention logits by (0.1 ln S + 1)^2") {
  // At L = 1 no frequency turns once in L, so yarn's frequencies are pi's (w / S)
  // and the logit factor t is the only difference; queries scaled by t (wq
  // times t) give a pi model the same logits.
  const ModelConfig c = small_config(Position::Rope);
  const double S = 4.0, t = std::pow(0.1 * std::log(S) + 1.0, 2);
  CHECK(scaled_frequencies(c.rope_base, c.pairs(), scaling(RopeScaling::YaRN, S, 1)) ==
        scaled_frequencies(c.rope_base, c.pairs(), scaling(RopeScaling::PI, S)));
  CausalLM yarn(c, 4), pi(c, 4);
  yarn.set_position_scaling(scaling(RopeScaling::YaRN, S, 1));
  pi.set_position_scaling(scaling(RopeScaling::PI, S));
  {
    const NoGradGuard no_grad;
    for (auto& layer : pi.layers) ops::copy_(layer->attn->wq->weight, layer->attn->wq->weight * t);
  }
  const Tensor tokens = random_tokens(2, 16, 6);
  const auto y = yarn.forward(tokens).to_vector<float>(), p = pi.forward(tokens).to_vector<float>();
  CHECK(relative_difference(y, p) < 1e-5);
  CHECK(relative_difference(y, CausalLM(c, 4).forward(tokens).to_vector<float>()) > 1e-4);
}

TEST_CASE("context extension: what a variant cannot take is refused with one line") {
  const auto refused = [](Position p, PositionScaling s, const std::string& message) {
    CausalLM model(small_config(p), 1);
    CHECK_THROWS_WITH_AS(model.set_position_scaling(s), doctest::Contains(message.c_str()), Error);
  };
  refused(Position::Alibi, scaling(RopeScaling::PI, 2.0), "--rope-scaling pi does not apply to a 'alibi' model");
  refused(Position::CARoPE, scaling(RopeScaling::NTK, 2.0), "--rope-scaling ntk does not apply to a 'carope' model");
  refused(Position::CARoPE, scaling(RopeScaling::YaRN, 2.0, 64), "--rope-scaling yarn does not apply to a 'carope' model");
  refused(Position::Rope, scaling(RopeScaling::YaRN, 2.0), "--rope-scaling yarn needs the length the model was trained at");
  refused(Position::Rope, scaling(RopeScaling::PI, 0.5), "--rope-factor must be a number in [1, 1e6], got 0.5");
  PositionScaling warm;
  warm.warmup = 0.5;
  refused(Position::None, warm, "--angle-warmup applies to the variants whose positions are rotary phases");
  CHECK_THROWS_WITH_AS(parse_rope_scaling("linear"), "--rope-scaling must be none, pi, ntk or yarn, got 'linear'", Error);
  CHECK_THROWS_WITH_AS(position_scaling_from_json(nlohmann::json{{"method", "pi"}, {"bogus", 1}}), "position_scaling: unknown key 'bogus'",
                       Error);
}

TEST_CASE("carope: the rotation is the spec's, f = 1 / (1 + softplus(w . x)) and phi = running sums of f^j") {
  ModelConfig c = small_config(Position::CARoPE);
  c.d_model = 8;
  c.n_heads = 2;  // d = 4: P = 2 pairs
  const auto scheme = make_position_scheme(c);
  Generator g(7);
  const int64_t b = 1, n = 5, h = 2, p = 2, D = 8;
  const Tensor x = randn({b, n, D}, DType::Float64, &g);
  const Tensor w = randn({h, D}, DType::Float64, &g);
  const Tensor q = randn({b, n, h, p}, DType::Complex128, &g), k = randn({b, n, h, p}, DType::Complex128, &g);
  const std::vector<Tensor> params = {w};
  RotationArgs args;
  args.parameters = &params;
  args.input = &x;
  const auto [qr, kr] = scheme->rotate(q, k, args);
  const auto xs = x.to_vector<double>(), ws = w.to_vector<double>();
  const auto qs = q.to_vector<std::complex<double>>(), out = qr.to_vector<std::complex<double>>();
  for (int64_t hi = 0; hi < h; ++hi) {
    std::vector<double> phi(static_cast<size_t>(p), 0.0);
    for (int64_t m = 0; m < n; ++m) {
      double u = 0;
      for (int64_t e = 0; e < D; ++e) u += ws[hi * D + e] * xs[m * D + e];
      const double f = 1.0 / (1.0 + std::log1p(std::exp(u)));
      for (int64_t j = 0; j < p; ++j) {
        phi[j] += std::pow(f, static_cast<double>(j));
        const size_t i = static_cast<size_t>((m * h + hi) * p + j);
        CAPTURE(m);
        CAPTURE(j);
        CHECK(std::abs(out[i] - qs[i] * std::polar(1.0, phi[j])) < 1e-12);
      }
    }
  }
  (void)kr;
}

TEST_CASE("carope: the rotation passes gradcheck in float64 (queries, keys, carope_w and the input)") {
  ModelConfig c = small_config(Position::CARoPE);
  c.d_model = 8;
  c.n_heads = 2;
  const auto scheme = make_position_scheme(c);
  Generator g(8);
  const Tensor x = randn({2, 6, 8}, DType::Float64, &g).requires_grad_();
  const Tensor w = normal({2, 8}, 0.0, 0.5, DType::Float64, &g).requires_grad_();
  const Tensor q = randn({2, 6, 2, 2}, DType::Complex128, &g).requires_grad_(), k = randn({2, 6, 2, 2}, DType::Complex128, &g).requires_grad_();
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const std::vector<Tensor> params = {in[3]};
        RotationArgs args;
        args.parameters = &params;
        args.input = &in[2];
        const auto [qr, kr] = scheme->rotate(in[0], in[1], args);
        return cat({qr, kr}, 1);
      },
      {q, k, x, w});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("carope: pi divides the accumulated phase by S, and a cache carries the sums from chunk to chunk") {
  const ModelConfig c = small_config(Position::CARoPE);
  CausalLM model(c, 3), stretched(c, 3);
  stretched.set_position_scaling(scaling(RopeScaling::PI, 2.0));
  const Tensor tokens = random_tokens(1, 20, 4);
  const auto full = model.forward(tokens).to_vector<float>();
  CHECK(relative_difference(stretched.forward(tokens).to_vector<float>(), full) > 1e-4);
  // Three chunks through a cache give the full forward's logits.
  KVCache cache = model.make_cache(1, 20);
  std::vector<float> chunked;
  for (auto [start, length] : {std::pair<int64_t, int64_t>{0, 7}, {7, 1}, {8, 12}}) {
    const auto part = model.forward(ops::contiguous(ops::narrow(tokens, 1, start, length)), &cache).to_vector<float>();
    chunked.insert(chunked.end(), part.begin(), part.end());
  }
  CHECK(relative_difference(chunked, full) < 1e-5);
}

TEST_CASE("fused attention takes a value width other than the query/key width: values and gradients match the materialised path") {
  Generator g(12);
  for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{70, 70, 0}, {5, 75, 70}}) {
    const int64_t nq = std::get<0>(shape), nk = std::get<1>(shape), offset = std::get<2>(shape);  // not bindings: clang 14 refuses them in CAPTURE's lambda
    CAPTURE(nq);
    const Tensor q = randn({2, nq, 3, 10}, DType::Float64, &g).requires_grad_();
    const Tensor k = randn({2, nk, 3, 10}, DType::Float64, &g).requires_grad_();
    const Tensor v = randn({2, nk, 3, 4}, DType::Float64, &g).requires_grad_();
    const Tensor fused = causal_attention(q, k, v, 0.3, offset);
    REQUIRE(fused.shape() == Dims{2, nq, 3, 4});
    const Tensor reference = materialized_attention(q, k, v, 0.3, offset);
    const auto f = fused.to_vector<double>(), r = reference.to_vector<double>();
    for (size_t i = 0; i < f.size(); ++i) CHECK(f[i] == doctest::Approx(r[i]).epsilon(1e-12).scale(1.0));
  }
  const Tensor q = randn({1, 9, 2, 6}, DType::Float64, &g).requires_grad_();
  const Tensor k = randn({1, 9, 2, 6}, DType::Float64, &g).requires_grad_();
  const Tensor v = randn({1, 9, 2, 3}, DType::Float64, &g).requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], 0.4); }, {q, k, v});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("pope: the scores are sum_c softplus(q_c) softplus(k_c) cos((m - n) theta_c + pope_bias_c), any head width") {
  ModelConfig c = small_config(Position::PoPE);
  c.d_model = 10;
  c.n_heads = 2;  // d = 5: odd, no pairs
  c.validate();
  const auto scheme = make_position_scheme(c);
  Generator g(13);
  const int64_t n = 6, h = 2, d = 5;
  const Tensor q = randn({1, n, h, d}, DType::Float64, &g), k = randn({1, n, h, d}, DType::Float64, &g);
  const Tensor bias = randn({h, d}, DType::Float64, &g);
  const std::vector<Tensor> params = {bias};
  RotationArgs args;
  args.parameters = &params;
  args.offset = 3;
  const auto [qr, kr] = scheme->rotate(q, k, args);
  const auto qz = qr.to_vector<std::complex<double>>(), kz = kr.to_vector<std::complex<double>>();
  const auto qs = q.to_vector<double>(), ks = k.to_vector<double>(), bs = bias.to_vector<double>();
  const auto sp = [](double x) { return std::log1p(std::exp(x)); };
  for (int64_t hi = 0; hi < h; ++hi)
    for (int64_t m = 0; m < n; ++m)
      for (int64_t t = 0; t <= m; ++t) {
        std::complex<double> dot = 0;
        double expected = 0;
        for (int64_t e = 0; e < d; ++e) {
          const size_t qi = static_cast<size_t>((m * h + hi) * d + e), ki = static_cast<size_t>((t * h + hi) * d + e);
          dot += qz[qi] * std::conj(kz[ki]);
          const double theta = std::pow(c.rope_base, -static_cast<double>(e) / d);
          expected += sp(qs[qi]) * sp(ks[ki]) * std::cos(static_cast<double>(m - t) * theta + bs[hi * d + e]);
        }
        // The table is complex64 (phases rounded once to float32): relative 1e-6.
        CHECK(dot.real() == doctest::Approx(expected).epsilon(1e-6).scale(1.0));
      }
}

TEST_CASE("pope: the transform passes gradcheck in float64 (queries, keys and pope_bias)") {
  ModelConfig c = small_config(Position::PoPE);
  c.d_model = 6;
  c.n_heads = 2;
  const auto scheme = make_position_scheme(c);
  Generator g(14);
  const Tensor q = randn({2, 4, 2, 3}, DType::Float64, &g).requires_grad_(), k = randn({2, 4, 2, 3}, DType::Float64, &g).requires_grad_();
  const Tensor bias = randn({2, 3}, DType::Float64, &g).requires_grad_();
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const std::vector<Tensor> params = {in[2]};
        RotationArgs args;
        args.parameters = &params;
        args.offset = 2;
        const auto [qr, kr] = scheme->rotate(in[0], in[1], args);
        return cat({qr, kr}, 1);
      },
      {q, k, bias});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("fused attention with a distance bias: values and every gradient match the materialised path; gradcheck in float64") {
  Generator g(21);
  for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t, int64_t>{70, 70, 0, 5}, {6, 80, 74, 100}, {9, 9, 0, 1}}) {
    const int64_t nq = std::get<0>(shape), nk = std::get<1>(shape), offset = std::get<2>(shape), R = std::get<3>(shape);
    CAPTURE(nq);
    CAPTURE(R);
    const Tensor q = randn({2, nq, 3, 8}, DType::Float64, &g).requires_grad_();
    const Tensor k = randn({2, nk, 3, 8}, DType::Float64, &g).requires_grad_();
    const Tensor v = randn({2, nk, 3, 4}, DType::Float64, &g).requires_grad_();
    const Tensor bias = randn({3, R + 1}, DType::Float64, &g).requires_grad_();
    const Tensor slopes = from_vector<double>({0.5, 0.25, 0.125});
    const Tensor w = randn({2, nq, 3, 4}, DType::Float64, &g);
    sum(causal_attention(q, k, v, 0.3, offset, slopes, bias) * w).backward();
    const std::vector<Tensor> fused = {q.grad(), k.grad(), v.grad(), bias.grad()};
    const auto out = causal_attention(q, k, v, 0.3, offset, slopes, bias).to_vector<double>();
    for (const Tensor* t : {&q, &k, &v, &bias}) t->zero_grad();
    const Tensor reference = materialized_attention(q, k, v, 0.3, offset, slopes, nullptr, bias);
    sum(reference * w).backward();
    const auto ref = reference.to_vector<double>();
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == doctest::Approx(ref[i]).epsilon(1e-12).scale(1.0));
    const std::vector<Tensor> materialised = {q.grad(), k.grad(), v.grad(), bias.grad()};
    for (size_t t = 0; t < fused.size(); ++t) {
      const auto a = fused[t].to_vector<double>(), b = materialised[t].to_vector<double>();
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-11).scale(1.0));
    }
  }
  const Tensor q = randn({1, 7, 2, 4}, DType::Float64, &g).requires_grad_(), k = randn({1, 7, 2, 4}, DType::Float64, &g).requires_grad_();
  const Tensor v = randn({1, 7, 2, 3}, DType::Float64, &g).requires_grad_(), bias = randn({2, 4}, DType::Float64, &g).requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], 0.4, 0, Tensor(), in[3]); }, {q, k, v, bias});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("complexformer-seed: the scores are sigmoid(alpha) Re(sum_c q^ conj(k^)) / sqrt(d) + sigmoid(beta) rel_bias[min(m - n, R)]") {
  ModelConfig c = small_config(Position::ComplexFormerSeed);
  c.d_model = 6;
  c.n_heads = 2;  // d = 3: odd, components, not pairs
  c.max_rel_pos = 3;
  c.validate();
  const auto scheme = make_position_scheme(c);
  Generator g(22);
  const int64_t n = 6, h = 2, d = 3, D = 6;
  const Tensor x = randn({1, n, D}, DType::Float64, &g);
  const Tensor q = randn({1, n, h, d}, DType::Float64, &g), k = randn({1, n, h, d}, DType::Float64, &g);
  const std::vector<Tensor> params = {randn({D, D}, DType::Float64, &g), randn({D, D}, DType::Float64, &g), randn({h}, DType::Float64, &g),
                                      randn({h}, DType::Float64, &g), randn({4}, DType::Float64, &g)};
  RotationArgs args;
  args.parameters = &params;
  args.input = &x;
  const auto [qr, kr] = scheme->rotate(q, k, args);
  const auto qz = qr.to_vector<std::complex<double>>(), kz = kr.to_vector<std::complex<double>>();
  const auto table = scheme->distance_bias(params).to_vector<double>();  // [H, R + 1]
  const auto xs = x.to_vector<double>(), qs = q.to_vector<double>(), ks = k.to_vector<double>();
  const auto aq = params[0].to_vector<double>(), ak = params[1].to_vector<double>(), alpha = params[2].to_vector<double>(),
             beta = params[3].to_vector<double>(), rel = params[4].to_vector<double>();
  const auto sigmoid = [](double u) { return 1.0 / (1.0 + std::exp(-u)); };
  const auto angle = [&](const std::vector<double>& net, int64_t m, int64_t row) {
    double u = 0;
    for (int64_t e = 0; e < D; ++e) u += net[row * D + e] * xs[m * D + e];
    return std::tanh(u);
  };
  for (int64_t hi = 0; hi < h; ++hi) {
    for (int64_t j = 0; j <= 3; ++j) CHECK(table[hi * 4 + j] == doctest::Approx(sigmoid(beta[hi]) * rel[j]).epsilon(1e-14).scale(1.0));
    for (int64_t m = 0; m < n; ++m)
      for (int64_t t = 0; t <= m; ++t) {
        std::complex<double> dot = 0, expected = 0;
        for (int64_t c2 = 0; c2 < d; ++c2) {
          const size_t qi = static_cast<size_t>((m * h + hi) * d + c2), ki = static_cast<size_t>((t * h + hi) * d + c2);
          dot += qz[qi] * std::conj(kz[ki]);
          expected += qs[qi] * std::polar(1.0, angle(aq, m, hi * d + c2)) * std::conj(ks[ki] * std::polar(1.0, angle(ak, t, hi * d + c2)));
        }
        CHECK(dot.real() == doctest::Approx(sigmoid(alpha[hi]) * expected.real()).epsilon(1e-12).scale(1.0));
      }
  }
}

TEST_CASE("complexformer-seed: the transform and its bias table pass gradcheck in float64") {
  ModelConfig c = small_config(Position::ComplexFormerSeed);
  c.d_model = 4;
  c.n_heads = 2;
  c.max_rel_pos = 2;
  const auto scheme = make_position_scheme(c);
  Generator g(23);
  const Tensor x = randn({1, 4, 4}, DType::Float64, &g).requires_grad_();
  const Tensor q = randn({1, 4, 2, 2}, DType::Float64, &g).requires_grad_(), k = randn({1, 4, 2, 2}, DType::Float64, &g).requires_grad_();
  std::vector<Tensor> inputs = {q, k, x};
  for (const Dims& shape : {Dims{4, 4}, Dims{4, 4}, Dims{2}, Dims{2}, Dims{3}}) inputs.push_back(randn(shape, DType::Float64, &g).requires_grad_());
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const std::vector<Tensor> params(in.begin() + 3, in.end());
        RotationArgs args;
        args.parameters = &params;
        args.input = &in[2];
        const auto [qr, kr] = scheme->rotate(in[0], in[1], args);
        return cat({reshape(view_as_real(qr), {-1}), reshape(view_as_real(kr), {-1}), reshape(scheme->distance_bias(params), {-1})}, 0);
      },
      inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("complexformer-seed: max_rel_pos out of 1..2^20 is refused; the config JSON names it only when not 1024") {
  ModelConfig c = small_config(Position::ComplexFormerSeed);
  c.max_rel_pos = 0;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("max_rel_pos"), Error);
  c.max_rel_pos = (int64_t{1} << 20) + 1;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("max_rel_pos"), Error);
  c.max_rel_pos = 16;
  CHECK(to_json(c).at("max_rel_pos") == 16);
  CHECK(model_config_from_json(to_json(c)).max_rel_pos == 16);
  c.max_rel_pos = 1024;
  CHECK(!to_json(c).contains("max_rel_pos"));
}
