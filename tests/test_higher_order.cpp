// Higher-order derivatives: grad() and backward(create_graph) semantics,
// gradgradcheck of the fused ops (the other ops get theirs through
// check_grad in test_autograd, test_nn and test_attention), the fused ops'
// create_graph gradients against their kernels, jvp and hvp against finite
// differences, and the Hessian-vector product of every position variant's
// model loss against finite differences of its gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

using V = std::vector<Tensor>;

// ||a - b|| / ||b|| over lists of tensors (complex ones as their pairs).
double relative_error(const V& a, const V& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = (a[i].is_complex() ? ops::view_as_real(a[i]) : a[i]).to_vector<double>();
    const auto y = (b[i].is_complex() ? ops::view_as_real(b[i]) : b[i]).to_vector<double>();
    REQUIRE(x.size() == y.size());
    for (size_t k = 0; k < x.size(); ++k) {
      diff += (x[k] - y[k]) * (x[k] - y[k]);
      norm += y[k] * y[k];
    }
  }
  return std::sqrt(diff / norm);
}

// x + s v for every tensor of a list, as new leaves that require grad.
V shifted(const V& x, const V& v, double s) {
  V out;
  for (size_t i = 0; i < x.size(); ++i) out.push_back(ops::binary(ops::Binary::Add, x[i].detach(), ops::binary(ops::Binary::Mul, v[i], scalar_like(v[i], s))).requires_grad_());
  return out;
}

V detached(const V& x) {
  V out;
  for (const Tensor& t : x) out.push_back(t.detach());
  return out;
}

}  // namespace

TEST_CASE("gradgradcheck rejects a derivative that is right but not differentiable") {
  Generator g(1);
  const Tensor x = leaf(g, {4});
  // x^2 whose backward uses a raw, unrecorded 2x: its first order is right, its second order is 0, not 2.
  const TensorFunction raw_square = [](const V& in) {
    return record("raw_square", ops::unary(ops::Unary::Square, in[0]), {in[0]}, [sx = SavedTensor(in[0])](const Tensor& gr) -> V {
      return {gr * ops::binary(ops::Binary::Mul, sx.get().detach(), scalar_like(gr, 2.0))};
    });
  };
  CHECK(gradcheck(raw_square, {x}).ok);
  const GradcheckResult r = gradgradcheck(raw_square, {x});
  CHECK_FALSE(r.ok);
  CHECK(contains(r.message, "input 0"));
  CHECK(gradgradcheck([](const V& in) { return square(in[0]); }, {x}).ok);
}

TEST_CASE("grad() returns gradients without writing .grad; allow_unused, grad_outputs and retain_graph follow PyTorch") {
  Generator g(2);
  const Tensor x = leaf(g, {3}), w = leaf(g, {3}), unused = leaf(g, {2});
  const Tensor y = sum(x * x * w);
  const V gx = grad({y}, {x, w}, {}, false, /*retain_graph=*/true);
  check_close(gx[0].to_vector<double>(), (2.0 * x.detach() * w.detach()).to_vector<double>(), {.rtol = 1e-12});
  check_close(gx[1].to_vector<double>(), (x.detach() * x.detach()).to_vector<double>(), {.rtol = 1e-12});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(gx[0].requires_grad());  // no create_graph: nothing recorded
  CHECK(contains(error_of([&] { grad({y}, {unused}, {}, false, true); }), "grad: input 0 (shape [2]) is not used by the outputs"));
  CHECK_FALSE(grad({y}, {unused}, {}, false, true, /*allow_unused=*/true)[0].defined());
  // a non-scalar output needs its grad_output
  const Tensor z = x * w;
  CHECK(contains(error_of([&] { grad({z}, {x}); }), "is not a real scalar"));
  const Tensor seed = from_vector<double>({1.0, -2.0, 0.5});
  check_close(grad({z}, {x}, {seed}, false, true)[0].to_vector<double>(), (seed * w.detach()).to_vector<double>(), {.rtol = 1e-12});
  // retain_graph defaults to create_graph: without either, a second pass fails
  grad({z}, {x}, {seed});
  CHECK(contains(error_of([&] { grad({z}, {x}, {seed}); }), "backward through the graph a second time"));
  CHECK(contains(error_of([&] { grad({y}, {x.detach()}); }), "grad: input 0 does not require grad"));
}

TEST_CASE("create_graph: d/dx of x^3 is 3x^2 with a graph, whose derivative is 6x; .grad accumulates out of place") {
  const Tensor x = from_vector<double>({0.5, -1.5, 2.0}).requires_grad_();
  const Tensor y = sum(x * x * x);
  const Tensor g1 = grad({y}, {x}, {}, /*create_graph=*/true)[0];
  REQUIRE(g1.requires_grad());
  check_close(g1.to_vector<double>(), std::vector<double>{0.75, 6.75, 12.0}, {.rtol = 1e-12});
  const Tensor g2 = grad({sum(g1)}, {x}, {}, false, /*retain_graph=*/true)[0];  // y's graph is walked again below
  check_close(g2.to_vector<double>(), std::vector<double>{3.0, -9.0, 12.0}, {.rtol = 1e-12});
  // backward(create_graph) leaves a .grad that is itself differentiable
  y.backward(Tensor(), false, /*create_graph=*/true);
  const Tensor xg = x.grad();
  REQUIRE(xg.requires_grad());
  x.set_grad(Tensor());
  sum(xg).backward();
  check_close(x.grad().to_vector<double>(), std::vector<double>{3.0, -9.0, 12.0}, {.rtol = 1e-12});
  // complex: f = |z|^2 z (not holomorphic); the second derivative through real pairs matches finite differences
  Generator g(3);
  const Tensor z = leaf(g, {3}, DType::Complex128);
  CHECK(gradgradcheck([](const V& in) { return in[0] * real(in[0] * conj(in[0])); }, {z}).ok);
}

TEST_CASE("fused ops pass gradgradcheck in float64 (their create_graph backward: the composed reference)") {
  Generator g(4);
  const Tensor z = randn({1, 3, 2, 2}, DType::Complex128, &g).requires_grad_();
  const Tensor delta = normal({2, 2}, 1.0, 0.5, DType::Float64, &g).requires_grad_();
  const Tensor bias = randn({2, 2}, DType::Float64, &g).requires_grad_();
  const Tensor beta = normal({2}, 1.0, 0.3, DType::Float64, &g).requires_grad_();
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    const GradcheckResult r = gradgradcheck(
        [&](const V& in) { return cmha_rotate(in[0], in[1], with_bias ? in[2] : Tensor(), in[3], 5, 10000.0); }, {z, delta, bias, beta});
    CHECK_MESSAGE(r.ok, r.message);
  }
  const Tensor table = ops::rotary_table(3, 2, 5, 10000.0, 512.0, +1, DType::Complex128);
  const GradcheckResult rot = gradgradcheck([&](const V& in) { return rotate(in[0], table); }, {z});
  CHECK_MESSAGE(rot.ok, rot.message);
  const Tensor scores = randn({1, 2, 3, 5}, DType::Float64, &g).requires_grad_();
  const Tensor slopes = from_vector<double>({0.5, 0.25});
  const GradcheckResult soft = gradgradcheck([&](const V& in) { return attention_softmax(in[0], 0.7, 2, slopes); }, {scores});
  CHECK_MESSAGE(soft.ok, soft.message);
  const Tensor gate = randn({2, 3}, DType::Float64, &g).requires_grad_(), up = randn({2, 3}, DType::Float64, &g).requires_grad_();
  const GradcheckResult glu = gradgradcheck([](const V& in) { return swiglu(in[0], in[1]); }, {gate, up});
  CHECK_MESSAGE(glu.ok, glu.message);
}

// euler_phase's backward (|z|^2 + eps in its denominator) and angle's (sgn(z))
// record their own graphs under create_graph.
TEST_CASE("euler_phase and angle pass gradgradcheck in complex128") {
  Generator g(12);
  const Tensor z = randn({6}, DType::Complex128, &g).requires_grad_();
  const GradcheckResult euler = gradgradcheck([](const V& in) { return euler_phase(in[0], ops::kEulerEps); }, {z});
  CHECK_MESSAGE(euler.ok, euler.message);
  const GradcheckResult ang = gradgradcheck([](const V& in) { return angle(in[0]); }, {z});
  CHECK_MESSAGE(ang.ok, ang.message);
}

TEST_CASE("under create_graph a fused op's gradient is its kernel's") {
  Generator g(5);
  const Tensor z = randn({2, 4, 2, 3}, DType::Complex128, &g).requires_grad_();
  const Tensor delta = normal({2, 3}, 1.0, 0.5, DType::Float64, &g).requires_grad_();
  const Tensor bias = randn({2, 3}, DType::Float64, &g).requires_grad_(), beta = normal({2}, 1.0, 0.3, DType::Float64, &g).requires_grad_();
  const Tensor x = randn({3, 5}, DType::Float64, &g).requires_grad_(), w = normal({5}, 1.0, 0.2, DType::Float64, &g).requires_grad_();
  const Tensor u = randn({3, 5}, DType::Float64, &g).requires_grad_();
  const Tensor q = randn({1, 6, 2, 4}, DType::Float64, &g).requires_grad_(), k = randn({1, 6, 2, 4}, DType::Float64, &g).requires_grad_();
  const Tensor v = randn({1, 6, 2, 4}, DType::Float64, &g).requires_grad_();
  const Tensor targets = from_vector<int64_t>({1, -100, 4});
  struct Case {
    std::string name;
    std::function<Tensor()> f;
    V inputs;
    bool linear = false;  // the gradient depends on the seed alone, so it has no graph
  };
  const Case cases[] = {
      {"cmha_rotate", [&] { return cmha_rotate(z, delta, bias, beta, 3, 10000.0); }, {z, delta, bias, beta}},
      {"rotate", [&] { return rotate(z, ops::rotary_table(4, 3, 0, 10000.0, 0.0, +1, DType::Complex128)); }, {z}, true},
      {"rms_norm", [&] { return rms_norm(x, w, 1e-5); }, {x, w}},
      {"swiglu", [&] { return swiglu(x, u); }, {x, u}},
      {"cross_entropy", [&] { return cross_entropy(x, targets); }, {x}},
      {"causal_attention", [&] { return causal_attention(q, k, v, 0.5, 0, from_vector<double>({0.5, 0.25})); }, {q, k, v}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Tensor y = c.f();
    Tensor seed = randn(y.shape(), y.dtype(), &g);
    const V kernel = grad({y}, c.inputs, {seed}, false, true);
    const V composed = grad({y}, c.inputs, {seed}, /*create_graph=*/true);
    for (const Tensor& t : composed) CHECK(t.requires_grad() != c.linear);
    CHECK(relative_error(composed, kernel) < 1e-10);
  }
}

TEST_CASE("jvp matches finite differences, complex inputs included") {
  Generator g(6);
  const Tensor z = leaf(g, {4}, DType::Complex128), r = leaf(g, {4});
  const TensorFunction f = [](const V& in) { return exp(in[0]) * in[1] + conj(in[0]) * sin(in[1]); };
  const V tangents = {randn({4}, DType::Complex128, &g), randn({4}, DType::Float64, &g)};
  const JvpResult j = jvp(f, {z, r}, tangents);
  const double h = 1e-6;
  NoGradGuard no_grad;
  const Tensor fd = (f(shifted({z, r}, tangents, h)) - f(shifted({z, r}, tangents, -h))) / (2 * h);
  CHECK(relative_error({j.tangent}, {fd}) < 1e-8);
  CHECK(relative_error({j.output}, {f({z, r})}) < 1e-15);
  CHECK_FALSE(z.grad().defined());
}

TEST_CASE("hvp matches finite differences of the gradient, complex parameters as pairs of reals") {
  Generator g(7);
  const Tensor z = leaf(g, {3}, DType::Complex128), w = leaf(g, {2, 3});
  const auto loss_of = [](const V& p) { return sum(real(matmul(p[1], exp(p[0]) * conj(p[0])))) + sum(square(p[1])) * 0.5; };
  const V v = {randn({3}, DType::Complex128, &g), randn({2, 3}, DType::Float64, &g)};
  HessianVectorProduct h(loss_of({z, w}), {z, w});
  const V hv = h(v);
  const V hv_again = h(v);  // the gradient's graph is kept: products can be repeated
  CHECK(h.products() == 2);
  CHECK(relative_error(hv_again, hv) < 1e-15);
  const double eps = 1e-6;
  const V plus = shifted({z, w}, v, eps), minus = shifted({z, w}, v, -eps);
  const V gp = grad({loss_of(plus)}, plus), gm = grad({loss_of(minus)}, minus);
  V fd;
  for (size_t i = 0; i < 2; ++i) fd.push_back(ops::binary(ops::Binary::Div, ops::binary(ops::Binary::Sub, gp[i], gm[i]), scalar_like(gp[i], 2 * eps)));
  CHECK(relative_error(hv, fd) < 1e-7);
  CHECK(relative_error(hvp(loss_of({z, w}), {z, w}, v), hv) < 1e-15);
}

TEST_CASE("the Hessian-vector product of every position variant's model loss matches finite differences (float64)") {
  const Tensor tokens = from_vector<int64_t>({3, 17, 42, 9, 100, 7, 250, 31}, {1, 8});
  const Tensor inputs = ops::narrow(tokens, 1, 0, 7), targets = ops::narrow(tokens, 1, 1, 7);
  for (Position p : all_positions()) {
    CAPTURE(position_name(p));
    ModelConfig c = parity_config(p, CmhaInit::Paper, true);
    c.n_layers = 1;
    auto model = parity_model(c, 21);
    V params = model->parameters();
    for (Tensor& t : params) t.set_data(ops::to(t, DType::Float64));  // float64 so that finite differences resolve the product
    Generator g(8);
    V v;
    for (const Tensor& t : params) v.push_back(randn(t.shape(), DType::Float64, &g));
    HessianVectorProduct h(model->loss(inputs, targets), params);
    const V hv = h(v);
    const double eps = 1e-5;
    auto gradient_at = [&](double s) {
      const V base = detached(params);
      for (size_t i = 0; i < params.size(); ++i) params[i].set_data(ops::binary(ops::Binary::Add, base[i], ops::binary(ops::Binary::Mul, v[i], scalar_like(v[i], s))));
      const V gr = grad({model->loss(inputs, targets)}, params);
      for (size_t i = 0; i < params.size(); ++i) params[i].set_data(base[i]);
      return gr;
    };
    const V gp = gradient_at(eps), gm = gradient_at(-eps);
    V fd;
    for (size_t i = 0; i < params.size(); ++i) fd.push_back(ops::binary(ops::Binary::Div, ops::binary(ops::Binary::Sub, gp[i], gm[i]), scalar_like(gp[i], 2 * eps)));
    const double err = relative_error(hv, fd);
    MESSAGE(position_name(p), ": relative error of H v ", err);
    CHECK(err < 1e-5);  // finite differences of float64 gradients: about 3e-7 here
  }
}

TEST_CASE("jvp and hvp in single precision agree with double precision (they seed with tensor ops in each tensor's dtype)") {
  // gradcheck refuses single precision (finite differences need double); jvp
  // and hvp take it, and keep the inputs' dtype in what they return.
  for (const auto& dtypes : {std::pair{DType::Float32, DType::Float64}, std::pair{DType::Complex64, DType::Complex128}}) {
    const DType single = dtypes.first, wide = dtypes.second;  // not a structured binding: CAPTURE is a lambda, and clang before 16 cannot capture one
    CAPTURE(single);
    Generator g(31);
    const Tensor x = randn({5}, wide, &g), v = randn({5}, wide, &g);
    const Tensor x1 = ops::to(x, single), v1 = ops::to(v, single);
    const TensorFunction f = [](const V& in) { return exp(in[0]) * in[0]; };
    const JvpResult j1 = jvp(f, {x1}, {v1}), j2 = jvp(f, {x}, {v});
    CHECK(j1.tangent.dtype() == single);
    CHECK(relative_error({j1.tangent}, {j2.tangent}) < 1e-5);
    const auto loss_of = [](const Tensor& p) { return sum(real(exp(p) * conj(p))); };
    const Tensor p1 = x1.detach().requires_grad_(), p2 = x.detach().requires_grad_();
    const V h1 = hvp(loss_of(p1), {p1}, {v1}), h2 = hvp(loss_of(p2), {p2}, {v});
    CHECK(h1[0].dtype() == single);
    CHECK(relative_error(h1, h2) < 1e-5);
  }
}
