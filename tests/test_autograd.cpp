// Autograd: a finite-difference gradcheck of every differentiable op (float64
// and complex128), the complex gradient convention, and the tape's behaviour
// (accumulation, retain_grad, retain_graph, no-grad, detach, in-place
// detection, anomaly mode, views, broadcasting), plus a check that gradcheck
// itself rejects a wrong backward.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
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

// Real entries in [0.5, 2]; complex entries with real part in [1.5, 3] (away from
// the branch cuts of log, sqrt, pow and angle on the negative real axis).
Tensor positive_leaf(Generator& g, const Dims& shape, DType dt = DType::Float64) {
  Tensor t;
  if (is_complex(dt)) {
    Tensor re = uniform(shape, 1.5, 3.0, real_dtype(dt), &g), im = uniform(shape, -1.0, 1.0, real_dtype(dt), &g);
    t = ops::complex(re, im);
  } else {
    t = uniform(shape, 0.5, 2.0, dt, &g);
  }
  t.requires_grad_();
  return t;
}
Tensor constant(Generator& g, const Dims& shape, DType dt = DType::Float64) { return randn(shape, dt, &g); }

const DType kBoth[] = {DType::Float64, DType::Complex128};

}  // namespace

// ============================================================== views

TEST_CASE("gradcheck: views") {
  Generator g(11);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor x = leaf(g, {2, 3, 4}, dt);
    check_grad("reshape", [](const V& in) { return reshape(in[0], {4, 6}); }, {x});
    check_grad("reshape -1", [](const V& in) { return reshape(in[0], {-1, 2}); }, {x});
    check_grad("reshape of a transposed view (copies)", [](const V& in) { return reshape(transpose(in[0], 0, 2), {-1}); }, {x});
    check_grad("view", [](const V& in) { return view(in[0], {6, 4}); }, {x});
    check_grad("permute", [](const V& in) { return permute(in[0], {2, 0, 1}); }, {x});
    check_grad("transpose", [](const V& in) { return transpose(in[0], 0, 2); }, {x});
    check_grad("transpose negative dims", [](const V& in) { return in[0].transpose(-1, -2); }, {x});
    check_grad("narrow", [](const V& in) { return narrow(in[0], 1, 1, 2); }, {x});
    check_grad("narrow of narrow", [](const V& in) { return in[0].narrow(2, 1, 3).narrow(0, 1, 1); }, {x});
    check_grad("select", [](const V& in) { return select(in[0], 2, -1); }, {x});
    check_grad("select dim 0", [](const V& in) { return in[0].select(0, 1); }, {x});
    check_grad("flatten", [](const V& in) { return flatten(in[0], 1, 2); }, {x});
    check_grad("flatten all", [](const V& in) { return in[0].flatten(); }, {x});
    check_grad("contiguous of a permuted view", [](const V& in) { return contiguous(permute(in[0], {1, 2, 0})); }, {x});
    check_grad("contiguous (no-op)", [](const V& in) { return contiguous(in[0]); }, {x});
    check_grad("clone", [](const V& in) { return clone(in[0]); }, {x});
    check_grad("to(cpu)", [](const V& in) { return to(in[0], kCPU); }, {x});

    const Tensor col = leaf(g, {3, 1}, dt);
    check_grad("expand", [](const V& in) { return expand(in[0], {2, 3, 4}); }, {col});
    check_grad("expand -1", [](const V& in) { return in[0].expand({-1, 5}); }, {col});
    check_grad("squeeze", [](const V& in) { return squeeze(in[0], 1); }, {col});
    check_grad("squeeze of a non-1 dim (no-op)", [](const V& in) { return squeeze(in[0], 0); }, {col});
    check_grad("unsqueeze", [](const V& in) { return unsqueeze(in[0], 0); }, {col});
    check_grad("unsqueeze -1", [](const V& in) { return in[0].unsqueeze(-1); }, {col});
    const Tensor s = leaf(g, {}, dt);
    check_grad("flatten 0-d", [](const V& in) { return flatten(in[0]); }, {s});
    check_grad("real", [](const V& in) { return real(in[0]); }, {x});
  }
  const Tensor z = leaf(g, {3, 2}, DType::Complex128);
  check_grad("view_as_real", [](const V& in) { return view_as_real(in[0]); }, {z});
  check_grad("view_as_real of a transposed view", [](const V& in) { return view_as_real(transpose(in[0], 0, 1)); }, {z});
  check_grad("imag", [](const V& in) { return imag(in[0]); }, {z});
  check_grad("imag of a narrowed view", [](const V& in) { return imag(narrow(in[0], 0, 1, 2)); }, {z});
  check_grad("real and imag recombined", [](const V& in) { return complex(real(in[0]) * 2.0, imag(in[0]) * -3.0); }, {z});
  check_grad("to float64 (real part)", [](const V& in) { return to(in[0], DType::Float64); }, {z});
  const Tensor pairs = leaf(g, {3, 2}, DType::Float64);
  check_grad("view_as_complex", [](const V& in) { return view_as_complex(in[0]); }, {pairs});
  check_grad("view_as_complex of reshaped pairs", [](const V& in) { return view_as_complex(reshape(in[0], {1, 3, 2})) * c128(0.5, 2.0); },
             {pairs});
  check_grad("view_as_complex then view_as_real", [](const V& in) { return view_as_real(view_as_complex(in[0]) * c128(1, 1)); }, {pairs});
  check_grad("to complex128", [](const V& in) { return to(in[0], DType::Complex128) * c128(1, -2); }, {pairs});
}

// ============================================================== arithmetic

TEST_CASE("gradcheck: binary arithmetic, same shapes and broadcasting") {
  Generator g(12);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor a = leaf(g, {3, 4}, dt), b = leaf(g, {3, 4}, dt);
    const Tensor col = leaf(g, {3, 1}, dt), row = leaf(g, {4}, dt);
    const Tensor nz = positive_leaf(g, {3, 4}, dt);  // divisors away from 0
    check_grad("add", [](const V& in) { return add(in[0], in[1]); }, {a, b});
    check_grad("sub", [](const V& in) { return sub(in[0], in[1]); }, {a, b});
    check_grad("mul", [](const V& in) { return mul(in[0], in[1]); }, {a, b});
    check_grad("div", [](const V& in) { return div(in[0], in[1]); }, {a, nz});
    check_grad("operators + - * /", [](const V& in) { return (in[0] + in[1]) * in[0] - in[1] / in[2]; }, {a, b, nz});
    check_grad("unary minus", [](const V& in) { return -in[0]; }, {a});
    check_grad("mul of a tensor by itself", [](const V& in) { return in[0] * in[0]; }, {a});
    // broadcasting [3, 1] with [4]
    check_grad("add broadcast", [](const V& in) { return add(in[0], in[1]); }, {col, row});
    check_grad("sub broadcast", [](const V& in) { return sub(in[0], in[1]); }, {col, row});
    check_grad("mul broadcast", [](const V& in) { return mul(in[0], in[1]); }, {col, row});
    check_grad("div broadcast", [](const V& in) { return div(in[0], in[1]); }, {col, positive_leaf(g, {4}, dt)});
    check_grad("mul broadcast with a 0-d tensor", [](const V& in) { return mul(in[0], in[1]); }, {a, leaf(g, {}, dt)});
    // non-contiguous inputs (transposed views)
    const Tensor at = leaf(g, {4, 3}, dt);
    check_grad("mul of a transposed view", [](const V& in) { return mul(transpose(in[0], 0, 1), in[1]); }, {at, b});
    check_grad("div by a transposed view", [](const V& in) { return div(in[1], transpose(in[0], 0, 1)); },
               {positive_leaf(g, {4, 3}, dt), b});
  }
}

TEST_CASE("gradcheck: mixed real and complex operands") {
  Generator g(13);
  const Tensor r = leaf(g, {3, 1}, DType::Float64), z = leaf(g, {4}, DType::Complex128);
  check_grad("real * complex", [](const V& in) { return mul(in[0], in[1]); }, {r, z});
  check_grad("complex * real", [](const V& in) { return mul(in[1], in[0]); }, {r, z});
  check_grad("real + complex", [](const V& in) { return add(in[0], in[1]); }, {r, z});
  check_grad("real - complex", [](const V& in) { return sub(in[0], in[1]); }, {r, z});
  check_grad("real / complex", [](const V& in) { return div(in[0], in[1]); }, {r, positive_leaf(g, {4}, DType::Complex128)});
  check_grad("complex / real", [](const V& in) { return div(in[1], in[0]); }, {positive_leaf(g, {3, 1}), z});
  // only the real operand requires grad
  check_grad("real leaf times complex constant", [c = constant(g, {4}, DType::Complex128)](const V& in) { return in[0] * c; }, {r});
  check_grad("complex leaf times real constant", [c = constant(g, {3, 1})](const V& in) { return c * in[0]; }, {z});
}

TEST_CASE("gradcheck: pow, maximum, minimum, atan2") {
  Generator g(14);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor base = positive_leaf(g, {2, 3}, dt), ex = leaf(g, {2, 3}, dt);
    check_grad("pow tensor", [](const V& in) { return pow(in[0], in[1]); }, {base, ex});
    check_grad("pow tensor broadcast exponent", [](const V& in) { return pow(in[0], in[1]); }, {base, leaf(g, {3}, dt)});
    check_grad("pow tensor, exponent constant", [e = constant(g, {2, 3}, dt)](const V& in) { return pow(in[0], e); }, {base});
    const Tensor x = leaf(g, {2, 3}, dt);
    check_grad("pow 3", [](const V& in) { return pow(in[0], 3.0); }, {x});
    check_grad("pow 2", [](const V& in) { return pow(in[0], 2.0); }, {x});
    check_grad("pow 1", [](const V& in) { return pow(in[0], 1.0); }, {x});
    check_grad("pow 0", [](const V& in) { return pow(in[0], 0.0) + in[0]; }, {x});
    check_grad("pow 0.5", [](const V& in) { return pow(in[0], 0.5); }, {base});
    check_grad("pow -1.5", [](const V& in) { return pow(in[0], -1.5); }, {base});
    check_grad("pow 2.5", [](const V& in) { return pow(in[0], 2.5); }, {base});
  }
  const Tensor a = leaf(g, {3, 4}), b = leaf(g, {3, 4}), row = leaf(g, {4});
  check_grad("maximum", [](const V& in) { return maximum(in[0], in[1]); }, {a, b});
  check_grad("minimum", [](const V& in) { return minimum(in[0], in[1]); }, {a, b});
  check_grad("maximum broadcast", [](const V& in) { return maximum(in[0], in[1]); }, {a, row});
  check_grad("minimum broadcast", [](const V& in) { return minimum(in[1], in[0]); }, {a, row});
  check_grad("atan2", [](const V& in) { return atan2(in[0], in[1]); }, {a, b});
  check_grad("atan2 broadcast", [](const V& in) { return atan2(in[0], in[1]); }, {row, a});
}

TEST_CASE("maximum and minimum share the gradient equally at ties") {
  Tensor a = from_vector<double>({1.0, 2.0, 3.0}), b = from_vector<double>({1.0, 5.0, -1.0});
  a.requires_grad_();
  b.requires_grad_();
  sum(maximum(a, b) * from_vector<double>({2.0, 3.0, 4.0})).backward();
  check_close(a.grad().to_vector<double>(), {1.0, 0.0, 4.0}, {.atol = 0});
  check_close(b.grad().to_vector<double>(), {1.0, 3.0, 0.0}, {.atol = 0});
  a.zero_grad();
  b.zero_grad();
  sum(minimum(a, b)).backward();
  check_close(a.grad().to_vector<double>(), {0.5, 1.0, 0.0}, {.atol = 0});
  check_close(b.grad().to_vector<double>(), {0.5, 0.0, 1.0}, {.atol = 0});
}

TEST_CASE("gradcheck: scalar operators") {
  Generator g(15);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor x = leaf(g, {2, 3}, dt), nz = positive_leaf(g, {2, 3}, dt);
    check_grad("x + s", [](const V& in) { return in[0] + 2.5; }, {x});
    check_grad("s + x", [](const V& in) { return 2.5 + in[0]; }, {x});
    check_grad("x - s", [](const V& in) { return in[0] - 1.5; }, {x});
    check_grad("s - x", [](const V& in) { return 1.5 - in[0]; }, {x});
    check_grad("x * s", [](const V& in) { return in[0] * 3.0; }, {x});
    check_grad("s * x", [](const V& in) { return -3.0 * in[0]; }, {x});
    check_grad("x / s", [](const V& in) { return in[0] / 4.0; }, {x});
    check_grad("s / x", [](const V& in) { return 4.0 / in[0]; }, {nz});
    // complex scalars promote a real tensor to complex
    check_grad("x * complex s", [](const V& in) { return in[0] * c128(1.0, 2.0); }, {x});
    check_grad("complex s * x", [](const V& in) { return c128(-0.5, 1.0) * in[0]; }, {x});
    check_grad("x + complex s", [](const V& in) { return in[0] + c128(0.0, 1.0); }, {x});
    check_grad("complex s - x", [](const V& in) { return c128(1.0, 1.0) - in[0]; }, {x});
    check_grad("x / complex s", [](const V& in) { return in[0] / c128(0.5, -1.0); }, {x});
    check_grad("complex s / x", [](const V& in) { return c128(2.0, 1.0) / in[0]; }, {nz});
  }
}

// ============================================================== unary

TEST_CASE("gradcheck: unary maths, real and complex") {
  Generator g(16);
  using Fn = Tensor (*)(const Tensor&);
  struct Case {
    const char* name;
    Fn fn;
    bool needs_positive;
    bool complex_too;
  };
  const Case cases[] = {
      {"neg", neg, false, true},         {"exp", exp, false, true},         {"log", log, true, true},
      {"sqrt", sqrt, true, true},        {"rsqrt", rsqrt, true, true},      {"sin", sin, false, true},
      {"cos", cos, false, true},         {"tanh", tanh, false, true},       {"sigmoid", sigmoid, false, true},
      {"silu", silu, false, true},       {"gelu", gelu, false, false},      {"abs", abs, false, true},
      {"square", square, false, true},   {"reciprocal", reciprocal, true, true}, {"conj", conj, false, true},
      {"angle", angle, false, true},     {"softplus", softplus, false, false},
  };
  for (const Case& c : cases) {
    for (DType dt : kBoth) {
      if (is_complex(dt) && !c.complex_too) continue;
      CAPTURE(dt);
      const Tensor x = c.needs_positive ? positive_leaf(g, {2, 3}, dt) : leaf(g, {2, 3}, dt);
      check_grad(c.name, [fn = c.fn](const V& in) { return fn(in[0]); }, {x});
      // the same op on a non-contiguous view, scaled so the seed is not all ones
      const Tensor xt = c.needs_positive ? positive_leaf(g, {3, 2}, dt) : leaf(g, {3, 2}, dt);
      check_grad(std::string(c.name) + " of a transposed view",
                 [fn = c.fn](const V& in) { return fn(transpose(in[0], 0, 1)) * from_vector<double>({1.0, -2.0, 0.5}); }, {xt});
    }
  }
  // abs of real values away from 0 on both sides
  check_grad("abs real, mixed signs", [](const V& in) { return abs(in[0]); }, {[] {
               Tensor t = from_vector<double>({-2.0, -0.5, 0.25, 3.0});
               t.requires_grad_();
               return t;
             }()});
}

TEST_CASE("gradcheck: polar, complex, where, masked_fill") {
  Generator g(17);
  const Tensor r = positive_leaf(g, {2, 3}), th = leaf(g, {2, 3});
  check_grad("polar", [](const V& in) { return polar(in[0], in[1]); }, {r, th});
  check_grad("polar broadcast", [](const V& in) { return polar(in[0], in[1]); }, {positive_leaf(g, {2, 1}), leaf(g, {3})});
  check_grad("polar, angle only", [m = uniform({2, 3}, 0.5, 2.0, DType::Float64, &g)](const V& in) { return polar(m, in[0]); }, {th});
  check_grad("complex", [](const V& in) { return complex(in[0], in[1]); }, {leaf(g, {2, 3}), leaf(g, {2, 3})});
  check_grad("complex broadcast", [](const V& in) { return complex(in[0], in[1]); }, {leaf(g, {3, 1}), leaf(g, {4})});
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor cond = gt(constant(g, {3, 1}), zeros({}, DType::Float64));
    const Tensor a = leaf(g, {3, 4}, dt), b = leaf(g, {4}, dt);
    check_grad("where", [cond](const V& in) { return where(cond, in[0], in[1]); }, {a, b});
    check_grad("where, same shapes", [c = from_vector<bool>({true, false, false, true}, {2, 2})](const V& in) {
      return where(c, in[0], in[1]);
    }, {leaf(g, {2, 2}, dt), leaf(g, {2, 2}, dt)});
    check_grad("masked_fill", [m = from_vector<bool>({true, false, true, false}, {1, 4})](const V& in) {
      return masked_fill(in[0], m, c128(7.0));
    }, {a});
  }
  // where mixing a real and a complex branch: the real leaf takes the real part
  check_grad("where real/complex", [c = from_vector<bool>({true, false, true})](const V& in) { return where(c, in[0], in[1]) * c128(1, 2); },
             {leaf(g, {3}), leaf(g, {3}, DType::Complex128)});
}

TEST_CASE("gradcheck: compositions of complex ops") {
  Generator g(18);
  const Tensor z = leaf(g, {5}, DType::Complex128);
  check_grad("polar(abs(z), angle(z))", [](const V& in) { return polar(abs(in[0]), angle(in[0])); }, {z});
  check_grad("exp(i angle(z))", [](const V& in) { return exp(angle(in[0]) * c128(0, 1)); }, {z});
  check_grad("abs(z)^2 via z conj(z)", [](const V& in) { return real(in[0] * conj(in[0])); }, {z});
  check_grad("log(exp(z))", [](const V& in) { return log(exp(in[0])); }, {positive_leaf(g, {4}, DType::Complex128)});
  check_grad("view_as_real(z * w) summed", [](const V& in) { return sum(view_as_real(in[0] * in[1]), {-1}); },
             {z, leaf(g, {5}, DType::Complex128)});

  // polar(abs(z), angle(z)) is the identity: same values, and G_z = G exactly.
  const Tensor w = polar(abs(z), angle(z));
  check_close(w.to_vector<c128>(), z.to_vector<c128>(), {.atol = 1e-12});
  const Tensor seed = constant(g, {5}, DType::Complex128);
  w.backward(seed);
  check_close(z.grad().to_vector<c128>(), seed.to_vector<c128>(), {.atol = 1e-12});

  // exp(i angle(z)) = z / |z|.
  const Tensor u = exp(angle(z) * c128(0, 1));
  const Tensor unit = z.detach() / abs(z.detach());
  check_close(u.to_vector<c128>(), unit.to_vector<c128>(), {.atol = 1e-12});
}

// ============================================================== reductions

TEST_CASE("gradcheck: reductions") {
  Generator g(19);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor x = leaf(g, {2, 3, 4}, dt);
    check_grad("sum all", [](const V& in) { return sum(in[0]); }, {x});
    check_grad("sum method", [](const V& in) { return in[0].sum(); }, {x});
    check_grad("sum dim 1", [](const V& in) { return sum(in[0], {1}); }, {x});
    check_grad("sum dims 0,2", [](const V& in) { return sum(in[0], {0, 2}); }, {x});
    check_grad("sum dim -1 keepdim", [](const V& in) { return sum(in[0], {-1}, true); }, {x});
    check_grad("sum dims 0,1 keepdim", [](const V& in) { return sum(in[0], {0, 1}, true); }, {x});
    check_grad("sum of a transposed view", [](const V& in) { return sum(transpose(in[0], 0, 2), {1}); }, {x});
    check_grad("mean all", [](const V& in) { return mean(in[0]); }, {x});
    check_grad("mean method", [](const V& in) { return in[0].mean(); }, {x});
    check_grad("mean dim 1", [](const V& in) { return mean(in[0], {1}); }, {x});
    check_grad("mean dims -1,0 keepdim", [](const V& in) { return mean(in[0], {-1, 0}, true); }, {x});
    check_grad("norm all", [](const V& in) { return norm(in[0]); }, {x});
    check_grad("norm dim 2", [](const V& in) { return norm(in[0], {2}); }, {x});
    check_grad("norm dims 0,1 keepdim", [](const V& in) { return norm(in[0], {0, 1}, true); }, {x});
  }
  const Tensor x = leaf(g, {3, 4, 5});
  check_grad("max values", [](const V& in) { return max(in[0], 1).values; }, {x});
  check_grad("max values keepdim", [](const V& in) { return max(in[0], -1, true).values; }, {x});
  check_grad("min values", [](const V& in) { return min(in[0], 0).values; }, {x});
  check_grad("min values keepdim", [](const V& in) { return min(in[0], 2, true).values; }, {x});
  check_grad("max of a transposed view", [](const V& in) { return max(transpose(in[0], 0, 2), 1).values; }, {x});
  check_grad("logsumexp", [](const V& in) { return logsumexp(in[0], 1); }, {x});
  check_grad("logsumexp keepdim", [](const V& in) { return logsumexp(in[0], -1, true); }, {x});
  check_grad("softmax last dim", [](const V& in) { return softmax(in[0], -1) * from_vector<double>({1, -2, 3, 0.5, 1.5}); }, {x});
  check_grad("softmax dim 0", [](const V& in) { return softmax(in[0], 0) * from_vector<double>({1, -2, 3, 0.5, 1.5}); }, {x});
  check_grad("softmax of a transposed view", [](const V& in) { return softmax(transpose(in[0], 1, 2), 2); }, {x});
  check_grad("log_softmax last dim", [](const V& in) { return log_softmax(in[0], -1); }, {x});
  check_grad("log_softmax dim 1", [](const V& in) { return log_softmax(in[0], 1) * from_vector<double>({1, -2, 3, 0.5, 1.5}); }, {x});
}

// ============================================================== matmul

namespace {
// The stored operand whose op(X) is rows x cols.
Tensor stored_operand(Generator& g, const Dims& batch, int64_t rows, int64_t cols, MatOp op, DType dt) {
  Dims shape = batch;
  shape.push_back(op == MatOp::None ? rows : cols);
  shape.push_back(op == MatOp::None ? cols : rows);
  return leaf(g, shape, dt);
}
const char* flag_name(MatOp op) { return op == MatOp::None ? "N" : op == MatOp::Transpose ? "T" : "H"; }
}  // namespace

TEST_CASE("gradcheck: matmul, real and complex, every flag combination") {
  Generator g(20);
  const MatOp flags[] = {MatOp::None, MatOp::Transpose, MatOp::ConjTranspose};
  for (DType dt : kBoth) {
    CAPTURE(dt);
    for (MatOp fa : flags) {
      for (MatOp fb : flags) {
        const std::string what = std::string("matmul ") + flag_name(fa) + flag_name(fb);
        const Tensor a = stored_operand(g, {}, 3, 4, fa, dt), b = stored_operand(g, {}, 4, 2, fb, dt);
        check_grad(what, [fa, fb](const V& in) { return matmul(in[0], in[1], fa, fb); }, {a, b});
        // batched with broadcasting of the leading dims
        const Tensor ab = stored_operand(g, {2, 1}, 3, 4, fa, dt), bb = stored_operand(g, {3}, 4, 2, fb, dt);
        check_grad(what + " batched [2,1] x [3]", [fa, fb](const V& in) { return matmul(in[0], in[1], fa, fb); }, {ab, bb});
        // a batch of a's times one b (the folded GEMM path, forward and backward)
        const Tensor af = stored_operand(g, {2}, 3, 4, fa, dt);
        check_grad(what + " batch x matrix", [fa, fb](const V& in) { return matmul(in[0], in[1], fa, fb); }, {af, b});
        // one a times a batch of b's
        const Tensor bf = stored_operand(g, {2}, 4, 2, fb, dt);
        check_grad(what + " matrix x batch", [fa, fb](const V& in) { return matmul(in[0], in[1], fa, fb); }, {a, bf});
      }
    }
    // non-contiguous operands (transposed views) with and without flags
    const Tensor at = leaf(g, {4, 3}, dt), bt = leaf(g, {2, 4}, dt);
    check_grad("matmul of transposed views", [](const V& in) { return matmul(transpose(in[0], 0, 1), transpose(in[1], 0, 1)); }, {at, bt});
    check_grad("matmul ^H of a transposed view",
               [](const V& in) { return matmul(transpose(in[0], 0, 1), in[1], MatOp::ConjTranspose); }, {leaf(g, {3, 4}, dt), leaf(g, {4, 2}, dt)});
    check_grad("matmul of a narrowed view", [](const V& in) { return matmul(narrow(in[0], 1, 1, 4), in[1]); }, {leaf(g, {3, 6}, dt), leaf(g, {4, 2}, dt)});
    // 1-d operands
    check_grad("vector x matrix", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {4}, dt), leaf(g, {4, 3}, dt)});
    check_grad("matrix x vector", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {3, 4}, dt), leaf(g, {4}, dt)});
    check_grad("vector x vector", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {4}, dt), leaf(g, {4}, dt)});
    check_grad("batch x vector", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {2, 3, 4}, dt), leaf(g, {4}, dt)});
    check_grad("vector x batch", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {3}, dt), leaf(g, {2, 3, 4}, dt)});
    // upstream gradients that are not row-major: a transposed or broadcast (stride 0) G
    check_grad("transpose of matmul", [](const V& in) { return transpose(matmul(in[0], in[1]), 0, 1); }, {leaf(g, {3, 4}, dt), leaf(g, {4, 2}, dt)});
    check_grad("sum of matmul", [](const V& in) { return sum(matmul(in[0], in[1]), {0}); }, {leaf(g, {3, 4}, dt), leaf(g, {4, 2}, dt)});
    check_grad("sum of batched matmul", [](const V& in) { return sum(matmul(in[0], in[1], MatOp::ConjTranspose)); },
               {leaf(g, {2, 4, 3}, dt), leaf(g, {4, 2}, dt)});
    // a shared weight used by a batch: the gradient of the weight sums over the batch
    check_grad("matmul with one input requiring grad", [w = constant(g, {4, 2}, dt)](const V& in) { return matmul(in[0], w); },
               {leaf(g, {2, 3, 4}, dt)});
    check_grad("matmul, weight only", [x = constant(g, {2, 3, 4}, dt)](const V& in) { return matmul(x, in[0]); }, {leaf(g, {4, 2}, dt)});
  }
  // mixed real and complex operands
  check_grad("real x complex", [](const V& in) { return matmul(in[0], in[1]); }, {leaf(g, {3, 4}), leaf(g, {4, 2}, DType::Complex128)});
  check_grad("complex x real ^T", [](const V& in) { return matmul(in[0], in[1], MatOp::None, MatOp::Transpose); },
             {leaf(g, {3, 4}, DType::Complex128), leaf(g, {2, 4})});
}

// ============================================================== indexing

TEST_CASE("gradcheck: indexing and joining") {
  Generator g(21);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor x = leaf(g, {4, 3}, dt);
    const Tensor ids = from_vector<int>({2, 0, 2, 3});
    check_grad("index_select dim 0, repeated indices", [ids](const V& in) { return index_select(in[0], 0, ids); }, {x});
    check_grad("index_select dim 1", [](const V& in) { return index_select(in[0], 1, from_vector<int>({1, 1, 0})); }, {x});
    check_grad("index_select dim -1", [](const V& in) { return index_select(in[0], -1, from_vector<int>({2})); }, {x});
    check_grad("index_select 0-d index", [](const V& in) { return index_select(in[0], 0, from_vector<int>({1}, {})); }, {x});
    check_grad("index_select 0-d index, dim -1", [](const V& in) { return index_select(in[0], -1, from_vector<int>({2}, {})); }, {x});
    check_grad("index_select of a transposed view", [ids](const V& in) { return index_select(transpose(in[0], 0, 1), 1, ids); }, {x});
    check_grad("embedding", [](const V& in) { return embedding(in[0], from_vector<int>({1, 3, 1, 0, 2, 1}, {2, 3})); }, {x});
    const Tensor src = leaf(g, {4, 3}, dt);
    check_grad("index_add", [ids](const V& in) { return index_add(in[0], 0, ids, in[1]); }, {x, src});
    check_grad("index_add dim 1", [](const V& in) { return index_add(in[0], 1, from_vector<int>({2, 2}), in[1]); },
               {x, leaf(g, {4, 2}, dt)});
    check_grad("gather", [](const V& in) { return gather(in[0], 1, from_vector<int>({0, 2, 1, 1, 2, 2, 0, 0}, {4, 2})); }, {x});
    check_grad("gather dim 0, smaller index", [](const V& in) { return gather(in[0], 0, from_vector<int>({3, 3, 1, 0}, {2, 2})); }, {x});
    const Tensor y = leaf(g, {2, 3}, dt), w = leaf(g, {1, 3}, dt);
    check_grad("cat dim 0", [](const V& in) { return cat({in[0], in[1], in[2]}, 0); }, {x, y, w});
    check_grad("cat dim 1", [](const V& in) { return cat({in[0], in[1]}, 1); }, {x, leaf(g, {4, 2}, dt)});
    check_grad("cat dim -1, one input without grad", [c = constant(g, {4, 1}, dt)](const V& in) { return cat({c, in[0]}, -1); }, {x});
    check_grad("stack dim 0", [](const V& in) { return stack({in[0], in[1]}, 0); }, {y, leaf(g, {2, 3}, dt)});
    check_grad("stack dim -1", [](const V& in) { return stack({in[0], in[1], in[0]}, -1); }, {y, leaf(g, {2, 3}, dt)});
    check_grad("split uneven", [](const V& in) {
      const std::vector<Tensor> parts = split(in[0], 3, 0);  // sizes 3, 1
      return cat({parts[0] * 2.0, parts[1] * -1.0}, 0);
    }, {x});
    check_grad("split dim 1, parts used apart", [](const V& in) {
      const std::vector<Tensor> parts = split(in[0], 1, 1);
      return parts[0] * parts[2] + parts[1];
    }, {x});
    check_grad("chunk", [](const V& in) {
      const std::vector<Tensor> parts = chunk(in[0], 2, 0);
      return parts[1] - parts[0] * 3.0;
    }, {x});
  }
  // mixed dtypes: a real part joined to a complex part
  check_grad("cat real with complex", [](const V& in) { return cat({in[0], in[1]}, 0); }, {leaf(g, {2, 2}), leaf(g, {1, 2}, DType::Complex128)});
  check_grad("index_add complex into real", [](const V& in) { return index_add(in[0], 0, from_vector<int>({1}), in[1]); },
             {leaf(g, {2, 2}, DType::Complex128), leaf(g, {1, 2})});
}

TEST_CASE("float32 log_softmax keeps its precision for large inputs, so a shift along dim has no gradient") {
  // Inputs near 300 (ulp 3e-5 in float32): the result and its backward must not
  // inherit the absolute error of the largest input.
  Generator g(24);
  const Tensor base = uniform({2, 8}, 290.0, 310.0, DType::Float64, &g);
  Tensor x = to(base, DType::Float32);
  const auto got = log_softmax(x, 0).to_vector<double>();
  const auto want = log_softmax(to(x, DType::Float64), 0).to_vector<double>();  // the same float32 inputs, in float64
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  CHECK(worst < 2e-6);
  // log_softmax(x + c) along dim 0 does not depend on a c broadcast along dim 0.
  Tensor c = zeros({1, 8}, DType::Float32);
  c.requires_grad_();
  sum(log_softmax(x + c, 0) * from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1}, {2, 8})).backward();
  for (float v : c.grad().to_vector<float>()) CHECK(std::abs(v) < 1e-5f);
}

// ============================================================== the convention

TEST_CASE("complex gradients follow the convention dL/dx + i dL/dy") {
  const std::vector<c128> zs = {{1.0, 2.0}, {-3.0, 0.5}, {0.25, -1.0}};
  Tensor z = from_vector<c128>(zs);
  z.requires_grad_();

  // L = sum |z|^2 = sum x^2 + y^2: grad = 2x + 2iy = 2z.
  sum(real(z * conj(z))).backward();
  std::vector<c128> want;
  for (c128 v : zs) want.push_back(2.0 * v);
  check_close(z.grad().to_vector<c128>(), want, {.atol = 1e-12});

  // L = sum Re z: grad 1; L = sum Im z: grad i.
  z.zero_grad();
  sum(real(z)).backward();
  check_close(z.grad().to_vector<c128>(), std::vector<c128>(3, c128(1, 0)), {.atol = 0});
  z.zero_grad();
  sum(imag(z)).backward();
  check_close(z.grad().to_vector<c128>(), std::vector<c128>(3, c128(0, 1)), {.atol = 0});

  // L = sum Re(conj(c) z) = sum (c_x x + c_y y): grad c.
  const Tensor c = from_vector<c128>({{0.5, -1.0}, {2.0, 3.0}, {-1.0, 0.0}});
  z.zero_grad();
  sum(real(conj(c) * z)).backward();
  check_close(z.grad().to_vector<c128>(), c.to_vector<c128>(), {.atol = 1e-12});

  // L = sum |z|: grad z/|z|; L = sum angle(z): grad i z/|z|^2.
  z.zero_grad();
  sum(abs(z)).backward();
  want.clear();
  for (c128 v : zs) want.push_back(v / std::abs(v));
  check_close(z.grad().to_vector<c128>(), want, {.atol = 1e-12});
  z.zero_grad();
  sum(angle(z)).backward();
  want.clear();
  for (c128 v : zs) want.push_back(c128(0, 1) * v / std::norm(v));
  check_close(z.grad().to_vector<c128>(), want, {.atol = 1e-12});

  // Holomorphic f(z) = z^2 with L = Re(f): grad = conj(f'(z)) = 2 conj(z).
  z.zero_grad();
  sum(real(z * z)).backward();
  want.clear();
  for (c128 v : zs) want.push_back(2.0 * std::conj(v));
  check_close(z.grad().to_vector<c128>(), want, {.atol = 1e-12});
}

TEST_CASE("a gradient descent step on a complex leaf decreases a real loss") {
  Generator g(22);
  Tensor z = randn({6}, DType::Complex128, &g);
  const Tensor target = randn({6}, DType::Complex128, &g);
  z.requires_grad_();
  auto loss_of = [&](const Tensor& v) { return sum(square(abs(v - target))); };
  double previous = loss_of(z).item<double>();
  for (int step = 0; step < 20; ++step) {
    z.zero_grad();
    Tensor loss = loss_of(z);
    loss.backward();
    {
      NoGradGuard no_grad;
      ops::axpy_(z, z.grad(), -0.1);
    }
    const double now = loss_of(z).item<double>();
    CHECK(now < previous);
    previous = now;
  }
  // z <- z - 0.1 * 2 (z - t) contracts toward t by 0.8 per step.
  CHECK(previous < 1e-2);
}

// ============================================================== the tape

TEST_CASE("gradients accumulate across backward calls until zero_grad") {
  Tensor x = from_vector<double>({1.0, -2.0, 3.0});
  x.requires_grad_();
  sum(x * x).backward();
  check_close(x.grad().to_vector<double>(), {2.0, -4.0, 6.0}, {.atol = 0});
  sum(x * 3.0).backward();
  check_close(x.grad().to_vector<double>(), {5.0, -1.0, 9.0}, {.atol = 0});
  x.zero_grad();
  CHECK(!x.grad().defined());
  sum(x * x).backward();
  check_close(x.grad().to_vector<double>(), {2.0, -4.0, 6.0}, {.atol = 0});
  // a leaf used twice in one graph receives both contributions
  x.zero_grad();
  sum(x * 2.0 + exp(x)).backward();
  check_close(x.grad().to_vector<double>(), {2.0 + std::exp(1.0), 2.0 + std::exp(-2.0), 2.0 + std::exp(3.0)}, {.atol = 1e-12});
}

TEST_CASE("retain_grad keeps the gradient of an intermediate") {
  Tensor x = from_vector<double>({1.0, 2.0});
  x.requires_grad_();
  Tensor h = x * 3.0;
  Tensor k = h + 1.0;
  h.retain_grad();
  h.retain_grad();  // asking twice must not double the gradient
  sum(h * h + k).backward();
  REQUIRE(h.grad().defined());
  check_close(h.grad().to_vector<double>(), {7.0, 13.0}, {.atol = 1e-12});  // 2h + 1
  check_close(x.grad().to_vector<double>(), {21.0, 39.0}, {.atol = 1e-12});
  CHECK(!k.grad().defined());  // not retained
  CHECK(!h.is_leaf());
  CHECK(error_of([] { (void)from_vector<double>({1.0}).retain_grad(); }).find("does not require grad") != std::string::npos);
}

TEST_CASE("retain_graph allows a second backward; without it the second backward throws") {
  Tensor x = from_vector<double>({0.5, 1.5});
  x.requires_grad_();
  Tensor y = sum(exp(x) * x);
  y.backward(Tensor(), true);
  const std::vector<double> first = x.grad().to_vector<double>();
  y.backward();  // graph still there
  const std::vector<double> second = x.grad().to_vector<double>();
  for (size_t i = 0; i < first.size(); ++i) CHECK(second[i] == doctest::Approx(2 * first[i]));
  const std::string e = error_of([&] { y.backward(); });  // freed by the previous call
  CHECK(contains(e, "retain_graph"));
  CHECK(contains(e, "second time"));
}

TEST_CASE("backward needs a real scalar or an explicit gradient") {
  Tensor z = from_vector<c128>({{1.0, 2.0}});
  z.requires_grad_();
  const Tensor s = sum(z * z);
  const std::string e = error_of([&] { s.backward(); });
  CHECK(contains(e, "complex"));
  CHECK(!z.grad().defined());
  // an explicit seed works: G = 1 on y = z^2 gives conj(2z)
  s.backward(ones({}, DType::Complex128));
  check_close(z.grad().to_vector<c128>(), {c128(2.0, -4.0)}, {.atol = 1e-12});

  // a seed of another dtype takes the output's: a real seed on a complex output is G + 0i
  Tensor p = from_vector<double>({1.0, 2.0, 3.0, 4.0}, {2, 2});
  p.requires_grad_();
  view_as_complex(p).backward(from_vector<double>({5.0, 6.0}));
  check_close(p.grad().to_vector<double>(), {5.0, 0.0, 6.0, 0.0}, {.atol = 0});
  Tensor x = from_vector<double>({1.0, 2.0});
  x.requires_grad_();
  (x * x).backward(from_vector<c128>({{1.0, 7.0}, {1.0, -7.0}}));  // real output: the real part counts
  check_close(x.grad().to_vector<double>(), {2.0, 4.0}, {.atol = 0});
  x.zero_grad();
  CHECK(contains(error_of([&] { (x * 2.0).backward(); }), "non-scalar"));
  CHECK(contains(error_of([&] { (x * 2.0).backward(ones({3}, DType::Float64)); }), "gradient shape"));
  CHECK(contains(error_of([] { from_vector<double>({1.0}).backward(); }), "does not require grad"));
  CHECK(contains(error_of([] { (void)from_vector<int>({1}).requires_grad_(); }), "floating and complex"));
  CHECK(contains(error_of([&] { (void)(x * 2.0).requires_grad_(); }), "leaf"));
}

TEST_CASE("NoGradGuard records nothing; detach cuts history") {
  Tensor x = from_vector<double>({1.0, 2.0});
  x.requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = exp(x) * x;
    CHECK(!y.requires_grad());
    CHECK(!y.grad_fn());
    CHECK(!matmul(x, x).requires_grad());
    CHECK(!transpose(reshape(x, {2, 1}), 0, 1).requires_grad());
    {
      NoGradGuard nested;
    }
    CHECK(!GradMode::enabled());  // the nested guard restores "off"
  }
  CHECK(GradMode::enabled());
  Tensor y = x * 2.0;
  CHECK(y.requires_grad());
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "mul");

  Tensor d = y.detach();
  CHECK(!d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.same_storage(y));
  sum(d * x).backward();  // only the direct path: d is a constant
  check_close(x.grad().to_vector<double>(), {2.0, 4.0}, {.atol = 0});
}

TEST_CASE("in-place modification of a saved tensor is detected at backward") {
  {
    Tensor x = from_vector<double>({1.0, 2.0});
    x.requires_grad_();
    Tensor y = exp(x);  // saves its output
    Tensor loss = sum(y);
    ops::fill_(y, 0.0);
    const std::string e = error_of([&] { loss.backward(); });
    CHECK(contains(e, "modified in place"));
  }
  {
    Tensor a = from_vector<double>({1.0, 2.0}), b = from_vector<double>({3.0, 4.0});
    a.requires_grad_();
    b.requires_grad_();
    Tensor loss = sum(a * b);  // saves a for b's gradient and b for a's
    ops::binary_(ops::Binary::Add, a.detach(), ones({2}, DType::Float64));  // through an alias of the same storage
    CHECK(contains(error_of([&] { loss.backward(); }), "modified in place"));
  }
  {
    // writing into a view of a saved tensor is seen too, and untouched graphs still work
    Tensor x = from_vector<double>({1.0, 2.0, 3.0});
    x.requires_grad_();
    Tensor s = sqrt(x);
    Tensor loss = sum(s);
    ops::fill_(ops::narrow(s, 0, 1, 1), 5.0);
    CHECK(contains(error_of([&] { loss.backward(); }), "modified in place"));
    Tensor ok = sum(sqrt(x));
    ok.backward();
    CHECK(x.grad().to_vector<double>()[0] == doctest::Approx(0.5));
  }
}

TEST_CASE("AnomalyGuard names the op whose backward produced NaN") {
  Tensor x = from_vector<double>({0.0, 1.0});
  x.requires_grad_();
  // sqrt at 0 has an infinite derivative; times a zero upstream gradient it is NaN.
  sum(sqrt(x) * 0.0).backward();
  CHECK(std::isnan(x.grad().to_vector<double>()[0]));  // silently NaN without the guard
  x.zero_grad();
  {
    AnomalyGuard anomaly;
    const std::string e = error_of([&] { sum(sqrt(x) * 0.0).backward(); });
    CHECK(contains(e, "anomaly"));
    CHECK(contains(e, "'sqrt'"));
    // a finite backward passes under the guard
    x.zero_grad();
    sum(exp(x)).backward();
    CHECK(std::isfinite(x.grad().to_vector<double>()[0]));
  }
  CHECK(!AnomalyMode::enabled());
}

TEST_CASE("abs and angle: zero gradient at 0, finite at 1e-30 + 0i") {
  for (DType dt : {DType::Complex64, DType::Complex128}) {
    CAPTURE(dt);
    Tensor z = to(from_vector<c128>({{0.0, 0.0}, {1e-30, 0.0}, {0.0, -1e-30}}), dt);
    z.requires_grad_();
    sum(abs(z)).backward();
    const auto ga = to(z.grad(), DType::Complex128).to_vector<c128>();
    CHECK(ga[0] == c128(0, 0));
    CHECK(std::abs(ga[1] - c128(1, 0)) < 1e-6);  // sgn(z)
    CHECK(std::abs(ga[2] - c128(0, -1)) < 1e-6);
    z.zero_grad();
    sum(angle(z)).backward();
    const auto gt = to(z.grad(), DType::Complex128).to_vector<c128>();
    CHECK(gt[0] == c128(0, 0));
    for (size_t i = 1; i < gt.size(); ++i) {
      CHECK(std::isfinite(gt[i].real()));
      CHECK(std::isfinite(gt[i].imag()));
    }
    // i z / |z|^2 = i * 1e30 for z = 1e-30, and 1e30 for z = -1e-30 i
    CHECK(std::abs(gt[1] - c128(0, 1e30)) < 1e24);
    CHECK(std::abs(gt[2] - c128(1e30, 0)) < 1e24);
  }
  Tensor r = from_vector<double>({0.0, -2.0, 3.0});
  r.requires_grad_();
  sum(abs(r)).backward();
  check_close(r.grad().to_vector<double>(), {0.0, -1.0, 1.0}, {.atol = 0});
  r.zero_grad();
  sum(angle(r)).backward();
  check_close(r.grad().to_vector<double>(), {0.0, 0.0, 0.0}, {.atol = 0});
}

TEST_CASE("broadcast gradients are summed back to the input shape") {
  Tensor a = from_vector<double>({1.0, 2.0, 3.0}, {3, 1});
  Tensor b = from_vector<double>({10.0, 20.0, 30.0, 40.0});
  a.requires_grad_();
  b.requires_grad_();
  sum(a * b).backward();
  CHECK(a.grad().shape() == Dims{3, 1});
  CHECK(b.grad().shape() == Dims{4});
  check_close(a.grad().to_vector<double>(), {100.0, 100.0, 100.0}, {.atol = 1e-12});
  check_close(b.grad().to_vector<double>(), {6.0, 6.0, 6.0, 6.0}, {.atol = 1e-12});
  // a 0-d operand receives the sum over everything; a real leaf broadcast into a
  // complex product receives the real part
  Tensor s = scalar_tensor(2.0, DType::Float64);
  s.requires_grad_();
  const Tensor z = from_vector<c128>({{1.0, 1.0}, {0.0, 2.0}});
  sum(real(s * z)).backward();
  CHECK(s.grad().shape() == Dims{});
  CHECK(s.grad().dtype() == DType::Float64);
  CHECK(s.grad().item<double>() == doctest::Approx(1.0));
}

TEST_CASE("gradients through views reach the base leaf") {
  Tensor x = arange(0, 6, 1, DType::Float64).reshape({2, 3});
  x.requires_grad_();
  // x^T is [3, 2]; rows 1..2 of it, column 0: x[0, 1] and x[0, 2]
  Tensor v = x.transpose(0, 1).narrow(0, 1, 2).select(1, 0);
  sum(v * from_vector<double>({5.0, 7.0})).backward();
  check_close(x.grad().to_vector<double>(), {0, 5, 7, 0, 0, 0}, {.atol = 0});
  CHECK(x.grad().shape() == Dims{2, 3});

  // complex leaf seen as real pairs: L = sum(view_as_real(z) * c) has grad c_re + i c_im.
  Tensor z = from_vector<c128>({{1, 2}, {3, 4}});
  z.requires_grad_();
  const Tensor c = from_vector<double>({0.5, -1.0, 2.0, 3.0}, {2, 2});
  sum(view_as_real(z) * c).backward();
  check_close(z.grad().to_vector<c128>(), {c128(0.5, -1.0), c128(2.0, 3.0)}, {.atol = 0});

  // a real leaf seen as a complex tensor
  Tensor p = from_vector<double>({1, 2, 3, 4}, {2, 2});
  p.requires_grad_();
  sum(imag(view_as_complex(p)) * 3.0 + real(view_as_complex(p))).backward();
  check_close(p.grad().to_vector<double>(), {1, 3, 1, 3}, {.atol = 0});
}

// ============================================================== gradcheck itself

TEST_CASE("gradcheck rejects a wrong backward and names the entry") {
  // x^2 recorded with a backward that forgets the factor 2.
  const TensorFunction wrong_square = [](const V& in) {
    const Tensor& x = in[0];
    return record("wrong_square", ops::unary(ops::Unary::Square, x), {x},
                  [sx = SavedTensor(x)](const Tensor& g) -> std::vector<Tensor> { return {g * sx.get()}; });
  };
  const TensorFunction right_square = [](const V& in) {
    const Tensor& x = in[0];
    return record("right_square", ops::unary(ops::Unary::Square, x), {x},
                  [sx = SavedTensor(x)](const Tensor& g) -> std::vector<Tensor> { return {g * 2.0 * conj(sx.get())}; });
  };
  Generator g(23);
  const Tensor x = leaf(g, {3});
  const GradcheckResult bad = gradcheck(wrong_square, {x});
  CHECK(!bad.ok);
  CHECK(bad.worst_error > 0.0);
  CHECK(contains(bad.message, "input 0"));
  CHECK(contains(bad.message, "output scalar"));
  CHECK(gradcheck(right_square, {x}).ok);

  // A holomorphic backward without the conjugate is right for real inputs and
  // wrong for complex ones: gradcheck sees the difference.
  const TensorFunction unconjugated = [](const V& in) {
    const Tensor& z = in[0];
    return record("unconjugated_square", ops::unary(ops::Unary::Square, z), {z},
                  [sz = SavedTensor(z)](const Tensor& g) -> std::vector<Tensor> { return {g * 2.0 * sz.get()}; });
  };
  CHECK(gradcheck(unconjugated, {x}).ok);
  const GradcheckResult cbad = gradcheck(unconjugated, {leaf(g, {3}, DType::Complex128)});
  CHECK(!cbad.ok);
  CHECK(contains(cbad.message, "part)"));
  CHECK(gradcheck(right_square, {leaf(g, {3}, DType::Complex128)}).ok);

  // The wrong entry is located: the second input of a product with a wrong b gradient.
  const TensorFunction wrong_mul = [](const V& in) {
    const Tensor a = in[0], b = in[1];
    return record("wrong_mul", ops::binary(ops::Binary::Mul, a, b), {a, b},
                  [sb = SavedTensor(b)](const Tensor& gr) -> std::vector<Tensor> {
                    return {gr * sb.get(), gr * sb.get()};
                  });
  };
  const GradcheckResult bm = gradcheck(wrong_mul, {leaf(g, {2}), leaf(g, {2})});
  CHECK(!bm.ok);
  CHECK(contains(bm.message, "input 1"));
  // a NaN gradient is a failure, not a pass
  const TensorFunction nan_grad = [](const V& in) {
    const Tensor& x = in[0];
    return record("nan_grad", ops::clone(x), {x},
                  [](const Tensor& gr) -> std::vector<Tensor> { return {gr * std::numeric_limits<double>::quiet_NaN()}; });
  };
  CHECK(!gradcheck(nan_grad, {leaf(g, {2})}).ok);
  // gradcheck leaves the callers' .grad as it found them, for every input
  Tensor p = leaf(g, {2}), q = leaf(g, {2});
  sum(p * 3.0).backward();
  CHECK(gradcheck([](const V& in) { return in[0] * in[1]; }, {p, q}).ok);
  REQUIRE(p.grad().defined());
  check_close(p.grad().to_vector<double>(), {3.0, 3.0}, {.atol = 0});
  CHECK(!q.grad().defined());
  // inputs must be double precision
  CHECK(contains(error_of([&] { (void)gradcheck(right_square, {randn({2}, DType::Float32, &g).requires_grad_()}); }), "float64"));
}

TEST_CASE("gradcheck and gradgradcheck refuse an output that is not double precision, naming its dtype") {
  // A float32 or complex64 output would get its seed written as doubles (a heap
  // overflow, or "analytic 5.625 vs numeric 0"): refused, as the inputs are.
  Generator g(29);
  const Tensor x = leaf(g, {3}), z = leaf(g, {3}, DType::Complex128);
  for (const auto& input_and_narrow : {std::pair{x, DType::Float32}, std::pair{z, DType::Complex64}}) {
    const Tensor input = input_and_narrow.first;  // named copies: clang before 16 cannot capture a structured binding
    const DType narrow = input_and_narrow.second;
    const TensorFunction f = [narrow](const V& in) { return to(in[0] * in[0], narrow); };
    for (const bool second : {false, true}) {
      const std::string e = error_of([&] { (void)(second ? gradgradcheck(f, {input}) : gradcheck(f, {input})); });
      CAPTURE(e);
      CHECK(e.find(second ? "gradgradcheck: the function's output must be float64 or complex128" : "gradcheck: the function's output must be float64 or complex128") == 0);
      CHECK(contains(e, std::string("got ") + dtype_name(narrow)));
    }
  }
  CHECK(contains(error_of([&] { (void)gradgradcheck([](const V& in) { return in[0]; }, {leaf(g, {2}, DType::Complex64)}); }),
                 "gradgradcheck: inputs must be float64 or complex128"));
  // the same function in double precision passes
  CHECK(gradcheck([](const V& in) { return in[0] * in[0]; }, {x}).ok);
}

TEST_CASE("an exception inside the checked function leaves the inputs and their .grad as they were") {
  // The function throws on its call number `fail_at`: while a scalar is
  // perturbed (calls 2 and 3 perturb the first scalar), or in the analytic
  // pass after every .grad was cleared.
  for (const bool second : {false, true}) {
    for (const int fail_at : {2, 3, 6, 8}) {
      CAPTURE(second);
      CAPTURE(fail_at);
      const Tensor x = from_vector<double>({1.0, 2.0}).requires_grad_();
      const Tensor z = from_vector<c128>({{0.5, -1.5}}).requires_grad_();
      sum(x * 3.0).backward();
      int calls = 0;
      const TensorFunction f = [&](const V& in) {
        if (++calls == fail_at) fail("the function failed");
        return in[0] * real(in[1]);
      };
      const std::string e = error_of([&] { (void)(second ? gradgradcheck(f, {x, z}) : gradcheck(f, {x, z})); });
      CHECK(e == "the function failed");
      CHECK(x.to_vector<double>() == std::vector<double>{1.0, 2.0});  // bit for bit
      CHECK(z.to_vector<c128>() == std::vector<c128>{{0.5, -1.5}});
      REQUIRE(x.grad().defined());
      CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 3.0});
      CHECK_FALSE(z.grad().defined());
    }
  }
}
