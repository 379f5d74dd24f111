// Op-by-op parity with LibTorch: a few hundred random small graphs of
// unary, binary, scalar, reduction, matmul, view and indexing ops, in float32,
// float64, complex64 and complex128 (with mixed real/complex operands,
// broadcasting and non-contiguous views), run in Phasor and in LibTorch on the
// same input values. The outputs, a real loss built from them, and the
// gradients of every input must agree (float64 to 1e-10, float32 to 1e-5,
// relative to each value, and to the tensor's largest one where that is
// below 1: see worst_error): LibTorch's .grad() of a complex leaf follows the
// same convention as Phasor's (dL/dx + i dL/dy), so the comparison is direct.
// A failure prints the graph (seed, leaves, ops) and the first mismatching
// tensor and element. On 200 more graphs (float64, complex128) the
// Hessian-vector product of the loss (create_graph) is compared too.
//
// The reference works around three defects of Debian's LibTorch 1.13, each
// described where it is handled: complex dot products return 0, the backward
// of view_as_real rejects odd strides on size-1 dims, and the float32 gelu
// backward is wrong for non-contiguous gradients.
#define PHASOR_TEST_WITH_TORCH  // LibTorch first, then doctest: see tests/helpers.h
#include "tests/helpers.h"
#include "tests/torch_compare.h"

#include <cmath>
#include <complex>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "phasor.h"

namespace P = phasor;
using namespace phasor::test;

namespace {

// ------------------------------------------------------------ random graphs

// A value computed by both libraries.
struct Pair {
  P::Tensor p;
  torch::Tensor t;
};

std::string shape_str(const P::Dims& d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

class Graph {
 public:
  // `widened`: replay a float32/complex64 graph with the same random choices and
  // the same (float32-representable) input values in float64/complex128.
  // `perturbed` (with `widened`): also scale every input value by 1 + 2^-24 r,
  // r standard normal, to measure how sensitive the graph is to float32 rounding.
  Graph(uint64_t seed, P::DType dtype, bool widened = false, bool perturbed = false)
      : rng_(seed), gen_(seed), noise_(seed ^ 0x5eedull), dtype_(widened ? wide(dtype) : dtype), narrow_(!widened && !is_wide(dtype)),
        widened_(widened), perturbed_(perturbed) {}

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool coin() { return pick(2) == 0; }
  P::DType dtype() const { return dtype_; }
  P::DType real_dtype() const { return P::real_dtype(dtype_); }
  P::DType complex_dtype() const { return P::complex_dtype(dtype_); }
  std::vector<std::string>& log() { return log_; }
  const std::vector<Pair>& leaves() const { return leaves_; }

  // A leaf requiring grad in both libraries, with the same values.
  Pair leaf(const P::Dims& shape, P::DType dt) {
    Pair l = constant(shape, dt);
    l.p.requires_grad_();
    l.t.requires_grad_(true);
    leaves_.push_back(l);
    log_.push_back("  x" + std::to_string(leaves_.size() - 1) + " = leaf " + P::dtype_name(dt) + shape_str(shape));
    return l;
  }
  // Drawn in double precision, rounded to single precision for a float32 graph
  // (and its widened replay), so both runs see the same values.
  Pair constant(const P::Dims& shape, P::DType dt) {
    P::Tensor p = P::randn(shape, wide(dt), &gen_);
    if (narrow_ || widened_) p = P::ops::to(p, narrow(dt));
    if (widened_) p = P::ops::to(p, wide(dt));
    if (perturbed_) {
      const double e = std::ldexp(1.0, -24);
      const P::DType rt = P::real_dtype(p.dtype());
      P::Tensor factor = 1.0 + e * P::randn(p.shape(), rt, &noise_);
      if (p.is_complex()) factor = P::complex(factor, e * P::randn(p.shape(), rt, &noise_));
      p = P::ops::binary(P::ops::Binary::Mul, p, factor);
    }
    return {p, to_torch(p)};
  }
  Pair bool_mask(const P::Dims& shape) {
    P::Tensor p = P::gt(P::randn(shape, P::DType::Float64, &gen_), P::zeros({}, P::DType::Float64));
    return {p, to_torch(p)};
  }
  // int64 indices in [0, n) of the given shape.
  Pair indices(const P::Dims& shape, int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(shape.numel()));
    for (auto& i : v) i = pick(static_cast<int>(n));
    P::Tensor p = P::from_blob(v.data(), shape, P::DType::Int64);
    return {p, to_torch(p)};
  }
  // A shape that broadcasts with `s`: itself, some dims set to 1, a suffix, 0-d, or with a new leading dim.
  P::Dims partner_shape(const P::Dims& s) {
    P::Dims d = s;
    switch (pick(5)) {
      case 0: break;
      case 1:
        for (int i = 0; i < d.size(); ++i)
          if (coin()) d[i] = 1;
        break;
      case 2: {
        P::Dims suffix;
        const int keep = d.size() ? pick(d.size() + 1) : 0;
        for (int i = d.size() - keep; i < d.size(); ++i) suffix.push_back(d[i]);
        d = suffix;
        break;
      }
      case 3: d = P::Dims{}; break;
      case 4:
        if (d.size() < 4) d.insert(0, 2);
        break;
    }
    return d;
  }

 private:
  static bool is_wide(P::DType d) { return P::real_dtype(d) == P::DType::Float64; }
  static P::DType wide(P::DType d) { return P::is_complex(d) ? P::DType::Complex128 : P::DType::Float64; }
  static P::DType narrow(P::DType d) { return P::is_complex(d) ? P::DType::Complex64 : P::DType::Float32; }

  std::mt19937_64 rng_;
  P::Generator gen_, noise_;
  P::DType dtype_;
  bool narrow_, widened_, perturbed_;
  std::vector<Pair> leaves_;
  std::vector<std::string> log_;
};

// Keeps operands of log, sqrt, rsqrt, reciprocal, division and non-integer
// powers away from 0 and from the branch cut on the negative real axis.
Pair positive(const Pair& x) {
  if (x.p.is_complex()) {
    const torch::Tensor r = x.t.resolve_conj();
    return {P::complex(P::square(P::real(x.p)) + 0.5, P::imag(x.p)), torch::complex(torch::real(r).square() + 0.5, torch::imag(r))};
  }
  return {P::square(x.p) + 0.5, x.t.square() + 0.5};
}

using OpFn = std::function<std::optional<Pair>(Graph&, const Pair&, std::string&)>;
struct Op {
  const char* name;
  OpFn apply;  // nullopt when the op does not apply to this operand
};

std::vector<int64_t> random_dims(Graph& g, int ndim, bool allow_empty) {
  std::vector<int64_t> dims;
  for (int i = 0; i < ndim; ++i)
    if (g.coin()) dims.push_back(g.coin() ? i : i - ndim);  // positive and negative spellings
  if (dims.empty() && !allow_empty && ndim > 0) dims.push_back(g.pick(ndim));
  return dims;
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::ostringstream os;
  os << '{';
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  return os.str() + '}';
}

const char* flag_name(P::MatOp op) { return op == P::MatOp::None ? "N" : op == P::MatOp::Transpose ? "T" : "H"; }

std::vector<Op> make_ops() {
  std::vector<Op> ops;
  auto unary = [&](const char* name, P::Tensor (*pf)(const P::Tensor&), torch::Tensor (*tf)(const torch::Tensor&), bool pos,
                   int kinds /* 1 real, 2 complex, 3 both */) {
    ops.push_back({name, [=](Graph&, const Pair& x0, std::string& d) -> std::optional<Pair> {
                     if (!(kinds & (x0.p.is_complex() ? 2 : 1))) return std::nullopt;
                     const Pair x = pos ? positive(x0) : x0;
                     d = std::string(name) + (pos ? "(positive(x))" : "(x)");
                     return Pair{pf(x.p), tf(x.t)};
                   }});
  };
  unary("neg", P::neg, [](const torch::Tensor& t) { return torch::neg(t); }, false, 3);
  unary("exp", P::exp, [](const torch::Tensor& t) { return torch::exp(t); }, false, 3);
  unary("log", P::log, [](const torch::Tensor& t) { return torch::log(t); }, true, 3);
  unary("sqrt", P::sqrt, [](const torch::Tensor& t) { return torch::sqrt(t); }, true, 3);
  unary("rsqrt", P::rsqrt, [](const torch::Tensor& t) { return torch::rsqrt(t); }, true, 3);
  unary("sin", P::sin, [](const torch::Tensor& t) { return torch::sin(t); }, false, 3);
  unary("cos", P::cos, [](const torch::Tensor& t) { return torch::cos(t); }, false, 3);
  unary("tanh", P::tanh, [](const torch::Tensor& t) { return torch::tanh(t); }, false, 3);
  unary("sigmoid", P::sigmoid, [](const torch::Tensor& t) { return torch::sigmoid(t); }, false, 3);
  unary("silu", P::silu, [](const torch::Tensor& t) { return torch::silu(t); }, false, 1);
  // Debian's LibTorch 1.13 float32 gelu backward returns wrong values when the
  // incoming gradient is not contiguous (a permute after gelu): its reference
  // is computed in float64 and rounded.
  unary("gelu", P::gelu, [](const torch::Tensor& t) { return torch::gelu(t.to(torch::kDouble)).to(t.scalar_type()); }, false, 1);
  unary("abs", P::abs, [](const torch::Tensor& t) { return torch::abs(t); }, false, 3);
  unary("square", P::square, [](const torch::Tensor& t) { return torch::square(t); }, false, 3);
  unary("reciprocal", P::reciprocal, [](const torch::Tensor& t) { return torch::reciprocal(t); }, true, 3);
  unary("conj", P::conj, [](const torch::Tensor& t) { return torch::conj(t); }, false, 3);
  unary("angle", P::angle, [](const torch::Tensor& t) { return torch::angle(t); }, false, 2);
  unary("real", P::real, [](const torch::Tensor& t) { return torch::real(t.resolve_conj()); }, false, 2);
  unary("imag", P::imag, [](const torch::Tensor& t) { return torch::imag(t.resolve_conj()); }, false, 2);
  unary("view_as_real", P::view_as_real, [](const torch::Tensor& t) { return torch_view_as_real(t); }, false, 2);

  // ---- binary ops against a new leaf of a broadcastable shape (sometimes the other kind: real <-> complex)
  auto binary = [&](const char* name, P::Tensor (*pf)(const P::Tensor&, const P::Tensor&),
                    torch::Tensor (*tf)(const torch::Tensor&, const torch::Tensor&), bool real_only, bool positive_rhs) {
    ops.push_back({name, [=](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                     if (real_only && x.p.is_complex()) return std::nullopt;
                     P::DType other = x.p.dtype();
                     if (!real_only && g.pick(3) == 0) other = x.p.is_complex() ? g.real_dtype() : g.complex_dtype();
                     Pair y = g.leaf(g.partner_shape(x.p.shape()), other);
                     const std::string yname = "x" + std::to_string(g.leaves().size() - 1);
                     if (positive_rhs) y = positive(y);
                     const bool swap = !positive_rhs && g.coin();
                     d = std::string(name) + (swap ? "(" + yname + ", x)" : "(x, " + (positive_rhs ? "positive(" + yname + ")" : yname) + ")");
                     return swap ? Pair{pf(y.p, x.p), tf(y.t, x.t)} : Pair{pf(x.p, y.p), tf(x.t, y.t)};
                   }});
  };
  binary("add", P::add, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::add(a, b); }, false, false);
  binary("sub", P::sub, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::sub(a, b); }, false, false);
  binary("mul", P::mul, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::mul(a, b); }, false, false);
  binary("div", P::div, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::div(a, b); }, false, true);
  binary("maximum", P::maximum, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::maximum(a, b); }, true, false);
  binary("minimum", P::minimum, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::minimum(a, b); }, true, false);
  binary("atan2", P::atan2, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::atan2(a, b); }, true, false);
  ops.push_back({"pow", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const Pair base = positive(x);
                   const Pair e = g.leaf(g.partner_shape(x.p.shape()), x.p.dtype());
                   d = "pow(positive(x), x" + std::to_string(g.leaves().size() - 1) + ")";
                   return Pair{P::pow(base.p, e.p), torch::pow(base.t, e.t)};
                 }});
  ops.push_back({"pow_scalar", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const double exps[] = {2.0, 3.0, 0.5, -1.5, 2.5};
                   const double e = exps[g.pick(5)];
                   const bool integral = e == std::floor(e) && e > 0;
                   const Pair b = integral ? x : positive(x);
                   d = "pow(" + std::string(integral ? "x" : "positive(x)") + ", " + std::to_string(e) + ")";
                   return Pair{P::pow(b.p, e), torch::pow(b.t, e)};
                 }});
  ops.push_back({"scalar_arith", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   switch (g.pick(6)) {
                     case 0: d = "x * 2.5"; return Pair{x.p * 2.5, x.t * 2.5};
                     case 1: d = "1.5 - x"; return Pair{1.5 - x.p, 1.5 - x.t};
                     case 2: d = "x / -4"; return Pair{x.p / -4.0, x.t / -4.0};
                     case 3: {
                       const Pair y = positive(x);
                       d = "3 / positive(x)";
                       return Pair{3.0 / y.p, 3.0 / y.t};
                     }
                     case 4: d = "x + 0.75"; return Pair{x.p + 0.75, x.t + 0.75};
                     default: {
                       d = "x * (0.5-2i)";  // promotes real x to complex
                       return Pair{x.p * P::c128(0.5, -2.0), x.t * c10::complex<double>(0.5, -2.0)};
                     }
                   }
                 }});
  // x used twice: the gradients of both branches accumulate
  ops.push_back({"diamond", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   switch (g.pick(3)) {
                     case 0: d = "x * sin(x)"; return Pair{x.p * P::sin(x.p), x.t * torch::sin(x.t)};
                     case 1: d = "x - mean(x)"; return Pair{x.p - P::mean(x.p), x.t - x.t.mean()};
                     default: d = "x / (1 + abs(x))"; return Pair{x.p / (1.0 + P::abs(x.p)), x.t / (1.0 + torch::abs(x.t))};
                   }
                 }});
  ops.push_back({"polar", [](Graph&, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.is_complex()) return std::nullopt;
                   const Pair r = positive(x);
                   d = "polar(positive(x), x)";
                   return Pair{P::polar(r.p, x.p), torch::polar(r.t, x.t)};
                 }});
  ops.push_back({"complex", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.is_complex()) return std::nullopt;
                   const Pair y = g.leaf(g.partner_shape(x.p.shape()), x.p.dtype());
                   d = "complex(x, x" + std::to_string(g.leaves().size() - 1) + ")";
                   return Pair{P::complex(x.p, y.p), torch::complex(x.t, y.t)};
                 }});
  ops.push_back({"where", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const Pair c = g.bool_mask(g.partner_shape(x.p.shape()));
                   const Pair y = g.leaf(g.partner_shape(x.p.shape()), x.p.dtype());
                   d = "where(mask" + shape_str(c.p.shape()) + ", x, x" + std::to_string(g.leaves().size() - 1) + ")";
                   return Pair{P::where(c.p, x.p, y.p), torch::where(c.t, x.t, y.t)};
                 }});
  ops.push_back({"masked_fill", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   P::Dims ms = x.p.shape();
                   for (int i = 0; i < ms.size(); ++i)
                     if (g.coin()) ms[i] = 1;
                   const Pair m = g.bool_mask(ms);
                   d = "masked_fill(x, mask" + shape_str(ms) + ", -0.5)";
                   return Pair{P::masked_fill(x.p, m.p, -0.5), x.t.masked_fill(m.t, -0.5)};
                 }});
  ops.push_back({"to_complex", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.is_complex()) return std::nullopt;
                   d = "to(x, complex)";
                   return Pair{P::to(x.p, g.complex_dtype()), x.t.to(torch_dtype(g.complex_dtype()))};
                 }});

  // ---- reductions
  ops.push_back({"sum", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const auto dims = random_dims(g, x.p.dim(), true);
                   const bool keep = g.coin();
                   d = "sum(x, " + dims_str(dims) + ", keepdim=" + std::to_string(keep) + ")";
                   if (dims.empty()) return Pair{P::sum(x.p, {}, keep), keep ? x.t.sum(torch::IntArrayRef(std::vector<int64_t>{}), true) : x.t.sum()};
                   return Pair{P::sum(x.p, dims, keep), x.t.sum(dims, keep)};
                 }});
  ops.push_back({"mean", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const auto dims = random_dims(g, x.p.dim(), false);
                   const bool keep = g.coin();
                   d = "mean(x, " + dims_str(dims) + ", keepdim=" + std::to_string(keep) + ")";
                   if (dims.empty()) return Pair{P::mean(x.p), x.t.mean()};
                   return Pair{P::mean(x.p, dims, keep), x.t.mean(dims, keep)};
                 }});
  ops.push_back({"norm", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   const auto dims = random_dims(g, x.p.dim(), false);
                   const bool keep = g.coin();
                   d = "norm(x, " + dims_str(dims) + ", keepdim=" + std::to_string(keep) + ")";
                   if (dims.empty()) return Pair{P::norm(x.p), torch::linalg_vector_norm(x.t, 2)};
                   return Pair{P::norm(x.p, dims, keep), torch::linalg_vector_norm(x.t, 2, dims, keep)};
                 }});
  auto along_dim = [&](const char* name, std::function<Pair(const Pair&, int64_t, bool)> f) {
    ops.push_back({name, [=](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                     if (x.p.is_complex() || x.p.dim() == 0) return std::nullopt;
                     const int64_t dim = g.pick(x.p.dim()) - (g.coin() ? x.p.dim() : 0);
                     const bool keep = g.coin();
                     d = std::string(name) + "(x, dim=" + std::to_string(dim) + ", keepdim=" + std::to_string(keep) + ")";
                     return f(x, dim, keep);
                   }});
  };
  along_dim("max", [](const Pair& x, int64_t dim, bool keep) {
    return Pair{P::max(x.p, dim, keep).values, std::get<0>(torch::max(x.t, dim, keep))};
  });
  along_dim("min", [](const Pair& x, int64_t dim, bool keep) {
    return Pair{P::min(x.p, dim, keep).values, std::get<0>(torch::min(x.t, dim, keep))};
  });
  along_dim("logsumexp", [](const Pair& x, int64_t dim, bool keep) {
    return Pair{P::logsumexp(x.p, dim, keep), torch::logsumexp(x.t, {dim}, keep)};
  });
  along_dim("softmax", [](const Pair& x, int64_t dim, bool) { return Pair{P::softmax(x.p, dim), torch::softmax(x.t, dim)}; });
  along_dim("log_softmax", [](const Pair& x, int64_t dim, bool) {
    return Pair{P::log_softmax(x.p, dim), torch::log_softmax(x.t, dim)};
  });

  // ---- views
  ops.push_back({"transpose", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() < 2) return std::nullopt;
                   const int64_t a = g.pick(x.p.dim()), b = g.pick(x.p.dim()) - x.p.dim();
                   d = "transpose(x, " + std::to_string(a) + ", " + std::to_string(b) + ")";
                   return Pair{P::transpose(x.p, a, b), x.t.transpose(a, b)};
                 }});
  ops.push_back({"permute", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() < 2) return std::nullopt;
                   std::vector<int64_t> order(static_cast<size_t>(x.p.dim()));
                   for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
                   for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(g.pick(static_cast<int>(i) + 1))]);
                   d = "permute(x, " + dims_str(order) + ")";
                   return Pair{P::permute(x.p, P::Dims(order)), x.t.permute(order)};
                 }});
  ops.push_back({"reshape", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.numel() % 2 == 0 && g.coin()) {
                     d = "reshape(x, {2, -1})";
                     return Pair{P::reshape(x.p, {2, -1}), x.t.reshape({2, -1})};
                   }
                   d = "reshape(x, {-1})";
                   return Pair{P::reshape(x.p, {-1}), x.t.reshape({-1})};
                 }});
  ops.push_back({"flatten", [](Graph&, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() < 2) return std::nullopt;
                   d = "flatten(x, 1)";
                   return Pair{P::flatten(x.p, 1), x.t.flatten(1)};
                 }});
  ops.push_back({"narrow", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim());
                   const int64_t n = x.p.size(dim);
                   if (n < 2) return std::nullopt;
                   const int64_t start = g.pick(static_cast<int>(n - 1)), len = 1 + g.pick(static_cast<int>(n - start));
                   d = "narrow(x, " + std::to_string(dim) + ", " + std::to_string(start) + ", " + std::to_string(len) + ")";
                   return Pair{P::narrow(x.p, dim, start, len), x.t.narrow(dim, start, len)};
                 }});
  ops.push_back({"select", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim());
                   const int64_t index = g.pick(static_cast<int>(x.p.size(dim))) - (g.coin() ? x.p.size(dim) : 0);
                   d = "select(x, " + std::to_string(dim) + ", " + std::to_string(index) + ")";
                   return Pair{P::select(x.p, dim, index), x.t.select(dim, index)};
                 }});
  ops.push_back({"unsqueeze_expand", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() >= 4) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim() + 1);
                   P::Dims shape = x.p.shape();
                   shape.insert(static_cast<int>(dim), 3);
                   d = "unsqueeze(x, " + std::to_string(dim) + ").expand(" + shape_str(shape) + ")";
                   return Pair{P::expand(P::unsqueeze(x.p, dim), shape), x.t.unsqueeze(dim).expand(sizes_of(shape))};
                 }});
  ops.push_back({"squeeze", [](Graph&, const Pair& x, std::string& d) -> std::optional<Pair> {
                   for (int i = 0; i < x.p.dim(); ++i)
                     if (x.p.size(i) == 1) {
                       d = "squeeze(x, " + std::to_string(i) + ")";
                       return Pair{P::squeeze(x.p, i), x.t.squeeze(i)};
                     }
                   return std::nullopt;
                 }});
  ops.push_back({"contiguous", [](Graph&, const Pair& x, std::string& d) -> std::optional<Pair> {
                   d = "contiguous(x)";
                   return Pair{P::contiguous(x.p), x.t.contiguous()};
                 }});
  ops.push_back({"view_as_complex", [](Graph&, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.is_complex() || x.p.numel() % 2 != 0) return std::nullopt;
                   d = "view_as_complex(clone(reshape(x, {-1, 2})))";
                   return Pair{P::view_as_complex(P::clone(P::reshape(x.p, {-1, 2}))),
                               torch::view_as_complex(x.t.reshape({-1, 2}).contiguous().clone())};
                 }});

  // ---- matmul against a new leaf, with transpose / conjugate-transpose flags
  // (listed three times: it has the most variants)
  const Op matmul{"matmul", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const P::MatOp flags[] = {P::MatOp::None, P::MatOp::Transpose, P::MatOp::ConjTranspose};
                   const int kind = x.p.dim() >= 2 ? g.pick(4) : g.pick(2);  // 0 matrix, 1 vector, 2 batched, 3 batched over x's batch
                   // flags need 2-d operands on both sides
                   const P::MatOp fa = x.p.dim() >= 2 && kind != 1 ? flags[g.pick(3)] : P::MatOp::None;
                   const int64_t k = fa == P::MatOp::None ? x.p.size(-1) : x.p.size(-2);
                   const int64_t n = 1 + g.pick(3);
                   P::MatOp fb = P::MatOp::None;
                   P::Dims bs;
                   if (kind == 1) {
                     bs = P::Dims{k};
                   } else {
                     // Phasor's differentiable matmul takes flags only when both operands are 2-d or more.
                     if (x.p.dim() >= 2) fb = flags[g.pick(3)];
                     if (kind == 2) {  // a new leading batch dim, and x's own batch dims: broadcasting adds a dim
                       bs.push_back(2);
                       for (int i = 0; i + 2 < x.p.dim(); ++i) bs.push_back(x.p.size(i));
                     }
                     if (kind == 3)
                       for (int i = 0; i + 2 < x.p.dim(); ++i) bs.push_back(g.coin() ? x.p.size(i) : 1);
                     bs.push_back(fb == P::MatOp::None ? k : n);
                     bs.push_back(fb == P::MatOp::None ? n : k);
                   }
                   P::DType other = x.p.dtype();
                   if (g.pick(4) == 0) other = x.p.is_complex() ? g.real_dtype() : g.complex_dtype();
                   const Pair b = g.leaf(bs, other);
                   d = std::string("matmul(x, x") + std::to_string(g.leaves().size() - 1) + ", " + flag_name(fa) + flag_name(fb) + ")";
                   // LibTorch's matmul wants one dtype: promote as Phasor does (the casts are differentiable).
                   const torch::ScalarType rt = torch_dtype(P::promote(x.p.dtype(), b.p.dtype()));
                   return Pair{P::matmul(x.p, b.p, fa, fb), torch_matmul(torch_op(x.t.to(rt), fa), torch_op(b.t.to(rt), fb))};
                 }};
  for (int copy = 0; copy < 3; ++copy) ops.push_back(matmul);

  // ---- indexing and joining
  ops.push_back({"index_select", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim());
                   const Pair idx = g.indices(P::Dims{1 + g.pick(4)}, x.p.size(dim));
                   d = "index_select(x, " + std::to_string(dim) + ", " + idx.p.to_string() + ")";
                   return Pair{P::index_select(x.p, dim, idx.p), torch::index_select(x.t, dim, idx.t)};
                 }});
  ops.push_back({"gather", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim());
                   P::Dims is = x.p.shape();
                   is[static_cast<int>(dim)] = 1 + g.pick(3);
                   const Pair idx = g.indices(is, x.p.size(dim));
                   d = "gather(x, " + std::to_string(dim) + ", index" + shape_str(is) + ")";
                   return Pair{P::gather(x.p, dim, idx.p), torch::gather(x.t, dim, idx.t)};
                 }});
  ops.push_back({"index_add", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim());
                   const Pair idx = g.indices(P::Dims{1 + g.pick(3)}, x.p.size(dim));
                   P::Dims ss = x.p.shape();
                   ss[static_cast<int>(dim)] = idx.p.numel();
                   const Pair s = g.leaf(ss, x.p.dtype());
                   d = "index_add(x, " + std::to_string(dim) + ", " + idx.p.to_string() + ", x" + std::to_string(g.leaves().size() - 1) + ")";
                   return Pair{P::index_add(x.p, dim, idx.p, s.p), x.t.index_add(dim, idx.t, s.t)};
                 }});
  ops.push_back({"cat", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim()) - (g.coin() ? x.p.dim() : 0);
                   P::Dims ys = x.p.shape();
                   ys[static_cast<int>(dim < 0 ? dim + x.p.dim() : dim)] = 1 + g.pick(2);
                   const Pair y = g.leaf(ys, x.p.dtype());
                   d = "cat({x, x" + std::to_string(g.leaves().size() - 1) + "}, " + std::to_string(dim) + ")";
                   return Pair{P::cat({x.p, y.p}, dim), torch::cat({x.t, y.t}, dim)};
                 }});
  ops.push_back({"stack", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() >= 4) return std::nullopt;
                   const int64_t dim = g.pick(x.p.dim() + 1);
                   const Pair y = g.leaf(x.p.shape(), x.p.dtype());
                   d = "stack({x" + std::to_string(g.leaves().size() - 1) + ", x}, " + std::to_string(dim) + ")";
                   return Pair{P::stack({y.p, x.p}, dim), torch::stack({y.t, x.t}, dim)};
                 }});
  ops.push_back({"split", [](Graph& g, const Pair& x, std::string& d) -> std::optional<Pair> {
                   if (x.p.dim() == 0 || x.p.size(0) < 2) return std::nullopt;
                   const int64_t size = 1 + g.pick(static_cast<int>(x.p.size(0) - 1));
                   const auto ps = P::split(x.p, size, 0);
                   const auto ts = x.t.split(size, 0);
                   d = "split(x, " + std::to_string(size) + ", 0)[0] * 2 - [last]";
                   return Pair{ps.front() * 2.0 - P::sum(ps.back(), {0}, true), ts.front() * 2.0 - ts.back().sum({0}, true)};
                 }});
  return ops;
}

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = make_ops();
  return ops;
}

// One run of a random graph in both libraries.
struct Run {
  std::string description;  // the graph, for failure reports
  std::string exception;
  bool finite = true;  // LibTorch's values and gradients are all finite
  P::Tensor out_p, loss_p;
  torch::Tensor out_t, loss_t;
  std::vector<P::Tensor> grads_p;
  std::vector<torch::Tensor> grads_t;
};

// Builds a random graph on g: ops applied to one leaf, then a real loss
// sum(y * w) (y's real pairs for complex y). Returns x (the last op's output) and the loss.
std::pair<Pair, Pair> build_graph(Graph& g, std::vector<std::string>& steps) {
  P::Dims shape;
  const int rank = 1 + g.pick(3);
  for (int i = 0; i < rank; ++i) shape.push_back(1 + g.pick(4));
  Pair x = g.leaf(shape, g.dtype());
  const int n_ops = 1 + g.pick(4);
  for (int k = 0; k < n_ops; ++k) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const Op& op = all_ops()[static_cast<size_t>(g.pick(static_cast<int>(all_ops().size())))];
      std::string d;
      std::optional<Pair> r = op.apply(g, x, d);
      if (!r) continue;
      steps.push_back("x = " + d + "   -> " + shape_str(r->p.shape()) + " " + P::dtype_name(r->p.dtype()));
      x = *r;
      break;
    }
  }
  const Pair y = x.p.is_complex() ? Pair{P::view_as_real(x.p), torch_view_as_real(x.t)} : x;
  const Pair w = g.constant(y.p.shape(), y.p.dtype());
  const Pair loss{P::sum(y.p * w.p), (y.t * w.t).sum()};
  steps.push_back("loss = sum(" + std::string(x.p.is_complex() ? "view_as_real(x)" : "x") + " * w)");
  return {x, loss};
}

std::string describe_graph(uint64_t seed, P::DType dtype, Graph& g, const std::vector<std::string>& steps) {
  std::ostringstream os;
  os << "graph seed " << seed << " (" << P::dtype_name(dtype) << "):\n";
  for (const auto& l : g.log()) os << l << '\n';
  for (const auto& s : steps) os << "  " << s << '\n';
  return os.str();
}

Run execute(uint64_t seed, P::DType dtype, bool widened = false, bool perturbed = false) {
  Graph g(seed, dtype, widened, perturbed);
  Run run;
  std::vector<std::string> steps;
  try {
    const auto [x, loss] = build_graph(g, steps);
    run.description = describe_graph(seed, dtype, g, steps);

    loss.t.backward();
    run.finite = all_finite(x.t) && all_finite(loss.t);
    for (const Pair& l : g.leaves()) run.finite = run.finite && all_finite(l.t.grad());
    loss.p.backward();
    run.out_p = x.p;
    run.out_t = x.t;
    run.loss_p = loss.p;
    run.loss_t = loss.t;
    for (const Pair& l : g.leaves()) {
      run.grads_p.push_back(l.p.grad());
      run.grads_t.push_back(l.t.grad());
    }
  } catch (const std::exception& ex) {
    run.description = describe_graph(seed, dtype, g, steps);
    run.exception = ex.what();
  }
  return run;
}

// The Hessian-vector product of a random graph's loss with respect to its
// leaves, along a random direction: Phasor's HessianVectorProduct against
// LibTorch's torch::autograd::grad with create_graph (then the gradient of
// <grad, v>). Returns "" when they agree to tol, "skipped" when LibTorch's
// product is not finite.
std::string compare_hvp(uint64_t seed, P::DType dtype, double tol, std::string* description) {
  Graph g(seed, dtype);
  std::vector<std::string> steps;
  try {
    const auto [x, loss] = build_graph(g, steps);
    *description = describe_graph(seed, dtype, g, steps);
    std::vector<P::Tensor> leaves_p, v_p;
    std::vector<torch::Tensor> leaves_t, v_t;
    for (const Pair& l : g.leaves()) {
      const Pair v = g.constant(l.p.shape(), l.p.dtype());
      leaves_p.push_back(l.p);
      leaves_t.push_back(l.t);
      v_p.push_back(v.p);
      v_t.push_back(v.t);
    }
    const std::vector<P::Tensor> hv_p = P::HessianVectorProduct(loss.p, leaves_p)(v_p);
    const std::vector<torch::Tensor> grads = torch::autograd::grad({loss.t}, leaves_t, {}, true, /*create_graph=*/true, /*allow_unused=*/true);
    torch::Tensor inner;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      const torch::Tensor term = (grads[i].is_complex() ? torch::real(grads[i].conj() * v_t[i]) : grads[i] * v_t[i]).sum();
      inner = inner.defined() ? inner + term : term;
    }
    std::vector<torch::Tensor> hv_t(leaves_t.size());
    if (inner.defined() && inner.requires_grad()) hv_t = torch::autograd::grad({inner}, leaves_t, {}, false, false, /*allow_unused=*/true);
    for (size_t i = 0; i < hv_t.size(); ++i) {
      if (!hv_t[i].defined()) hv_t[i] = torch::zeros_like(leaves_t[i]);
      if (!all_finite(hv_t[i])) return "skipped";
    }
    for (size_t i = 0; i < hv_p.size(); ++i) {
      const std::string e = compare("H v of x" + std::to_string(i), hv_p[i], hv_t[i].detach(), tol);
      if (!e.empty()) return e;
    }
    return "";
  } catch (const std::exception& ex) {
    *description = describe_graph(seed, dtype, g, steps);
    return std::string("exception: ") + ex.what();
  }
}

// Phasor's results of `a` against LibTorch's results of `b`.
std::string compare_runs(const Run& a, const Run& b, double tol) {
  if (a.grads_p.size() != b.grads_t.size()) return "the two runs built different graphs";
  std::string e = compare("output", a.out_p, b.out_t, tol);
  if (e.empty()) e = compare("loss", a.loss_p, b.loss_t, tol);
  for (size_t i = 0; i < a.grads_p.size() && e.empty(); ++i) e = compare("grad of x" + std::to_string(i), a.grads_p[i], b.grads_t[i], tol);
  return e;
}

// The results of a run (output, loss, input gradients) as LibTorch tensors;
// Phasor's are copied. An undefined gradient stays undefined (read as zeros).
std::vector<torch::Tensor> results(const Run& r, bool phasor) {
  std::vector<torch::Tensor> out;
  auto add = [&](const P::Tensor& p, const torch::Tensor& t) { out.push_back(phasor ? (p.defined() ? to_torch(p) : torch::Tensor()) : t); };
  add(r.out_p, r.out_t);
  add(r.loss_p, r.loss_t);
  for (size_t i = 0; i < r.grads_p.size(); ++i) add(r.grads_p[i], r.grads_t[i]);
  return out;
}

// The largest worst_error of a against b over all results (compare's measure).
double distance(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (!a[k].defined() && !b[k].defined()) continue;
    const torch::Tensor& ref = b[k].defined() ? b[k] : a[k];
    const auto x = a[k].defined() ? values_of(a[k]) : std::vector<std::complex<double>>(static_cast<size_t>(ref.numel()));
    const auto y = b[k].defined() ? values_of(b[k]) : std::vector<std::complex<double>>(static_cast<size_t>(ref.numel()));
    if (x.size() != y.size()) return INFINITY;
    const double e = worst_error(x, y);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

struct Outcome {
  bool skipped = false;     // LibTorch itself produced a non-finite value
  bool by_float64 = false;  // float32: accepted against the float64 replay, not LibTorch's float32
  std::string error;        // "" when everything matched
  std::string description;
};

// Builds one random graph, runs it in both libraries, and compares.
//
// float64 graphs must agree with LibTorch to 1e-10, float32 graphs to 1e-5.
// A float32 graph that misses is judged against the exact answer instead: it is
// replayed in float64 (LibTorch) on the same input values, and once more on
// inputs scaled by 1 + O(2^-24) to measure how much float32 rounding of the
// inputs alone moves the results (the graph's conditioning). Phasor passes if
// its float32 error against the float64 answer is within 1e-5 plus four times
// the larger of LibTorch's own float32 error and that sensitivity: no worse
// than LibTorch, and no worse than the problem allows. This keeps an
// ill-conditioned random graph (sin of exp of a square, 1e30-sized powers), or
// LibTorch's own float32 rounding, from being blamed on Phasor.
Outcome run_graph(uint64_t seed, P::DType dtype) {
  Outcome out;
  const Run run = execute(seed, dtype);
  out.description = run.description;
  if (!run.exception.empty()) {
    out.error = "exception: " + run.exception;
    return out;
  }
  if (!run.finite) {
    out.skipped = true;
    return out;
  }
  const bool single = P::real_dtype(dtype) == P::DType::Float32;
  const double tol = single ? 1e-5 : 1e-10;
  out.error = compare_runs(run, run, tol);
  if (out.error.empty() || !single) return out;

  const Run exact = execute(seed, dtype, true), moved = execute(seed, dtype, true, true);
  if (!exact.exception.empty() || !moved.exception.empty()) {
    out.error += "\n(the float64 replay failed: " + exact.exception + moved.exception + ")";
    return out;
  }
  const auto reference = results(exact, false);
  const double phasor_error = distance(results(run, true), reference);
  const double torch_error = distance(results(run, false), reference);
  const double sensitivity = distance(results(moved, false), reference);
  const double allowed = tol + 4.0 * std::max(torch_error, sensitivity);
  std::ostringstream os;
  os << "\nagainst LibTorch in float64: Phasor float32 error " << phasor_error << ", LibTorch float32 error " << torch_error
     << ", sensitivity to input rounding " << sensitivity << ", allowed " << allowed;
  if (phasor_error <= allowed) {
    out.by_float64 = true;
    out.error.clear();
  } else {
    out.error += os.str();
  }
  return out;
}

}  // namespace

TEST_CASE("the comparison itself detects a mismatch") {
  const P::Tensor p = P::from_vector<double>({0.5, 1.0, 2.0});
  const torch::Tensor t = to_torch(p);
  CHECK(compare("exp", P::exp(p), torch::exp(t), 1e-10) == "");
  CHECK(compare("exp vs sin", P::exp(p), torch::sin(t), 1e-10).find("element 2") != std::string::npos);  // the worst one
  CHECK(compare("shape", P::exp(p), torch::exp(t).unsqueeze(0), 1e-10).find("shape") != std::string::npos);
  CHECK(compare("dtype", P::exp(p), torch::exp(t).to(torch::kFloat), 1e-10).find("dtype") != std::string::npos);
  // a 1e-9 relative perturbation passes a float32 tolerance and fails a float64 one
  CHECK(compare("close", P::exp(p) * 1.000000001, torch::exp(t), 1e-5) == "");
  CHECK(compare("close", P::exp(p) * 1.000000001, torch::exp(t), 1e-10) != "");
  // ... on values far below 1 too, and an all-zero reference matches zeros only
  CHECK(compare("small", P::exp(p) * 1e-12, torch::exp(t) * 1e-12, 1e-10) == "");
  CHECK(compare("small", P::exp(p) * 1.000000001e-12, torch::exp(t) * 1e-12, 1e-10) != "");
  CHECK(compare("zeros", P::zeros({3}, P::DType::Float64), torch::zeros({3}, torch::kDouble), 1e-10) == "");
  CHECK(compare("zeros", P::full({3}, 1e-300, P::DType::Float64), torch::zeros({3}, torch::kDouble), 1e-10) != "");
  CHECK(compare("nan", P::log(p - 1.0), torch::log(t - 0.5), 1e-10) != "");
}

TEST_CASE("complex vector products: Phasor against the LibTorch reference") {
  const P::Tensor a = P::from_vector<P::c128>({{1.0, 1.0}, {2.0, 2.0}}), b = P::from_vector<P::c128>({{3.0, 0.0}, {4.0, 0.0}});
  const P::Tensor dot = P::matmul(a, b);
  CHECK(std::abs(dot.item<P::c128>() - P::c128(11.0, 11.0)) < 1e-12);
  CHECK(compare("dot", dot, torch_matmul(to_torch(a), to_torch(b)), 1e-12) == "");
}

TEST_CASE("complex gradients: LibTorch and Phasor use the same convention") {
  const P::Tensor zp = P::from_vector<P::c128>({{1.0, 2.0}, {-0.5, 0.25}});
  P::Tensor z = P::clone(zp);
  z.requires_grad_();
  torch::Tensor zt = to_torch(zp).requires_grad_(true);
  // L = sum |z|^2 + Re(z^2): grad 2z + 2 conj(z) = 4x.
  P::sum(P::square(P::abs(z)) + P::real(z * z)).backward();
  (torch::square(torch::abs(zt)) + torch::real(zt * zt)).sum().backward();
  CHECK(compare("grad", z.grad(), zt.grad(), 1e-12) == "");
  const auto g = z.grad().to_vector<P::c128>();
  CHECK(std::abs(g[0] - P::c128(4.0, 0.0)) < 1e-12);
}

TEST_CASE("random op graphs match LibTorch in values and gradients") {
  const P::DType dtypes[] = {P::DType::Float64, P::DType::Complex128, P::DType::Float32, P::DType::Complex64};
  const int kGraphs = 1000;
  int compared = 0, skipped = 0, failed = 0, by_float64 = 0;
  for (int i = 0; i < kGraphs; ++i) {
    const P::DType dt = dtypes[i % 4];
    const Outcome o = run_graph(0x9a11'0000ull + static_cast<uint64_t>(i), dt);
    if (o.skipped) {
      ++skipped;
      continue;
    }
    ++compared;
    if (!o.error.empty()) ++failed;
    if (o.by_float64) ++by_float64;
    CHECK_MESSAGE(o.error.empty(), o.description, o.error);
  }
  MESSAGE("compared ", compared, " graphs (", by_float64, " float32 ones judged against LibTorch in float64), skipped ", skipped,
          " with non-finite LibTorch results, ", failed, " mismatches");
  CHECK(compared >= kGraphs * 9 / 10);
}

TEST_CASE("random op graphs: Hessian-vector products match LibTorch's create_graph double backward") {
  // float64 and complex128 only, to 1e-9: second derivatives in float32 are dominated by rounding.
  const P::DType dtypes[] = {P::DType::Float64, P::DType::Complex128};
  const int kGraphs = 200;
  int compared = 0, skipped = 0;
  for (int i = 0; i < kGraphs; ++i) {
    std::string description;
    const std::string e = compare_hvp(0x4e55'0000ull + static_cast<uint64_t>(i), dtypes[i % 2], 1e-9, &description);
    if (e == "skipped") {
      ++skipped;
      continue;
    }
    ++compared;
    CHECK_MESSAGE(e.empty(), description, e);
  }
  MESSAGE("compared the Hessian-vector products of ", compared, " graphs, skipped ", skipped, " with non-finite LibTorch results");
  CHECK(compared >= kGraphs * 9 / 10);
}

// softplus stays out of the random graphs' pool (a new op would redraw every
// graph of the seeds above): its own check, values and gradients, float32 and
// float64, from -40 to 40 (torch's threshold raised from 20 to 1000, so that
// it computes log(1 + exp(x)) there too rather than returning x).
TEST_CASE("softplus matches LibTorch in values and gradients, far from 0 too") {
  for (const auto& [pd, td] : {std::pair{P::DType::Float32, torch::kFloat32}, std::pair{P::DType::Float64, torch::kFloat64}}) {
    std::vector<double> xs;
    for (int i = -40; i <= 40; ++i) xs.push_back(i + 0.37);
    const P::Tensor x = P::ops::to(P::from_vector(xs), pd).requires_grad_();
    const torch::Tensor tx = torch::tensor(xs, torch::kFloat64).to(td).requires_grad_();
    const P::Tensor y = P::softplus(x);
    const torch::Tensor ty = torch::softplus(tx, 1, 1000);
    P::sum(y * y).backward();
    (ty * ty).sum().backward();
    const auto a = P::ops::to(y, P::DType::Float64).to_vector<double>(), ga = P::ops::to(x.grad(), P::DType::Float64).to_vector<double>();
    const torch::Tensor b = ty.detach().to(torch::kFloat64), gb = tx.grad().to(torch::kFloat64);
    const double tol = pd == P::DType::Float32 ? 1e-6 : 1e-14;
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      CHECK(a[i] == doctest::Approx(b[static_cast<int64_t>(i)].item<double>()).epsilon(tol).scale(0));
      CHECK(ga[i] == doctest::Approx(gb[static_cast<int64_t>(i)].item<double>()).epsilon(tol).scale(0));
    }
  }
}
