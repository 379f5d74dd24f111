// The models of the spec: rotation implementations, position variants, KV cache.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <map>
#include <string>

#include "models/transformer.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tensor/fast_math.h"
#include "tensor/scalar_math.h"
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

}  // namespace

TEST_CASE("fused CMHA rotation passes gradcheck in float64") {
  Generator g(3);
  const Tensor z = randn({2, 5, 3, 4}, DType::Complex128, &g).requires_grad_();
  const Tensor delta = normal({3, 4}, 1.0, 0.5, DType::Float64, &g).requires_grad_();
  const Tensor bias = randn({3, 4}, DType::Float64, &g).requires_grad_();
  const Tensor beta = normal({3}, 1.0, 0.3, DType::Float64, &g).requires_grad_();
  for (bool with_bias : {true, false}) {
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return cmha_rotate(in[0], in[1], with_bias ? in[2] : Tensor(), in[3], 7, 10000.0); },
                       {z, delta, bias, beta}, {1e-6, 1e-6, 1e-5});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("fused CMHA rotation is finite at the origin and uses the eps-regularised derivative there") {
  const Tensor z = zeros({1, 1, 1, 2}, DType::Complex128).requires_grad_();
  const Tensor delta = ones({1, 2}, DType::Float64).requires_grad_(), beta = ones({1}, DType::Float64).requires_grad_();
  const Tensor out = cmha_rotate(z, delta, Tensor(), beta, 0, 10000.0);
  sum(real(out) + imag(out)).backward();
  CHECK(ops::all_finite(z.grad()));
  CHECK(ops::all_finite(delta.grad()));
  // |out| = sqrt(0 + eps) = 3.2e-5 at the origin (relative: a scale-1 Approx accepts anything within 1.2e-5 of it).
  CHECK(abs(out).to_vector<double>()[0] == doctest::Approx(std::sqrt(ops::kEulerEps)).scale(0));
}

TEST_CASE("rotary table multiply and attention softmax pass gradcheck in float64") {
  Generator g(4);
  const Tensor z = randn({2, 6, 2, 3}, DType::Complex128, &g).requires_grad_();
  const Tensor table = ops::rotary_table(6, 3, 5, 10000.0, 512.0, +1, DType::Complex128);
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return rotate(in[0], table); }, {z});
  CHECK_MESSAGE(r.ok, r.message);
  const Tensor scores = randn({2, 3, 4, 6}, DType::Float64, &g).requires_grad_();
  const Tensor slopes = from_vector<double>({0.5, 0.25, 0.125});
  auto s = gradcheck([&](const std::vector<Tensor>& in) { return attention_softmax(in[0], 0.7, 2, slopes); }, {scores});
  CHECK_MESSAGE(s.ok, s.message);
}

TEST_CASE("attention softmax masks future keys and applies ALiBi slopes") {
  const Tensor scores = zeros({1, 1, 3, 3});
  const auto p = attention_softmax(scores, 1.0, 0, Tensor()).to_vector<float>();
  CHECK(p[1] == 0.0f);
  CHECK(p[2] == 0.0f);
  CHECK(p[3] == doctest::Approx(0.5));
  const auto a = attention_softmax(scores, 1.0, 0, from_vector<float>({1.0f})).to_vector<float>();
  // Row 1: logits (−1, 0) -> softmax
  CHECK(a[4] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))));
}

TEST_CASE("fused and composed ComplexFormer rotations agree on values and every gradient") {
  ModelConfig c = small_config(Position::ComplexFormer);
  c.cmha_init = CmhaInit::Paper;  // non-trivial delta, so the semantic angle term matters
  CausalLM fused(c, 11), composed(c, 11);
  composed.set_rotation(RotationImpl::Composed);
  // Give phase_bias and beta non-default values too.
  for (auto* m : {&fused, &composed})
    for (auto& layer : m->layers) {
      Generator g(5);
      ops::copy_(layer->attn->position_parameter("phase_bias"), normal(layer->attn->position_parameter("phase_bias").shape(), 0.0, 0.3, DType::Float32, &g));
      ops::copy_(layer->attn->position_parameter("beta"), normal(layer->attn->position_parameter("beta").shape(), 1.0, 0.2, DType::Float32, &g));
    }
  const Tensor tokens = random_tokens(2, 16, 1), targets = random_tokens(2, 16, 2);
  const Tensor lf = fused.forward(tokens), lc = composed.forward(tokens);
  // Logits (below 1) and gradients (1e-5 .. 0.15): each compared relative to its own largest entry.
  CHECK(max_abs_diff(lf, lc) <= 1e-4 * max_abs(lc));
  fused.loss(tokens, targets).backward();
  composed.loss(tokens, targets).backward();
  const auto pf = fused.named_parameters(), pc = composed.named_parameters();
  REQUIRE(pf.size() == pc.size());
  for (size_t i = 0; i < pf.size(); ++i) {
    // Not floored at 1e-3: the CMHA gradients (delta, phase_bias, beta) are 1e-5 .. 5e-5.
    INFO(pf[i].first);
    CHECK(max_abs_diff(pf[i].second.grad(), pc[i].second.grad()) <= 2e-3 * max_abs(pc[i].second.grad()));
  }
}

TEST_CASE("an untrained complexformer with cmha_init=rope equals rope on the same weights") {
  CausalLM cf(small_config(Position::ComplexFormer), 21), rope(small_config(Position::Rope), 22);
  nn::StateDict state = cf.state_dict();
  for (auto it = state.begin(); it != state.end();) {  // drop the CMHA parameters rope does not have
    const bool cmha = it->first.ends_with(".delta") || it->first.ends_with(".phase_bias") || it->first.ends_with(".beta");
    it = cmha ? state.erase(it) : std::next(it);
  }
  rope.load_state_dict(state);
  const Tensor tokens = random_tokens(2, 24, 3);
  const Tensor want = rope.forward(tokens);
  CHECK(max_abs_diff(cf.forward(tokens), want) <= 1e-4 * max_abs(want));
}

TEST_CASE("rotary scores depend on m - n only") {
  for (Position position : all_positions()) {
    if (!position_variant(position).rotary) continue;
    ModelConfig c = small_config(position);
    c.cmha_init = CmhaInit::Paper;
    CausalLM model(c, 31);
    Generator g(2);
    const Tensor x = randn({1, 10, c.d_model}, DType::Float32, &g);
    const Attention& attn = *model.layers[0]->attn;
    const Tensor s0 = attn.scores(x, 0), s1 = attn.scores(x, 37);
    INFO(position);
    // Causal entries (n <= m) are what attention uses; XPos's scale factors cancel there only.
    const Tensor mask = ops::causal_mask(10, 10);
    const Tensor d0 = masked_fill(s0, mask, 0.0), d1 = masked_fill(s1, mask, 0.0);
    CHECK(max_abs_diff(d0, d1) <= 2e-3 * max_abs(d0));  // scores of 0.1 .. 0.2: not floored at 1
  }
}

TEST_CASE("cached generation gives the logits of a full forward pass, for every variant") {
  for (Position position : all_positions()) {
    INFO(position);
    ModelConfig c = small_config(position);
    c.cmha_init = CmhaInit::Paper;
    CausalLM model(c, 41);
    NoGradGuard no_grad;
    const Tensor tokens = random_tokens(1, 12, 5);
    const Tensor full = model.forward(tokens);
    KVCache cache = model.make_cache(1, 12);
    const Tensor first = model.forward(tokens.narrow(1, 0, 5), &cache);  // a prompt, then one token at a time
    const double scale = max_abs(full);  // 0.3 .. 0.9
    CHECK(max_abs_diff(first, full.narrow(1, 0, 5)) <= 1e-4 * scale);
    for (int64_t i = 5; i < 12; ++i) {
      const Tensor step = model.forward(tokens.narrow(1, i, 1).contiguous(), &cache);
      CHECK(max_abs_diff(step, full.narrow(1, i, 1)) <= 1e-4 * scale);
    }
    CHECK(cache.length == 12);
  }
}

TEST_CASE("ALiBi slopes follow the spec, including non-powers of two") {
  const auto s8 = alibi_slopes(8);
  for (int h = 0; h < 8; ++h) CHECK(s8[h] == doctest::Approx(std::pow(2.0, -(h + 1.0))).scale(0));  // down to 2^-8
  const auto s6 = alibi_slopes(6);  // P2 = 4: 2^-2, 2^-4, 2^-6, 2^-8, then every other of the 8-series: 2^-1, 2^-3
  const std::vector<double> want = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  REQUIRE(s6.size() == 6);
  for (int h = 0; h < 6; ++h) CHECK(s6[h] == doctest::Approx(want[h]).scale(0));
}

TEST_CASE("every variant trains: loss starts near log(V) and falls on a repeated batch") {
  for (Position position : all_positions()) {
    INFO(position);
    CausalLM model(small_config(position), 51);
    nn::AdamW opt({{model.named_parameters(), 0.0, 1.0}}, {1e-2, 0.9, 0.99, 1e-8});
    const Tensor tokens = random_tokens(2, 16, 6), targets = random_tokens(2, 16, 7);
    const double first = model.loss(tokens, targets).item<double>();
    CHECK(first == doctest::Approx(std::log(256.0)).epsilon(0.05));
    double last = first;
    for (int i = 0; i < 15; ++i) {
      opt.zero_grad();
      Tensor loss = model.loss(tokens, targets);
      loss.backward();
      opt.step();
      last = loss.item<double>();
    }
    CHECK(last < first - 1.0);
  }
}

TEST_CASE("position variants: one table of names and properties") {
  const std::vector<std::string> spec = {"complexformer", "rope", "xpos", "carope", "pope", "complexformer-seed", "alibi", "sinusoidal", "learned", "none"};
  REQUIRE(all_positions().size() == spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const Position p = all_positions()[i];
    CHECK(position_name(p) == spec[i]);
    CHECK(parse_position(spec[i]) == p);
    std::ostringstream os;
    os << p;
    CHECK(os.str() == spec[i]);
  }
  CHECK(position_names("|") == "complexformer|rope|xpos|carope|pope|complexformer-seed|alibi|sinusoidal|learned|none");
  CHECK_THROWS_WITH_AS(parse_position("Rope"),
                       "config: unknown position 'Rope' (expected complexformer, rope, xpos, carope, pope, complexformer-seed, alibi, sinusoidal, learned or none)", Error);
  CHECK_THROWS_WITH_AS(parse_position(""), doctest::Contains("unknown position ''"), Error);
  // The properties, as the spec assigns them.
  for (Position p : all_positions()) {
    CAPTURE(p);
    const PositionVariant& v = position_variant(p);
    CHECK(v.rotary == (p == Position::ComplexFormer || p == Position::Rope || p == Position::XPos || p == Position::CARoPE));
    CHECK(v.complex_components == (p == Position::PoPE || p == Position::ComplexFormerSeed));
    CHECK(v.alibi_bias == (p == Position::Alibi));
    CHECK(v.embedding == (p == Position::Learned ? PositionEmbedding::Learned
                          : p == Position::Sinusoidal ? PositionEmbedding::Sinusoidal : PositionEmbedding::None));
  }
  CHECK(parse_cmha_init("rope") == CmhaInit::Rope);
  CHECK(parse_cmha_init("paper") == CmhaInit::Paper);
  CHECK(cmha_init_names("|") == "rope|paper");
  CHECK_THROWS_WITH_AS(parse_cmha_init("random"), "config: cmha_init must be 'rope' or 'paper', got 'random'", Error);
}

TEST_CASE("positions far out: xpos measures its scales from the middle of a long window; the scores do not change") {
  const ModelConfig c = small_config(Position::XPos);
  CHECK(xpos_max_positions(512.0) == 67027);
  CHECK(error_of([&] { check_positions_fit(c, 67027, "x"); }).empty());
  CHECK(!error_of([&] { check_positions_fit(c, 67028, "x"); }).empty());
  CHECK(xpos_origin(512.0, 1000) == 0);
  CHECK(xpos_origin(512.0, 65536) == 32768);
  const int64_t pairs = c.pairs();
  // From position 0, the key scale zeta_0^(-n/S) has left float32 by n = 65,535: the reason for the origin.
  CHECK(!ops::all_finite(ops::view_as_real(ops::rotary_table(1, pairs, 65535, 10000.0, 512.0, -1, DType::Complex64))));
  // From the middle, every scale of a 65,536-position window is finite, and a
  // query-key product is exp(i (m - n) w_j) zeta_j^((m - n)/S), computed here in double.
  // (Pairs, not structured bindings: clang 14, the sanitizer build, cannot capture those in CAPTURE.)
  for (const std::pair<int64_t, int64_t>& mn : {std::pair<int64_t, int64_t>{65535, 65500}, {40000, 100}, {33000, 32000}, {10, 0}}) {
    const int64_t m = mn.first, n = mn.second;
    CAPTURE(mn.first);
    CAPTURE(mn.second);
    const auto q = ops::rotary_table(1, pairs, m, 10000.0, 512.0, +1, DType::Complex64, 32768).to_vector<c64>();
    const auto k = ops::rotary_table(1, pairs, n, 10000.0, 512.0, -1, DType::Complex64, 32768).to_vector<c64>();
    for (int64_t j = 0; j < pairs; ++j) {
      const double d = 2.0 * static_cast<double>(pairs), w = std::pow(10000.0, -2.0 * static_cast<double>(j) / d);
      const double zeta = (2.0 * static_cast<double>(j) + 0.4 * d) / (1.4 * d);
      const c128 want = std::polar(std::pow(zeta, static_cast<double>(m - n) / 512.0), static_cast<double>(m - n) * w);
      const c128 got = c128(q[j]) * std::conj(c128(k[j]));
      CHECK(std::abs(got - want) <= 1e-6 * std::abs(want));
    }
  }
  // The model: through a KV cache made for 65,536 positions (origin 32,768, so
  // the first tokens carry scales near e^+-80) the logits are those of a plain forward (origin 0).
  const CausalLM model(c, 5);
  NoGradGuard no_grad;
  const Tensor tokens = random_tokens(1, 80, 6);
  const Tensor plain = model.forward(tokens);
  KVCache cache = model.make_cache(1, 65536);
  REQUIRE(cache.origin == 32768);
  const Tensor cached = model.forward(tokens, &cache);
  CHECK(max_abs_diff(cached, plain) <= 1e-5 * max_abs(plain));
  CHECK(contains(error_of([&] { model.make_cache(1, 70000); }), "exceeds the 67027 positions an 'xpos' model"));
}

TEST_CASE("positions far out: CMHA phases past the fast sincos range are exact for their float32 theta") {
  // beta 4.5 at position 65,000 puts theta near 300,000 rad, past fastmath's exact
  // range: the kernel must take libm's sincos there, not the fast reduction.
  Generator g(8);
  const int64_t pairs = 4, offset = 65000;
  const Tensor z = randn({1, 3, 2, pairs}, DType::Complex64, &g);
  const Tensor delta = normal({2, pairs}, 1.0, 0.3, DType::Float32, &g), bias = randn({2, pairs}, DType::Float32, &g);
  const Tensor beta = from_vector<float>({4.5f, -3.2f});
  const auto got = ops::cmha_rotate(z, {delta, bias, beta, offset, 10000.0}).to_vector<c64>();
  const auto zv = z.to_vector<c64>();
  const auto dv = delta.to_vector<float>(), bv = bias.to_vector<float>(), betav = beta.to_vector<float>();
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < pairs; ++j) {
        const size_t i = static_cast<size_t>((m * 2 + h) * pairs + j), hj = static_cast<size_t>(h * pairs + j);
        const float re = zv[i].real(), im = zv[i].imag();
        const double w = std::pow(10000.0, -2.0 * static_cast<double>(j) / (2.0 * pairs));
        const float theta = scalar::cmha_theta(dv[hj], fastmath::atan2(im, re), bv[hj], betav[h],
                                               scalar::cmha_position_angle<float>(static_cast<double>(offset + m), w));
        const double r = std::sqrt(re * re + im * im + static_cast<float>(ops::kEulerEps));
        const c128 want = std::polar(r, static_cast<double>(theta));
        CHECK(std::abs(c128(got[i]) - want) <= 1e-6 * r);
      }
}

TEST_CASE("bad model configurations and inputs are refused with clear errors") {
  ModelConfig c = small_config(Position::Rope);
  c.n_heads = 5;
  CHECK(error_of([&] { CausalLM m(c); }).find("not divisible by n_heads") != std::string::npos);
  c = small_config(Position::Rope);
  c.d_model = 36;
  c.n_heads = 4;  // head width 9
  CHECK(error_of([&] { CausalLM m(c); }).find("even head width") != std::string::npos);
  c = small_config(Position::Learned);
  CausalLM learned(c);
  CHECK(error_of([&] { (void)learned.forward(random_tokens(1, 65, 1)); }).find("exceeds max_seq_len 64") != std::string::npos);
  // The one rule on lengths, which train, eval, grad, generate and forward call with their context.
  CHECK(error_of([&] { check_positions_fit(c, 65, "eval: --seq-len"); }) ==
        "eval: --seq-len 65 exceeds max_seq_len 64 of this 'learned' position model");
  CHECK(error_of([&] { check_positions_fit(c, 64, "eval: --seq-len"); }).empty());
  for (Position p : all_positions()) {
    if (p != Position::Learned && p != Position::XPos) CHECK(error_of([&] { check_positions_fit(small_config(p), kMaxPositions, "x"); }).empty());
    CHECK(error_of([&] { check_positions_fit(small_config(p), kMaxPositions + 1, "eval: --seq-len"); }) ==
          (p == Position::XPos ? "eval: --seq-len 1048577 exceeds the 67027 positions an 'xpos' model with xpos_scale_base 512 supports (its "
                                 "scales would leave float32)"
                               : p == Position::Learned ? "eval: --seq-len 1048577 exceeds max_seq_len 64 of this 'learned' position model"
                                                        : "eval: --seq-len 1048577 exceeds the 1048576 positions Phasor supports"));
  }
  CausalLM rope(small_config(Position::Rope));
  CHECK(error_of([&] { (void)rope.forward(from_vector<int64_t>({300}, {1, 1})); }).find("outside the vocabulary") != std::string::npos);
}

TEST_CASE("fused CMHA rotation stays accurate at positions past 2048 (float32 against float64)") {
  Generator g(21);
  const Tensor z = randn({1, 64, 2, 8}, DType::Complex128, &g);
  const Tensor delta = normal({2, 8}, 1.0, 0.3, DType::Float64, &g), beta = normal({2}, 1.0, 0.3, DType::Float64, &g);
  for (int64_t offset : {2048, 4000, 9000}) {
    CAPTURE(offset);
    const ops::CmhaParams p64{delta, Tensor(), beta, offset, 10000.0};
    const ops::CmhaParams p32{ops::to(delta, DType::Float32), Tensor(), ops::to(beta, DType::Float32), offset, 10000.0};
    const Tensor ref = ops::cmha_rotate(z, p64);
    const Tensor got = ops::to(ops::cmha_rotate(ops::to(z, DType::Complex64), p32), DType::Complex128);
    REQUIRE(ops::all_finite(got));
    // The float32 phase beta m w_j is a number of up to ~1.5e4 radians: one rounding of it
    // costs up to 2^-11 rad there, so the bound scales with the largest position angle.
    const double angle = 1.6 * static_cast<double>(offset + 64);
    const double bound = 2.0 * angle * std::ldexp(1.0, -24) + 1e-5;
    const double err = max_abs(ops::unary(ops::Unary::Abs, ref - got)) / max_abs(ops::unary(ops::Unary::Abs, ref));
    CHECK(err < bound);
    CHECK(err > 0);  // float32 really ran: the comparison can fail
  }
}

TEST_CASE("composed and fused ComplexFormer rotations agree near z = 0, where the spec's eps-regularised phase derivative matters") {
  ModelConfig c = small_config(Position::ComplexFormer);
  c.cmha_init = CmhaInit::Paper;
  CausalLM fused(c, 13), composed(c, 13);
  composed.set_rotation(RotationImpl::Composed);
  // Query/key weights scaled so that |z| ~ 1e-6: |z|^2 ~ 1e-12 against eps = 1e-9, where
  // the plain angle derivative (1/|z|^2) would be ~1000x the regularised one.
  for (auto* m : {&fused, &composed})
    for (auto& layer : m->layers)
      for (const Tensor& w : {layer->attn->wq->weight, layer->attn->wk->weight}) ops::binary_(ops::Binary::Mul, w, scalar_tensor(1e-5));
  const Tensor tokens = random_tokens(2, 8, 3), targets = random_tokens(2, 8, 4);
  fused.loss(tokens, targets).backward();
  composed.loss(tokens, targets).backward();
  const Tensor gf = fused.layers[0]->attn->wq->weight.grad(), gc = composed.layers[0]->attn->wq->weight.grad();
  const double scale = max_abs(gf);
  REQUIRE(scale > 0);
  CHECK(max_abs_diff(gf, gc) / scale < 1e-2);
}

TEST_CASE("euler_phase: angle forward, gradient i z / (|z|^2 + eps) backward; gradcheck in complex128") {
  Generator g(10);
  const Tensor z = randn({6}, DType::Complex128, &g).requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return euler_phase(in[0], ops::kEulerEps); }, {z});
  CHECK_MESSAGE(r.ok, r.message);
  // At tiny |z| the regularised formula, exactly.
  const Tensor t = from_vector<c128>({c128(3e-6, -4e-6), c128(0, 0)}).requires_grad_();
  CHECK(euler_phase(t, ops::kEulerEps).to_vector<double>()[0] == std::atan2(-4e-6, 3e-6));
  sum(euler_phase(t, ops::kEulerEps)).backward();
  const auto got = t.grad().to_vector<c128>();
  const c128 z0(3e-6, -4e-6), want = c128(0, 1) * z0 / (std::norm(z0) + ops::kEulerEps);
  CHECK(std::abs(got[0] - want) <= 1e-12 * std::abs(want));
  CHECK(got[1] == c128(0, 0));  // finite (zero) at the origin
}

TEST_CASE("parameter_shapes and parameter_count describe the model a config builds, for every variant") {
  for (const Position position : all_positions())
    for (const bool tied : {true, false}) {
      INFO(position_name(position), tied ? " tied" : " untied");
      ModelConfig c = small_config(position);
      c.tie_embeddings = tied;
      const CausalLM model(c);
      std::map<std::string, Dims> built;
      for (const auto& [name, p] : model.named_parameters()) built.emplace(name, p.shape());
      CHECK(parameter_shapes(c) == built);
      CHECK(parameter_count(c) == model.parameter_count());
    }
}

TEST_CASE("position schemes: the parameter count validate() bounds is the built model's, for every variant") {
  for (const Position position : all_positions()) {
    INFO(position_name(position));
    ModelConfig c = small_config(position);
    c.tie_embeddings = false;
    const CausalLM model(c);
    CHECK(c.parameter_count() == static_cast<double>(model.parameter_count()));
    CHECK(model.positions().name() == position_name(position));
    CHECK(model.positions().max_positions() == (position == Position::Learned ? 64
                                                : position == Position::XPos  ? xpos_max_positions(c.xpos_scale_base)
                                                                              : kMaxPositions));
  }
}

TEST_CASE("position schemes: a table is built once for every layer and forward, the cache stays bounded, the logits unchanged") {
  for (const Position position : {Position::Rope, Position::XPos, Position::Alibi, Position::Sinusoidal}) {
    INFO(position_name(position));
    const CausalLM model(small_config(position), 3);  // two layers
    NoGradGuard no_grad;
    const Tensor tokens = random_tokens(2, 12, 4);
    const Tensor first = model.forward(tokens);
    // rope: one rotation for queries and keys; xpos: one each (their scales differ); alibi: the slopes; sinusoidal: the table.
    const size_t tables = position == Position::XPos ? 2 : 1;
    CHECK(model.positions().cached_tables() == tables);
    CHECK(model.forward(tokens).to_vector<float>() == first.to_vector<float>());
    CHECK(model.positions().cached_tables() == tables);
    // One token at a time through a KV cache: a new offset each step, the oldest tables give way.
    KVCache cache = model.make_cache(1, 40);
    for (int64_t at = 0; at < 40; ++at) (void)model.forward(tokens.narrow(0, 0, 1).narrow(1, at % 12, 1).contiguous(), &cache);
    CHECK(model.positions().cached_tables() == (position == Position::Alibi ? 1 : PositionScheme::kMaxTables));
  }
  // complexformer, learned and none build no table.
  for (const Position position : {Position::ComplexFormer, Position::Learned, Position::None}) {
    const CausalLM model(small_config(position), 3);
    (void)model.forward(random_tokens(1, 8, 4));
    CHECK(model.positions().cached_tables() == 0);
  }
}

TEST_CASE("a KV cache that grows as it fills gives the logits of one allocated whole, bit for bit") {
  for (const Position position : all_positions())
    for (const int64_t batch : {1, 2}) {
      INFO(position_name(position), " batch ", batch);
      ModelConfig c = small_config(position);
      c.max_seq_len = 600;
      c.cmha_init = CmhaInit::Paper;
      const CausalLM model(c, 43);
      NoGradGuard no_grad;
      const Tensor tokens = random_tokens(batch, 600, 9);
      KVCache grown = model.make_cache(batch, 600), whole = model.make_cache(batch, 600);
      whole.reserve(600);  // what make_cache allocated before the cache could grow
      CHECK(grown.capacity < 600);
      CHECK(whole.capacity == 600);
      bool identical = true;
      for (int64_t at = 0, n = 7; at < 600; at += n, n = 1) {  // a prompt of 7, then one token at a time
        const Tensor chunk = tokens.narrow(1, at, n).contiguous();
        const Tensor a = model.forward(chunk, &grown), b = model.forward(chunk, &whole);
        identical = identical && a.to_vector<float>() == b.to_vector<float>();
      }
      CHECK(identical);
      CHECK(grown.length == 600);
      CHECK(grown.capacity == 600);  // doubled from its first size, never past the request
      // Past the request: the cache refuses (a learned model's own limit, also 600 here, speaks first).
      CHECK_THROWS_WITH_AS(model.forward(tokens.narrow(1, 0, 1).contiguous(), &grown),
                           doctest::Contains(position == Position::Learned ? "exceeds max_seq_len 600" : "600 positions"), Error);
    }
}
