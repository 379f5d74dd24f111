// nn/: the Module tree (names, counts, train/eval, state dicts), the layers
// against hand computations and finite differences, losses, the optimizers
// against their formulas worked out here step by step, the learning-rate
// schedule and gradient clipping.
#include <omp.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <complex>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "models/transformer.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
std::vector<c128> cvalues(const Tensor& t) { return t.to_vector<c128>(); }

ModelConfig tiny_config(Position position = Position::ComplexFormer) {
  return model_config(position, {.vocab_size = 16, .d_model = 8, .n_layers = 2, .n_heads = 2, .d_ff = 12, .max_seq_len = 16});
}

// The spec's parameter count, term by term from the checkpoint table.
int64_t spec_parameter_count(const ModelConfig& c) {
  const int64_t V = c.vocab_size, D = c.d_model, L = c.n_layers, F = c.d_ff, H = c.n_heads, P = c.pairs();
  int64_t per_layer = D /*attn_norm*/ + 4 * D * D /*wq wk wv wo*/ + D /*ffn_norm*/ + 3 * D * F /*w1 w2 w3*/;
  if (c.position == Position::ComplexFormer) per_layer += 2 * H * P + H;  // delta, phase_bias, beta
  if (c.position == Position::CARoPE) per_layer += H * D;                 // carope_w
  if (c.position == Position::PoPE) per_layer += H * c.head_dim();        // pope_bias
  if (c.position == Position::ComplexFormerSeed) per_layer += 2 * D * D + 2 * H + c.max_rel_pos + 1;  // angle_q, angle_k, alpha, beta, rel_bias
  int64_t n = V * D + L * per_layer + D /*norm*/;
  if (c.position == Position::Learned) n += c.max_seq_len * D;
  if (!c.tie_embeddings) n += V * D;
  return n;
}

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// A small module tree: own parameter, a buffer, a Linear with bias, a Dropout.
struct Inner : nn::Module {
  Inner() {
    Generator gen(3);
    scale = register_parameter("scale", from_vector<float>({1.5f, -2.0f}));
    running = register_buffer("running", from_vector<float>({0.25f, 0.5f}));
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2, true, DType::Float32, &gen));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5, 1));
  }
  Tensor scale, running;
  std::shared_ptr<nn::Linear> lin;
  std::shared_ptr<nn::Dropout> drop;
};

// Nested modules, three levels deep.
struct Outer : nn::Module {
  Outer() {
    inner = register_module("inner", std::make_shared<Inner>());
    Generator gen(4);
    a = register_module("a", std::make_shared<nn::Embedding>(4, 2, &gen));
    b = register_module("b", std::make_shared<nn::Linear>(2, 4, false, DType::Float32, &gen));
  }
  std::shared_ptr<Inner> inner;
  std::shared_ptr<nn::Embedding> a;
  std::shared_ptr<nn::Linear> b;
};

struct Shared : nn::Module {
  Shared() {
    Tensor t = from_vector<float>({1, 2, 3});
    first = register_parameter("first", t);
    second = register_parameter("second", t);  // the same tensor registered twice: listed once
  }
  Tensor first, second;
};

}  // namespace

// ============================================================== Module

TEST_CASE("named_parameters: nested names, registration order, buffers apart") {
  Inner m;
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"scale", "lin.weight", "lin.bias"});
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"running"});
  CHECK(m.parameter_count() == 2 + 6 + 2);
  CHECK(m.parameters().size() == 3);
  for (const Tensor& p : m.parameters()) CHECK(p.requires_grad());

  Outer o;
  const std::vector<std::string> names = names_of(o.named_parameters());
  CHECK(names == std::vector<std::string>{"inner.scale", "inner.lin.weight", "inner.lin.bias", "a.weight", "b.weight"});
  CHECK(names_of(o.named_buffers()) == std::vector<std::string>{"inner.running"});
  // The parameters are the modules' own tensors, not copies.
  CHECK(o.named_parameters()[1].second.same_storage(o.inner->lin->weight));

  Shared s;
  CHECK(names_of(s.named_parameters()) == std::vector<std::string>{"first"});
  CHECK(s.parameter_count() == 3);
}

TEST_CASE("CausalLM parameter names follow the checkpoint layout; tied embeddings are listed once") {
  const ModelConfig c = tiny_config(Position::ComplexFormer);
  const CausalLM model(c, 1);
  const std::vector<std::string> names = names_of(model.named_parameters());
  std::set<std::string> want{"tok_emb.weight", "norm.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const char* n : {"attn_norm.weight", "attn.wq.weight", "attn.wk.weight", "attn.wv.weight", "attn.wo.weight", "attn.delta",
                          "attn.phase_bias", "attn.beta", "ffn_norm.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight"})
      want.insert(p + n);
  }
  CHECK(std::set<std::string>(names.begin(), names.end()) == want);
  CHECK(names.size() == want.size());  // no name twice
  CHECK(names.front() == "tok_emb.weight");
  CHECK(std::count(names.begin(), names.end(), "lm_head.weight") == 0);

  const nn::StateDict sd = model.state_dict();
  CHECK(sd.at("layers.1.attn.wq.weight").shape() == Dims{8, 8});
  CHECK(sd.at("layers.1.attn.delta").shape() == Dims{2, 2});
  CHECK(sd.at("layers.1.attn.beta").shape() == Dims{2});
  CHECK(sd.at("layers.0.ffn.w2.weight").shape() == Dims{8, 12});
  CHECK(sd.at("layers.0.ffn.w1.weight").shape() == Dims{12, 8});

  ModelConfig untied = tiny_config(Position::Learned);
  untied.tie_embeddings = false;
  const CausalLM m2(untied, 1);
  const nn::StateDict sd2 = m2.state_dict();
  CHECK(sd2.count("lm_head.weight") == 1);
  CHECK(sd2.at("lm_head.weight").shape() == Dims{16, 8});
  CHECK(sd2.at("pos_emb.weight").shape() == Dims{16, 8});
  CHECK(sd2.count("layers.0.attn.delta") == 0);
  CHECK(!sd2.at("lm_head.weight").same_storage(sd2.at("tok_emb.weight")));
}

TEST_CASE("parameter_count matches the spec's formula for each variant") {
  for (Position pos : all_positions())
    for (bool tie : {true, false}) {
      ModelConfig c = tiny_config(pos);
      c.tie_embeddings = tie;
      c.n_layers = 3;
      c.n_heads = 4;
      c.d_model = 16;
      c.d_ff = 20;
      const CausalLM model(c, 0);
      CAPTURE(pos);
      CAPTURE(tie);
      CHECK(model.parameter_count() == spec_parameter_count(c));
      int64_t by_hand = 0;
      for (const auto& [name, t] : model.state_dict()) by_hand += t.numel();
      CHECK(model.parameter_count() == by_hand);
    }
  // The default configuration, as the CLI reports it.
  const ModelConfig d;
  CHECK(CausalLM(d, 0).parameter_count() == spec_parameter_count(d));
}

TEST_CASE("train() and eval() reach every submodule") {
  CausalLM model(tiny_config(), 0);
  auto all_modes = [&](bool want) {
    CHECK(model.is_training() == want);
    for (const auto& layer : model.layers) {
      CHECK(layer->is_training() == want);
      CHECK(layer->attn->is_training() == want);
      CHECK(layer->attn->wq->is_training() == want);
      CHECK(layer->attn_norm->is_training() == want);
      CHECK(layer->ffn->is_training() == want);
      CHECK(layer->ffn->w2->is_training() == want);
    }
  };
  all_modes(true);
  model.eval();
  all_modes(false);
  model.train();
  all_modes(true);
  model.train(false);
  all_modes(false);

  // A Dropout deep inside a tree stops dropping when the root goes to eval.
  Outer o;
  const Tensor x = ones({64});
  CHECK(values(o.inner->drop->forward(x)) != values(x));
  o.eval();
  CHECK(!o.inner->drop->is_training());
  CHECK(values(o.inner->drop->forward(x)) == values(x));
  o.train();
  CHECK(o.inner->drop->is_training());
}

TEST_CASE("state_dict round trip copies every value, and the dict shares storage with the module") {
  const ModelConfig c = tiny_config();
  CausalLM a(c, 1), b(c, 2);
  const Tensor tokens = from_vector<int>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  CHECK(values(a.forward(tokens)) != values(b.forward(tokens)));

  const nn::StateDict sa = a.state_dict();
  CHECK(sa.size() == a.named_parameters().size() + a.named_buffers().size());
  CHECK(sa.at("norm.weight").same_storage(a.named_parameters().back().second));
  b.load_state_dict(sa);
  const nn::StateDict sb = b.state_dict();
  for (const auto& entry : sa) {
    const auto& t = entry.second;
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(values(sb.at(name)) == values(t));
    CHECK(!sb.at(name).same_storage(t));  // copied in, not aliased
    CHECK(sb.at(name).requires_grad());
  }
  CHECK(values(a.forward(tokens)) == values(b.forward(tokens)));

  // Buffers travel too.
  Inner i1, i2;
  ops::fill_(i1.running, 7.0);
  ops::fill_(i1.scale, -3.0);
  i2.load_state_dict(i1.state_dict());
  CHECK(values(i2.running) == std::vector<double>{7, 7});
  CHECK(values(i2.scale) == std::vector<double>{-3, -3});
}

TEST_CASE("load_state_dict names every missing, unexpected and mis-shaped entry and changes nothing") {
  Inner target;
  const std::vector<double> before_w = values(target.lin->weight), before_scale = values(target.scale);
  Inner source;
  ops::fill_(source.scale, 9.0);

  SUBCASE("missing") {
    nn::StateDict s = source.state_dict();
    s.erase("lin.bias");
    const std::string e = error_of([&] { target.load_state_dict(s); });
    CHECK(contains(e, "missing"));
    CHECK(contains(e, "lin.bias"));
    CHECK(!contains(e, "unexpected"));
  }
  SUBCASE("missing buffer") {
    nn::StateDict s = source.state_dict();
    s.erase("running");
    const std::string e = error_of([&] { target.load_state_dict(s); });
    CHECK(contains(e, "missing"));
    CHECK(contains(e, "running"));
  }
  SUBCASE("unexpected") {
    nn::StateDict s = source.state_dict();
    s.emplace("lin.extra", zeros({2}));
    const std::string e = error_of([&] { target.load_state_dict(s); });
    CHECK(contains(e, "unexpected"));
    CHECK(contains(e, "lin.extra"));
    CHECK(!contains(e, "missing"));
  }
  SUBCASE("mis-shaped") {
    nn::StateDict s = source.state_dict();
    s["lin.weight"] = zeros({3, 3});
    const std::string e = error_of([&] { target.load_state_dict(s); });
    CHECK(contains(e, "lin.weight"));
    CHECK(contains(e, "[2, 3]"));
    CHECK(contains(e, "[3, 3]"));
  }
  SUBCASE("all three at once, in one message") {
    nn::StateDict s = source.state_dict();
    s.erase("lin.bias");
    s.emplace("ghost", zeros({1}));
    s["scale"] = zeros({5});
    const std::string e = error_of([&] { target.load_state_dict(s); });
    CHECK(contains(e, "lin.bias"));
    CHECK(contains(e, "ghost"));
    CHECK(contains(e, "scale"));
    CHECK(contains(e, "[5]"));
  }
  // Valid entries were not copied either.
  CHECK(values(target.lin->weight) == before_w);
  CHECK(values(target.scale) == before_scale);
}

// ============================================================== layers

TEST_CASE("Linear: y = x W^T + b, real, against a hand computation, with gradients") {
  nn::Linear lin(3, 2, true);
  ops::copy_(lin.weight, from_vector<float>({1, 2, 3, -1, 0.5f, 2}, {2, 3}));
  ops::copy_(lin.bias, from_vector<float>({0.25f, -4}));
  const Tensor x = from_vector<float>({1, -2, 0.5f, 3, 1, -1}, {2, 3});
  const Tensor y = lin.forward(x);
  CHECK(y.shape() == Dims{2, 2});
  // row 0: 1-4+1.5+0.25 = -1.25, -1-1+1-4 = -5; row 1: 3+2-3+0.25 = 2.25, -3+0.5-2-4 = -8.5
  check_close(values(y), {-1.25, -5, 2.25, -8.5}, {.rtol = 1e-6});

  // d/dW sum(y * R) = R^T x, d/db = sum_rows R.
  const Tensor R = from_vector<float>({1, 2, -1, 0.5f}, {2, 2});
  sum(y * R).backward();
  std::vector<double> dw(6, 0.0);
  const std::vector<double> xv = values(x), rv = values(R);
  for (int o = 0; o < 2; ++o)
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 2; ++i) dw[o * 3 + k] += rv[i * 2 + o] * xv[i * 3 + k];
  check_close(values(lin.weight.grad()), dw, {.rtol = 1e-6});
  check_close(values(lin.bias.grad()), {0.0, 2.5}, {.rtol = 1e-6});

  // A 3-d input is a batch of rows.
  const Tensor x3 = reshape(x, {1, 2, 3});
  CHECK(values(lin.forward(x3)) == values(y));
  CHECK(lin.forward(x3).shape() == Dims{1, 2, 2});
  CHECK(!error_of([&] { lin.forward(ones({2, 4})); }).empty());
}

TEST_CASE("Linear with complex64 weights and bias: no conjugation, y = x W^T + b") {
  Generator gen(5);
  nn::Linear lin(3, 2, true, DType::Complex64, &gen);
  CHECK(lin.weight.dtype() == DType::Complex64);
  CHECK(lin.bias.dtype() == DType::Complex64);
  const std::vector<c128> W{{1, 2}, {0, -1}, {3, 0.5}, {-1, 1}, {2, 2}, {0.5, 0}};
  const std::vector<c128> b{{0.5, -0.5}, {1, 3}};
  const std::vector<c128> X{{1, 1}, {2, -1}, {0, 0.5}, {-1, 0}, {0.25, 2}, {1, -3}};
  ops::copy_(lin.weight, from_vector<c128>(W, {2, 3}));
  ops::copy_(lin.bias, from_vector<c128>(b));
  const Tensor y = lin.forward(to(from_vector<c128>(X, {2, 3}), DType::Complex64));
  CHECK(y.dtype() == DType::Complex64);
  std::vector<c128> want(4);
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 2; ++o) {
      c128 acc = b[o];
      for (int k = 0; k < 3; ++k) acc += X[i * 3 + k] * W[o * 3 + k];
      want[i * 2 + o] = acc;
    }
  check_close(cvalues(y), want, {.rtol = 1e-6, .atol = 1e-6});
}

TEST_CASE("Embedding picks rows and scatters gradients back, repeated ids accumulating") {
  Generator gen(9);
  nn::Embedding emb(5, 3, &gen);
  CHECK(emb.weight.shape() == Dims{5, 3});
  const std::vector<int64_t> ids{0, 4, 0, 2, 2, 1};
  const Tensor out = emb.forward(from_vector(ids, {2, 3}));
  CHECK(out.shape() == Dims{2, 3, 3});
  const std::vector<double> w = values(emb.weight), o = values(out);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int d = 0; d < 3; ++d) CHECK(o[i * 3 + d] == w[ids[i] * 3 + d]);

  const Tensor R = randn({2, 3, 3}, DType::Float32, &gen);
  sum(out * R).backward();
  std::vector<double> want(15, 0.0);
  const std::vector<double> r = values(R);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int d = 0; d < 3; ++d) want[ids[i] * 3 + d] += r[i * 3 + d];
  check_close(values(emb.weight.grad()), want, {.rtol = 1e-6, .atol = 1e-7});
  CHECK(!error_of([&] { emb.forward(from_vector<int>({5})); }).empty());
}

TEST_CASE("RMSNorm against the formula, and rms_norm's gradient by finite differences") {
  nn::RMSNorm norm(4, 1e-5);
  CHECK(values(norm.weight) == std::vector<double>{1, 1, 1, 1});
  ops::copy_(norm.weight, from_vector<float>({1, 2, 0.5f, -1}));
  const std::vector<double> xv{1, -2, 3, 0.5, 0.1, 0.2, -0.3, 0.4};
  const Tensor x = to(from_vector(xv, {2, 4}), DType::Float32);
  const std::vector<double> g{1, 2, 0.5, -1};
  std::vector<double> want(8);
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 4; ++i) ms += xv[r * 4 + i] * xv[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) want[r * 4 + i] = xv[r * 4 + i] / std::sqrt(ms + 1e-5) * g[i];
  }
  check_close(values(norm.forward(x)), want, {.rtol = 2e-6});
  // eps matters: a tiny row is not blown up to unit RMS.
  nn::RMSNorm big_eps(4, 1.0);
  const std::vector<double> tiny = values(big_eps.forward(full({1, 4}, 1e-3)));
  check_close(tiny, std::vector<double>(4, 1e-3 / std::sqrt(1e-6 + 1.0)), {.rtol = 1e-5});

  Generator gen(21);
  check_grad("rms_norm 2-d", [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); },
             {leaf(gen, {3, 5}), leaf(gen, {5})});
  check_grad("rms_norm 3-d, large eps", [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 0.5); },
             {leaf(gen, {2, 3, 4}), leaf(gen, {4})});
}

TEST_CASE("LayerNorm against the formula (biased variance), and its gradient by finite differences") {
  nn::LayerNorm ln(3, 1e-5);
  ops::copy_(ln.weight, from_vector<float>({2, -1, 0.5f}));
  ops::copy_(ln.bias, from_vector<float>({0.1f, 0.2f, 0.3f}));
  const std::vector<double> xv{1, 2, 6, -1, 0, 4};
  const Tensor x = to(from_vector(xv, {2, 3}), DType::Float32);
  const std::vector<double> w{2, -1, 0.5}, b{0.1, 0.2, 0.3};
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r) {
    const double mu = (xv[r * 3] + xv[r * 3 + 1] + xv[r * 3 + 2]) / 3.0;
    double var = 0;
    for (int i = 0; i < 3; ++i) var += (xv[r * 3 + i] - mu) * (xv[r * 3 + i] - mu) / 3.0;
    for (int i = 0; i < 3; ++i) want[r * 3 + i] = (xv[r * 3 + i] - mu) / std::sqrt(var + 1e-5) * w[i] + b[i];
  }
  check_close(values(ln.forward(x)), want, {.rtol = 2e-6, .atol = 1e-6});

  Generator gen(22);
  check_grad("LayerNorm", [](const std::vector<Tensor>& in) {
    nn::LayerNorm m(4, 1e-5);
    m.weight = in[1];
    m.bias = in[2];
    return m.forward(in[0]);
  }, {leaf(gen, {3, 4}), leaf(gen, {4}), leaf(gen, {4})});
}

TEST_CASE("SwiGLU: W2 (silu(W1 x) * (W3 x))") {
  Generator gen(13);
  nn::SwiGLU ffn(4, 6, &gen);
  CHECK(names_of(ffn.named_parameters()) == std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"});
  CHECK(ffn.w1->weight.shape() == Dims{6, 4});
  CHECK(ffn.w2->weight.shape() == Dims{4, 6});
  CHECK(!ffn.w1->bias.defined());
  const Tensor x = randn({3, 4}, DType::Float32, &gen);
  const std::vector<double> xv = values(x), w1 = values(ffn.w1->weight), w2 = values(ffn.w2->weight), w3 = values(ffn.w3->weight);
  std::vector<double> want(12, 0.0);
  for (int r = 0; r < 3; ++r) {
    std::vector<double> a(6);
    for (int h = 0; h < 6; ++h) {
      double u = 0, v = 0;
      for (int k = 0; k < 4; ++k) {
        u += w1[h * 4 + k] * xv[r * 4 + k];
        v += w3[h * 4 + k] * xv[r * 4 + k];
      }
      a[h] = u / (1.0 + std::exp(-u)) * v;
    }
    for (int o = 0; o < 4; ++o)
      for (int h = 0; h < 6; ++h) want[r * 4 + o] += w2[o * 6 + h] * a[h];
  }
  check_close(values(ffn.forward(x)), want, {.rtol = 1e-5, .atol = 1e-7});
}

TEST_CASE("swiglu: the fused silu(gate) * up against the composed ops, its gradients, and bad input") {
  Generator gen(31);
  // Large enough to be split across threads; the tails of the sigmoid included.
  const Tensor gate = ops::binary(ops::Binary::Mul, randn({300, 129}, DType::Float32, &gen), scalar_tensor(8.0, DType::Float32));
  const Tensor up = randn({300, 129}, DType::Float32, &gen);
  ops::copy_(ops::narrow(ops::reshape(gate, {-1}), 0, 0, 4), from_vector<float>({-100.0f, 100.0f, 0.0f, -30.0f}));
  const Tensor g = randn({300, 129}, DType::Float32, &gen);
  const std::vector<double> gv = values(gate), uv = values(up), grad = values(g);
  std::vector<double> want(gv.size()), want_dgate(gv.size()), want_dup(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-gv[i]));
    want[i] = gv[i] * s * uv[i];
    want_dup[i] = grad[i] * gv[i] * s;
    want_dgate[i] = grad[i] * uv[i] * s * (1.0 + gv[i] * (1.0 - s));
  }
  // float32 against the double-precision formula: a few ulps of each value
  // (atol only for values that round to zero, e.g. silu(-100)). silu' crosses
  // zero near a = -1.28, where 1 + a (1 - s) cancels: there dgate is held to
  // float32's rounding of its terms, 1e-6 of the largest gradient.
  auto largest = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
  };
  check_close(values(ops::swiglu(gate, up)), want, {.rtol = 1e-5, .atol = 1e-30});
  const ops::SwigluGrads d = ops::swiglu_backward(g, gate, up);
  check_close(values(d.dgate), want_dgate, {.rtol = 1e-5, .atol = 1e-6 * largest(want_dgate)});
  check_close(values(d.dup), want_dup, {.rtol = 1e-5, .atol = 1e-30});

  // The same bits whatever the thread count: the split only divides the elements.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one_thread = ops::swiglu(gate, up).to_vector<float>();
  omp_set_num_threads(std::max(2, threads));
  CHECK(ops::swiglu(gate, up).to_vector<float>() == one_thread);
  omp_set_num_threads(threads);

  check_grad("swiglu", [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); }, {leaf(gen, {3, 7}), leaf(gen, {3, 7})});
  // Through nn::SwiGLU, the fused and the composed activation agree.
  nn::SwiGLU ffn(8, 12, &gen);
  const Tensor x = randn({5, 8}, DType::Float32, &gen);
  const Tensor composed = ffn.w2->forward(silu(ffn.w1->forward(x)) * ffn.w3->forward(x));
  check_close(values(ffn.forward(x)), values(composed), {.rtol = 1e-5, .atol = 1e-7});

  CHECK_THROWS_WITH(ops::swiglu(gate, ops::narrow(up, 0, 0, 2)), doctest::Contains("gate shape [300, 129] differs from up shape [2, 129]"));
  CHECK_THROWS_WITH(ops::swiglu(gate, ops::to(up, DType::Float64)), doctest::Contains("differs from up dtype"));
  CHECK_THROWS_WITH(ops::swiglu(ops::to(gate, DType::Complex64), ops::to(up, DType::Complex64)), doctest::Contains("real floating dtypes only"));
}

TEST_CASE("Dropout: seeded, identity in eval, expectation preserved") {
  const Tensor x = ones({2000});
  nn::Dropout a(0.5, 7), b(0.5, 7), c(0.5, 8);
  const std::vector<double> ya = values(a.forward(x)), yb = values(b.forward(x)), yc = values(c.forward(x));
  CHECK(ya == yb);  // same seed, same mask
  CHECK(ya != yc);  // another seed, another mask
  CHECK(values(a.forward(x)) != ya);  // the generator moves on
  CHECK(std::all_of(ya.begin(), ya.end(), [](double v) { return v == 0.0 || v == 2.0; }));

  a.eval();
  CHECK(values(a.forward(x)) == values(x));
  nn::Dropout off(0.0, 1);
  CHECK(values(off.forward(x)) == values(x));

  // E[dropout(x)] = x: zeros with probability p, survivors scaled by 1/(1-p).
  Generator gen(3);
  const Tensor big = uniform({200000}, 0.5, 1.5, DType::Float32, &gen);
  nn::Dropout d(0.25, 11);
  const Tensor y = d.forward(big);
  const std::vector<double> yv = values(y), bv = values(big);
  size_t zeros_seen = 0, badly_scaled = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0.0) ++zeros_seen;
    else if (std::abs(yv[i] - bv[i] / 0.75) > 1e-6 * yv[i]) ++badly_scaled;
  }
  CHECK(badly_scaled == 0);
  const double frac = static_cast<double>(zeros_seen) / static_cast<double>(yv.size());
  CHECK(frac == doctest::Approx(0.25).epsilon(0.02).scale(0));  // 2% of 0.25 (5 sd), not 2% of 1.25
  CHECK(mean(y).item<double>() == doctest::Approx(mean(big).item<double>()).epsilon(0.01));

  // The gradient is the same mask and scale.
  Tensor leaf_x = ones({1000});
  leaf_x.requires_grad_();
  nn::Dropout e(0.4, 5);
  const Tensor out = e.forward(leaf_x);
  sum(out).backward();
  check_close(values(leaf_x.grad()), values(out), {.rtol = 1e-6});

  CHECK(contains(error_of([] { nn::Dropout bad(1.0); }), "Dropout"));
  CHECK(!error_of([] { nn::Dropout bad(-0.1); }).empty());
}

// ============================================================== losses

TEST_CASE("cross_entropy equals -log_softmax gathered at the targets, with ignore_index and both reductions") {
  Generator gen(31);
  const Tensor logits64 = randn({6, 5}, DType::Float64, &gen) * 2.0;

  auto composed = [](const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore, bool want_mean) {
    std::vector<int64_t> safe;
    std::vector<double> mask;
    for (int64_t t : targets) {
      safe.push_back(t == ignore ? 0 : t);
      mask.push_back(t == ignore ? 0.0 : 1.0);
    }
    const int64_t rows = static_cast<int64_t>(targets.size());
    const Tensor picked = gather(log_softmax(logits, 1), 1, from_vector(safe, {rows, 1}));
    const Tensor total = -sum(reshape(picked, {rows}) * to(from_vector(mask), logits.dtype()));
    double count = 0;
    for (double m : mask) count += m;
    return want_mean ? total / count : total;
  };

  struct Case {
    std::vector<int64_t> targets;
    int64_t ignore;
    bool mean;
  };
  const Case cases[] = {
      {{1, 4, -100, 0, 3, -100}, -100, true},
      {{1, 4, -100, 0, 3, -100}, -100, false},
      {{1, 4, 3, 0, 3, 2}, 3, true},  // a custom ignore_index that is a valid class
      {{1, 4, 3, 0, 3, 2}, 3, false},
      {{1, 4, 3, 0, 3, 2}, -100, true},  // nothing ignored
  };
  for (const Case& c : cases) {
    CAPTURE(c.ignore);
    CAPTURE(c.mean);
    const Tensor targets = from_vector(c.targets);
    Tensor a = logits64.detach().clone(), b = logits64.detach().clone();
    a.requires_grad_();
    b.requires_grad_();
    const Tensor fused = cross_entropy(a, targets, c.ignore, c.mean);
    const Tensor ref = composed(b, c.targets, c.ignore, c.mean);
    CHECK(fused.numel() == 1);
    CHECK(fused.item<double>() == doctest::Approx(ref.item<double>()).epsilon(1e-12));
    fused.backward();
    ref.backward();
    check_close(values(a.grad()), values(b.grad()), {.rtol = 1e-10, .atol = 1e-12});
    // Ignored rows get no gradient.
    const std::vector<double> ga = values(a.grad());
    for (size_t r = 0; r < c.targets.size(); ++r)
      if (c.targets[r] == c.ignore)
        for (int v = 0; v < 5; ++v) CHECK(ga[r * 5 + v] == 0.0);

    const Tensor f32 = cross_entropy(to(logits64, DType::Float32), targets, c.ignore, c.mean);
    CHECK(f32.item<double>() == doctest::Approx(ref.item<double>()).epsilon(1e-5));
  }
  // The mean differs from the sum by the count of rows that were not ignored.
  const Tensor t = from_vector<int64_t>({1, 4, -100, 0, 3, -100});
  CHECK(cross_entropy(logits64, t, -100, false).item<double>() ==
        doctest::Approx(4.0 * cross_entropy(logits64, t, -100, true).item<double>()).epsilon(1e-12));
}

// float32 takes a vectorised exp and a float32 sum per row (tensor/cpu/fused.cpp):
// against float64 on the same values, over a byte vocabulary and one that
// leaves a vector tail, with a -inf logit (a masked class) in one row.
TEST_CASE("cross_entropy in float32 agrees with float64 to float32's precision, loss and gradient") {
  Generator gen(33);
  for (int64_t vocab : {256, 259}) {
    CAPTURE(vocab);
    const int64_t rows = 37;
    Tensor l32 = randn({rows, vocab}, DType::Float32, &gen) * 4.0;
    std::vector<float> raw = l32.to_vector<float>();
    raw[5 * vocab + 7] = -std::numeric_limits<float>::infinity();
    l32 = from_vector(raw, {rows, vocab});
    std::vector<int64_t> t(rows);
    for (int64_t r = 0; r < rows; ++r) t[r] = (r * 37 + 11) % vocab;
    t[3] = -100;
    const Tensor targets = from_vector(t);
    Tensor a = l32.clone(), b = to(l32, DType::Float64);
    a.requires_grad_();
    b.requires_grad_();
    const Tensor loss32 = cross_entropy(a, targets), loss64 = cross_entropy(b, targets);
    CHECK(loss32.item<double>() == doctest::Approx(loss64.item<double>()).epsilon(1e-6));
    loss32.backward();
    loss64.backward();
    const std::vector<float> g32 = a.grad().to_vector<float>();
    const std::vector<double> g64 = b.grad().to_vector<double>();
    double largest = 0;
    for (double g : g64) largest = std::max(largest, std::abs(g));
    size_t bad = 0;
    for (size_t i = 0; i < g32.size(); ++i)
      if (!(std::abs(g32[i] - g64[i]) <= 1e-5 * std::abs(g64[i]) + 1e-7 * largest)) ++bad;
    CHECK_MESSAGE(bad == 0, bad, " of ", g32.size(), " gradient elements off");
    CHECK(g32[5 * vocab + 7] == 0.0f);
  }
}

TEST_CASE("cross_entropy gradient by finite differences") {
  Generator gen(32);
  const Tensor targets = from_vector<int64_t>({2, -100, 0, 4});
  check_grad("cross_entropy mean", [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); },
             {leaf(gen, {4, 5})});
  check_grad("cross_entropy sum", [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, -100, false); },
             {leaf(gen, {4, 5})});
  check_grad("cross_entropy ignore 0",
             [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], from_vector<int64_t>({2, 1, 0, 4}), 0, true); },
             {leaf(gen, {4, 5})});
}

TEST_CASE("mse_loss: mean squared (complex: squared modulus) error and its gradient") {
  Tensor p = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  p.requires_grad_();
  const Tensor t = from_vector<float>({1.5f, 2, 1, 4, 8, 5}, {2, 3});
  const Tensor l = nn::mse_loss(p, t);
  CHECK(l.numel() == 1);
  CHECK(l.item<double>() == doctest::Approx((0.25 + 0 + 4 + 0 + 9 + 1) / 6.0));
  l.backward();
  check_close(values(p.grad()), {2 * -0.5 / 6, 0, 2 * 2.0 / 6, 0, 2 * -3.0 / 6, 2 * 1.0 / 6}, {.rtol = 1e-6, .atol = 1e-7});

  Tensor z = from_vector<c64>({{1, 2}, {0, -1}});
  z.requires_grad_();
  const Tensor zt = from_vector<c64>({{0, 0}, {3, 1}});
  const Tensor lz = nn::mse_loss(z, zt);
  CHECK(!lz.is_complex());
  CHECK(lz.item<double>() == doctest::Approx((5.0 + 13.0) / 2.0));
  lz.backward();
  // PyTorch's convention: grad = dL/dRe + i dL/dIm = 2 (z - t) / n.
  check_close(cvalues(z.grad()), {c128(1, 2), c128(-3, -2)}, {.rtol = 1e-6});

  CHECK(contains(error_of([] { nn::mse_loss(ones({2}), ones({3})); }), "mse_loss"));
}

// ============================================================== optimizers

namespace {
// PyTorch's AdamW on one real scalar, in double.
struct AdamScalar {
  double p, m = 0, v = 0;
  void step(double g, int64_t t, double lr, double b1, double b2, double eps, double wd) {
    p *= 1.0 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double mhat = m / (1 - std::pow(b1, static_cast<double>(t)));
    const double vhat = v / (1 - std::pow(b2, static_cast<double>(t)));
    p -= lr * mhat / (std::sqrt(vhat) + eps);
  }
};
}  // namespace

TEST_CASE("AdamW: two steps against the formula; decay on one group only; complex params on their real view") {
  Tensor a = from_vector<float>({0.5f, -1.0f, 2.0f});               // decayed
  Tensor z = from_vector<c64>({{1.0f, -0.5f}, {0.25f, 2.0f}});      // decayed, complex
  Tensor b = from_vector<float>({1.0f, 3.0f});                      // not decayed, half lr
  Tensor frozen = from_vector<float>({4.0f});                       // never gets a gradient
  for (Tensor* t : {&a, &z, &b, &frozen}) t->requires_grad_();
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  nn::AdamW opt({{{{"a", a}, {"z", z}}, wd, 1.0}, {{{"b", b}, {"frozen", frozen}}, 0.0, 0.5}}, {lr, b1, b2, eps});

  // Real scalars: a0 a1 a2 | z0.re z0.im z1.re z1.im | b0 b1.
  std::vector<AdamScalar> ref;
  for (double v : {0.5, -1.0, 2.0, 1.0, -0.5, 0.25, 2.0, 1.0, 3.0}) ref.push_back({v});
  const std::vector<std::vector<double>> grads{{0.1, -0.2, 0.3, 0.5, -1.0, 2.0, 0.01, -0.3, 0.7},
                                               {-0.4, 0.05, 0.3, 1.5, 0.2, -2.0, 0.5, 0.6, -0.1}};
  for (int step = 1; step <= 2; ++step) {
    const std::vector<double>& g = grads[step - 1];
    a.set_grad(to(from_vector(std::vector<double>(g.begin(), g.begin() + 3)), DType::Float32));
    z.set_grad(from_vector<c64>({{static_cast<float>(g[3]), static_cast<float>(g[4])}, {static_cast<float>(g[5]), static_cast<float>(g[6])}}));
    b.set_grad(to(from_vector(std::vector<double>(g.begin() + 7, g.end())), DType::Float32));
    opt.step();
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i].step(static_cast<double>(static_cast<float>(g[i])), step, i < 7 ? lr : lr * 0.5, b1, b2, eps, i < 7 ? wd : 0.0);
  }
  CHECK(opt.steps() == 2);
  std::vector<double> want;
  for (const AdamScalar& s : ref) want.push_back(s.p);
  check_close(values(a), {want[0], want[1], want[2]}, {.rtol = 1e-6});
  check_close(cvalues(z), {c128(want[3], want[4]), c128(want[5], want[6])}, {.rtol = 1e-6});
  check_close(values(b), {want[7], want[8]}, {.rtol = 1e-6});
  CHECK(values(frozen) == std::vector<double>{4.0});

  // The moments are exposed by name, for checkpoints.
  const nn::StateDict st = opt.state();
  CHECK(st.size() == 8);
  CHECK(st.at("exp_avg.z").dtype() == DType::Complex64);
  check_close(cvalues(st.at("exp_avg_sq.z")), {c128(ref[3].v, ref[4].v), c128(ref[5].v, ref[6].v)}, {.rtol = 1e-6});
  check_close(values(st.at("exp_avg.a")), {ref[0].m, ref[1].m, ref[2].m}, {.rtol = 1e-6});
  CHECK(values(st.at("exp_avg.frozen")) == std::vector<double>{0.0});
}

TEST_CASE("AdamW: a step the device declines (take false) changes nothing, and the steps taken count as if it never came") {
  Generator gen(43);
  const Tensor start = randn({5, 3}, DType::Float32, &gen);
  std::vector<Tensor> gs;
  for (int i = 0; i < 3; ++i) gs.push_back(randn({5, 3}, DType::Float32, &gen));
  const nn::AdamWOptions o{0.05, 0.9, 0.95, 1e-8};
  Tensor p1 = start.clone(), p2 = start.clone();
  p1.requires_grad_();
  p2.requires_grad_();
  nn::AdamW plain({{{{"p", p1}}, 0.1, 1.0}}, o), declining({{{{"p", p2}}, 0.1, 1.0}}, o);
  const Tensor yes = scalar_tensor(1.0, DType::Bool), no = scalar_tensor(0.0, DType::Bool);
  for (int i = 0; i < 3; ++i) {
    p1.set_grad(gs[i]);
    plain.step();
    p2.set_grad(gs[i]);
    declining.step(yes);
    if (i == 1) {  // a declined step between the second and third: a NaN gradient that must not land
      const std::vector<double> before = values(p2), m_before = values(declining.state().at("exp_avg.p"));
      p2.set_grad(full({5, 3}, NAN));
      declining.step(no);
      CHECK(values(p2) == before);
      CHECK(values(declining.state().at("exp_avg.p")) == m_before);
      CHECK(declining.steps() == 2);
    }
  }
  CHECK(declining.steps() == 3);
  CHECK(values(p1) == values(p2));  // the same bias corrections: bit for bit
  CHECK(values(plain.state().at("exp_avg_sq.p")) == values(declining.state().at("exp_avg_sq.p")));
  // The condition must be one element on the parameters' device.
  CHECK(contains(error_of([&] { declining.step(from_vector<double>({1.0, 1.0})); }), "one element"));
}

TEST_CASE("AdamW: loading the state into a fresh optimizer continues identically") {
  Generator gen(41);
  Tensor p1 = randn({4, 3}, DType::Float32, &gen), q1 = randn({3}, DType::Float32, &gen);
  p1.requires_grad_();
  q1.requires_grad_();
  const nn::AdamWOptions o{0.05, 0.9, 0.95, 1e-8};
  nn::AdamW opt1({{{{"p", p1}}, 0.1, 1.0}, {{{"q", q1}}, 0.0, 1.0}}, o);
  std::vector<Tensor> gs;
  for (int i = 0; i < 4; ++i) gs.push_back(randn({4, 3}, DType::Float32, &gen));
  std::vector<Tensor> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(randn({3}, DType::Float32, &gen));
  for (int i = 0; i < 2; ++i) {
    p1.set_grad(gs[i]);
    q1.set_grad(hs[i]);
    opt1.step();
  }
  Tensor p2 = p1.detach().clone(), q2 = q1.detach().clone();
  p2.requires_grad_();
  q2.requires_grad_();
  nn::AdamW opt2({{{{"p", p2}}, 0.1, 1.0}, {{{"q", q2}}, 0.0, 1.0}}, o);
  nn::StateDict st;
  for (const auto& [k, v] : opt1.state()) st.emplace(k, v.clone());
  opt2.load_state(st, opt1.steps());
  CHECK(opt2.steps() == 2);
  for (int i = 2; i < 4; ++i) {
    p1.set_grad(gs[i]);
    q1.set_grad(hs[i]);
    p2.set_grad(gs[i]);
    q2.set_grad(hs[i]);
    opt1.step();
    opt2.step();
  }
  CHECK(values(p1) == values(p2));
  CHECK(values(q1) == values(q2));

  nn::StateDict broken = opt1.state();
  broken.erase("exp_avg_sq.q");
  CHECK(contains(error_of([&] { opt2.load_state(broken, 2); }), "exp_avg_sq.q"));
  broken = opt1.state();
  broken["exp_avg.p"] = zeros({3, 4});
  CHECK(contains(error_of([&] { opt2.load_state(broken, 2); }), "exp_avg.p"));
}

TEST_CASE("SGD with momentum: two steps against the formula, with and without weight decay, real and complex") {
  const double lr = 0.1, mom = 0.9, wd = 0.01;
  Tensor p = from_vector<float>({1.0f, -2.0f, 0.5f});
  Tensor q = from_vector<float>({3.0f, -1.0f});
  Tensor z = from_vector<c64>({{1.0f, 1.0f}, {-2.0f, 0.5f}});
  for (Tensor* t : {&p, &q, &z}) t->requires_grad_();
  nn::SGD decayed({{"p", p}}, {.lr = lr, .momentum = mom, .weight_decay = wd});
  nn::SGD plain({{"q", q}, {"z", z}}, {.lr = lr, .momentum = mom});

  const std::vector<double> gp1{0.5, -1, 2}, gp2{-0.25, 0.5, 1};
  const std::vector<double> gq1{1, 2}, gq2{-3, 0.5};
  const std::vector<c128> gz1{{0.5, -1}, {2, 0}}, gz2{{1, 1}, {-1, 0.25}};

  // PyTorch: d = g + wd p; buf = d on the first step, then mom buf + d; p -= lr buf.
  std::vector<double> P{1, -2, 0.5}, Q{3, -1}, bufP(3), bufQ(2);
  std::vector<c128> Z{{1, 1}, {-2, 0.5}}, bufZ(2);
  for (int step = 0; step < 2; ++step) {
    const auto& gp = step == 0 ? gp1 : gp2;
    const auto& gq = step == 0 ? gq1 : gq2;
    const auto& gz = step == 0 ? gz1 : gz2;
    p.set_grad(to(from_vector(gp), DType::Float32));
    q.set_grad(to(from_vector(gq), DType::Float32));
    z.set_grad(to(from_vector(gz), DType::Complex64));
    decayed.step();
    plain.step();
    for (int i = 0; i < 3; ++i) {
      const double d = gp[i] + wd * P[i];
      bufP[i] = step == 0 ? d : mom * bufP[i] + d;
      P[i] -= lr * bufP[i];
    }
    for (int i = 0; i < 2; ++i) {
      bufQ[i] = step == 0 ? gq[i] : mom * bufQ[i] + gq[i];
      Q[i] -= lr * bufQ[i];
      bufZ[i] = step == 0 ? gz[i] : mom * bufZ[i] + gz[i];
      Z[i] -= lr * bufZ[i];
    }
  }
  check_close(values(p), P, {.rtol = 1e-6, .atol = 1e-7});
  check_close(values(q), Q, {.rtol = 1e-6});
  check_close(cvalues(z), Z, {.rtol = 1e-6});
  // The gradient itself is left as it was.
  CHECK(values(p.grad()) == gp2);

  // Without momentum: plain gradient descent.
  Tensor w = from_vector<float>({1.0f, 2.0f});
  w.requires_grad_();
  nn::SGD sgd({{"w", w}}, {.lr = 0.5});
  w.set_grad(from_vector<float>({2.0f, -4.0f}));
  sgd.step();
  CHECK(values(w) == std::vector<double>{0.0, 4.0});
  sgd.zero_grad();
  CHECK(!w.grad().defined());
  // PyTorch's refusals.
  CHECK(contains(error_of([&] { nn::SGD({{"w", w}}, {.lr = 0.1, .nesterov = true}); }), "Nesterov momentum needs momentum > 0"));
  CHECK(contains(error_of([&] { nn::SGD({{"w", w}}, {.lr = -1.0}); }), "must be >= 0"));
}

TEST_CASE("warmup_cosine_lr: linear warm-up, cosine decay, floor at min_lr") {
  const double hi = 1.0, lo = 0.1;
  // Relative (scale 0): lo = 0.1 is compared to 1e-5 of itself, not of 1.1.
  CHECK(nn::warmup_cosine_lr(0, 10, 110, hi, lo) == doctest::Approx(0.1).scale(0));
  CHECK(nn::warmup_cosine_lr(4, 10, 110, hi, lo) == doctest::Approx(0.5));
  CHECK(nn::warmup_cosine_lr(9, 10, 110, hi, lo) == doctest::Approx(1.0));
  CHECK(nn::warmup_cosine_lr(10, 10, 110, hi, lo) == doctest::Approx(1.0));
  CHECK(nn::warmup_cosine_lr(35, 10, 110, hi, lo) == doctest::Approx(lo + 0.5 * (hi - lo) * (1 + std::cos(M_PI * 0.25))));
  CHECK(nn::warmup_cosine_lr(60, 10, 110, hi, lo) == doctest::Approx(0.55));
  CHECK(nn::warmup_cosine_lr(110, 10, 110, hi, lo) == doctest::Approx(lo).scale(0));
  CHECK(nn::warmup_cosine_lr(500, 10, 110, hi, lo) == doctest::Approx(lo).scale(0));
  // No warm-up: starts at the peak.
  CHECK(nn::warmup_cosine_lr(0, 0, 100, hi, lo) == doctest::Approx(hi));
  CHECK(nn::warmup_cosine_lr(50, 0, 100, hi, lo) == doctest::Approx(0.55));
  // Monotone decay after the warm-up.
  double prev = 2.0;
  for (int64_t s = 10; s <= 110; ++s) {
    const double v = nn::warmup_cosine_lr(s, 10, 110, hi, lo);
    CHECK(v <= prev);
    CHECK(v >= lo - 1e-12);
    prev = v;
  }
}

TEST_CASE("clip_grad_norm_ keeps the norm on the device and matches the host formula bit for bit") {
  // The host loop clip_grad_norm ran before the norm moved to the device:
  // float64 sum of each gradient's squared norm, factor rounded to the gradient's precision.
  auto host_clip = [](const std::vector<Tensor>& params, double max_norm) {
    double total = 0;
    for (const Tensor& p : params)
      if (p.grad().defined()) {
        const double n = ops::norm(p.grad()).item<double>();
        total += n * n;
      }
    total = std::sqrt(total);
    const double coef = max_norm / (total + 1e-6);
    if (coef < 1.0)
      for (const Tensor& p : params)
        if (p.grad().defined()) ops::binary_(ops::Binary::Mul, p.grad(), scalar_tensor(coef, real_dtype(p.grad().dtype())));
    return total;
  };
  Generator gen(11);
  for (const double max_norm : {0.5, 3.0, 1e9, double(INFINITY)}) {
    CAPTURE(max_norm);
    std::vector<Tensor> mine, theirs;
    for (const auto& [shape, dtype] : std::vector<std::pair<Dims, DType>>{
             {{7, 5}, DType::Float32}, {{6}, DType::Complex64}, {{3, 4}, DType::Float64}, {{33}, DType::Float32}}) {
      const Tensor g = randn(shape, dtype, &gen);
      for (auto* list : {&mine, &theirs}) {
        Tensor p = zeros(shape, dtype).requires_grad_();
        p.set_grad(ops::clone(g));
        list->push_back(p);
      }
    }
    mine.push_back(zeros({2}).requires_grad_());  // no gradient: skipped
    const Tensor norm = nn::clip_grad_norm_(mine, max_norm);
    CHECK(norm.dim() == 0);
    CHECK(norm.dtype() == DType::Float64);
    CHECK(norm.item<double>() == host_clip(theirs, max_norm));
    for (size_t i = 0; i < theirs.size(); ++i) {
      const Tensor a = mine[i].grad().is_complex() ? ops::view_as_real(mine[i].grad()) : mine[i].grad();
      const Tensor b = theirs[i].grad().is_complex() ? ops::view_as_real(theirs[i].grad()) : theirs[i].grad();
      CHECK(a.to_vector<double>() == b.to_vector<double>());
    }
  }
  // A non-finite norm leaves the gradients as they were.
  Tensor p = zeros({3}).requires_grad_();
  p.set_grad(from_vector<float>({1.0f, NAN, 2.0f}));
  CHECK(std::isnan(nn::clip_grad_norm_({p}, 1.0).item<double>()));
  CHECK(p.grad().to_vector<double>()[0] == 1.0);
  CHECK(p.grad().to_vector<double>()[2] == 2.0);
}

TEST_CASE("clip_grad_norm returns the norm before clipping and scales every gradient to max_norm") {
  Tensor a = zeros({2}), z = zeros({1}, DType::Complex64), none = zeros({3});
  for (Tensor* t : {&a, &z, &none}) t->requires_grad_();
  auto set = [&] {
    a.set_grad(from_vector<float>({3, 4}));
    z.set_grad(from_vector<c64>({{0, 12}}));
  };
  set();
  // sqrt(9 + 16 + 144) = 13; complex entries count with their modulus.
  CHECK(nn::clip_grad_norm({a, z, none}, 100.0) == doctest::Approx(13.0));
  CHECK(values(a.grad()) == std::vector<double>{3, 4});  // under the limit: untouched

  set();
  CHECK(nn::clip_grad_norm({a, z, none}, 6.5) == doctest::Approx(13.0));
  const double k = 6.5 / 13.0;
  check_close(values(a.grad()), {3 * k, 4 * k}, {.rtol = 1e-6});
  check_close(cvalues(z.grad()), {c128(0, 12 * k)}, {.rtol = 1e-6});
  CHECK(!none.grad().defined());
  // Now at the limit: the new norm is max_norm.
  CHECK(nn::clip_grad_norm({a, z, none}, 6.5) == doctest::Approx(6.5).epsilon(1e-6));
  check_close(values(a.grad()), {3 * k, 4 * k}, {.rtol = 1e-6});
}

TEST_CASE("optimizers: bad hyper-parameters, a parameter listed twice and a bad state are refused, and a refusal changes nothing") {
  Tensor w = from_vector<float>({1.0f, 2.0f}), v = from_vector<float>({3.0f});
  w.requires_grad_(), v.requires_grad_();
  const nn::NamedTensors both{{"w", w}, {"v", v}};
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // What PyTorch refuses (ValueError there), and what is not finite.
  for (const nn::AdamWOptions& o : {nn::AdamWOptions{nan, 0.9, 0.999, 1e-8}, nn::AdamWOptions{-1, 0.9, 0.999, 1e-8}, nn::AdamWOptions{inf, 0.9, 0.999, 1e-8},
                                    nn::AdamWOptions{1e-3, 1.0, 0.999, 1e-8}, nn::AdamWOptions{1e-3, 0.9, -0.1, 1e-8}, nn::AdamWOptions{1e-3, 0.9, 0.999, -1},
                                    nn::AdamWOptions{1e-3, 0.9, 0.999, nan}})
    CHECK_THROWS_AS(nn::AdamW({{both, 0.0, 1.0}}, o), Error);
  CHECK_THROWS_WITH_AS(nn::AdamW({{both, -0.1, 1.0}}, {}), doctest::Contains("weight_decay"), Error);
  CHECK_THROWS_WITH_AS(nn::AdamW({{{{"w", w}}, 0.0, 1.0}, {{{"again", w}}, 0.1, 1.0}}, {}), doctest::Contains("again is w again"), Error);
  CHECK_THROWS_WITH_AS(nn::SGD({{"w", w}, {"w2", w}}, {0.1}), doctest::Contains("list each parameter once"), Error);
  CHECK_THROWS_AS(nn::SGD(both, {inf}), Error);
  CHECK_THROWS_AS(nn::SGD(both, {nan}), Error);

  nn::AdamW adam({{both, 0.0, 1.0}}, {0.1, 0.9, 0.999, 1e-8});
  CHECK_THROWS_WITH_AS(adam.set_lr(nan), doctest::Contains("invalid learning rate"), Error);
  CHECK_THROWS_AS(adam.set_lr(-1), Error);
  CHECK(adam.lr() == 0.1);
  w.set_grad(from_vector<float>({0.5f, -0.5f})), v.set_grad(from_vector<float>({1.0f}));
  adam.step();
  const nn::StateDict before = [&] {
    nn::StateDict copy;
    for (const auto& [k, t] : adam.state()) copy.emplace(k, ops::clone(t));
    return copy;
  }();
  const auto unchanged = [&] {
    for (const auto& [k, t] : adam.state()) CHECK(t.to_vector<float>() == before.at(k).to_vector<float>());
    CHECK(adam.steps() == 1);
  };
  // exp_avg.w is new and would be copied before the refusal of exp_avg.v's shape (before: it was).
  nn::StateDict bad_shape{{"exp_avg.w", full({2}, 7.0)}, {"exp_avg_sq.w", full({2}, 7.0)}, {"exp_avg.v", full({2}, 7.0)}, {"exp_avg_sq.v", full({1}, 7.0)}};
  for (auto& [k, t] : bad_shape) t = to(t, DType::Float32);
  CHECK_THROWS_WITH_AS(adam.load_state(bad_shape, 5), doctest::Contains("'exp_avg.v' has shape"), Error);
  unchanged();
  nn::StateDict good = before;
  CHECK_THROWS_WITH_AS(adam.load_state(good, -3), doctest::Contains("step count -3"), Error);
  unchanged();
  nn::StateDict extra = before;
  extra.emplace("exp_avg.stranger", to(full({1}, 1.0), DType::Float32));
  CHECK_THROWS_WITH_AS(adam.load_state(extra, 1), doctest::Contains("unexpected entr"), Error);
  unchanged();
  CHECK_NOTHROW(adam.load_state(good, 1));

  nn::SGD sgd(both, {0.1, 0.9});
  sgd.step();
  const std::vector<float> buffer_w = sgd.state().at("momentum_buffer.w").to_vector<float>();
  CHECK_THROWS_AS(sgd.set_lr(inf), Error);
  CHECK(sgd.lr() == 0.1);
  nn::StateDict sgd_bad{{"momentum_buffer.w", to(full({2}, 9.0), DType::Float32)}, {"momentum_buffer.v", to(full({3}, 9.0), DType::Float32)}};
  CHECK_THROWS_AS(sgd.load_state(sgd_bad), Error);
  CHECK(sgd.state().at("momentum_buffer.w").to_vector<float>() == buffer_w);
  CHECK_THROWS_WITH_AS(sgd.load_state({{"momentum_buffer.w", to(full({2}, 9.0), DType::Float32)}, {"other", to(full({1}, 9.0), DType::Float32)}}),
                       doctest::Contains("unexpected entry 'other'"), Error);
  CHECK(sgd.state().at("momentum_buffer.w").to_vector<float>() == buffer_w);
}
