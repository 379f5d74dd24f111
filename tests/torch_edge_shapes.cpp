// Every op of the library on 0-d, empty and size-1 inputs, against LibTorch
// (issue 27, item 2). Each case runs the op in both libraries on the same
// values, in float64 and complex128 where the op takes complex input:
//   - LibTorch refuses the input: Phasor must refuse it too, with a
//     phasor::Error (not another exception, not a crash);
//   - LibTorch accepts it: Phasor must accept it and give LibTorch's shapes,
//     dtypes and values, and the gradients of every input of a real loss
//     sum(Re(out * w)) (w random) must match torch::autograd's.
// The op list walks tensor/ops.h, autograd/functions.h, tensor/fused.h and
// autograd/fused.h in their order; the case "the sweep covers every op" checks
// that each name of kAllOps was swept at least once. The three fused ops that
// LibTorch 1.13 lacks (cmha_rotate, causal_attention, attention_softmax) are
// compared with Phasor's composed references (autograd/fused.h), themselves
// made of ops swept here; the fused ops are refused outside their documented
// shapes (0-d and wrong ranks), which only has to be a phasor::Error.
#define PHASOR_TEST_WITH_TORCH  // LibTorch first, then doctest: see tests/helpers.h
#include "tests/helpers.h"
#include "tests/torch_compare.h"

#include <cmath>
#include <complex>
#include <functional>
#include <set>
#include <tuple>
#include <sstream>
#include <string>
#include <vector>

#include "phasor.h"

namespace P = phasor;
using namespace phasor::test;

namespace {

using PT = std::vector<P::Tensor>;
using TT = std::vector<torch::Tensor>;
using P::DType;
using P::Dims;

constexpr DType kF = DType::Float64, kC = DType::Complex128, kI = DType::Int64, kB = DType::Bool;

// One input of a case: a random leaf (float/complex, differentiated), a random
// bool mask, or int64 indices with the given values.
struct In {
  Dims shape;
  DType dtype;
  std::vector<int64_t> ints = {};
  bool constant = false;  // a float input that is not differentiated (rotate's table)
};

struct Case {
  std::string group;  // views, elementwise, reductions, linalg, indexing, fused: one test case each
  std::string op;     // the name in kAllOps
  std::string what;  // op and arguments, for messages
  std::vector<In> inputs;
  std::function<PT(const PT&)> phasor;
  std::function<TT(const TT&)> torch;
  // For the fused ops LibTorch lacks: Phasor's composed reference stands in
  // for `torch` (outputs and gradients by Phasor's autograd).
  std::function<PT(const PT&)> reference = nullptr;
};

std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}
std::string& group() {  // the group of the cases being added
  static std::string g;
  return g;
}

std::string str(const Dims& d) {
  std::ostringstream os;
  os << d;
  return os.str();
}
std::string str(const std::vector<int64_t>& v) { return str(Dims(v)); }
std::string str(DType d) { return P::dtype_name(d); }

void add(std::string op, std::string what, std::vector<In> inputs, std::function<PT(const PT&)> p, std::function<TT(const TT&)> t) {
  cases().push_back({group(), std::move(op), std::move(what), std::move(inputs), std::move(p), std::move(t), nullptr});
}
// A single-output op.
void add1(std::string op, std::string what, std::vector<In> inputs, std::function<P::Tensor(const PT&)> p,
          std::function<torch::Tensor(const TT&)> t) {
  add(std::move(op), std::move(what), std::move(inputs), [p](const PT& x) { return PT{p(x)}; },
      [t](const TT& x) { return TT{t(x)}; });
}

// The shapes every op is swept over: 0-d, size 1, empty with the 0 in various
// positions, and one ordinary shape as a control.
const std::vector<Dims> kShapes = {{}, {1}, {1, 1}, {0}, {0, 3}, {3, 0}, {2, 0, 3}, {1, 0, 1}, {2, 3}};
// Dims to try on them: valid and out of range for every rank up to 3.
const std::vector<int64_t> kDims = {-3, -2, -1, 0, 1, 2};
const DType kInexact[] = {kF, kC};

// Operands kept away from 0 and the negative real axis (log, sqrt, division, powers).
P::Tensor shifted(const P::Tensor& x) {
  if (x.is_complex()) return P::complex(P::square(P::real(x)) + 0.5, P::imag(x));
  return P::square(x) + 0.5;
}
torch::Tensor shifted(const torch::Tensor& x) {
  if (x.is_complex()) return torch::complex(torch::real(x).square() + 0.5, torch::imag(x));
  return x.square() + 0.5;
}

// Shapes that meet `s` in a binary op: itself, 0-d, size 1, a trailing part,
// ones where s has zeros, and two that do not broadcast (LibTorch refuses).
std::vector<Dims> partners(const Dims& s) {
  std::vector<Dims> out = {s, {}, {1}, {0}, {3}};
  if (s.size()) out.push_back(Dims{s.back()});
  Dims ones = s;
  for (auto& d : ones) d = d == 0 ? 1 : d;
  out.push_back(ones);
  return out;
}

// A LibTorch reference that refuses, what Phasor refuses by design
// (a fused op outside its documented shapes, a LibTorch 1.13 defect).
void require(bool ok, const char* what) { TORCH_CHECK(ok, what); }

// ---------------------------------------------------------------- the sweep

void views() {
  for (const Dims& s : kShapes)
    for (DType dt : kInexact) {
      const std::string on = str(s) + " " + str(dt);
      const int64_t n = s.numel();
      std::vector<Dims> targets = {{-1}, {}, {1}, {n}, {0, -1}, {-1, 0}, {1, -1}, {n, 1, 1}, {-1, -1}};
      for (const Dims& to : targets) {
        add1("reshape", "reshape(" + on + ", " + str(to) + ")", {{s, dt}}, [to](const PT& x) { return P::reshape(x[0], to); },
             [to](const TT& x) { return x[0].reshape(sizes_of(to)); });
        add1("view", "view(" + on + ", " + str(to) + ")", {{s, dt}}, [to](const PT& x) { return P::view(x[0], to); },
             [to](const TT& x) { return x[0].view(sizes_of(to)); });
      }
      std::vector<Dims> orders = {{}, {0}, {-1}, {1, 0}, {0, 1}, {0, 0}, {2, 0, 1}, {0, 2, 1}};
      for (const Dims& o : orders)
        add1("permute", "permute(" + on + ", " + str(o) + ")", {{s, dt}}, [o](const PT& x) { return P::permute(x[0], o); },
             [o](const TT& x) { return x[0].permute(sizes_of(o)); });
      for (int64_t a : kDims) {
        for (int64_t b : {int64_t{0}, int64_t{-1}})
          add1("transpose", "transpose(" + on + ", " + std::to_string(a) + ", " + std::to_string(b) + ")", {{s, dt}},
               [a, b](const PT& x) { return P::transpose(x[0], a, b); }, [a, b](const TT& x) { return x[0].transpose(a, b); });
        for (int64_t start : {0, 1, 2})
          for (int64_t len : {0, 1, 2})
            add1("narrow", "narrow(" + on + ", " + std::to_string(a) + ", " + std::to_string(start) + ", " + std::to_string(len) + ")",
                 {{s, dt}}, [=](const PT& x) { return P::narrow(x[0], a, start, len); },
                 [=](const TT& x) { return x[0].narrow(a, start, len); });
        for (int64_t i : {-1, 0, 1, 2})
          add1("select", "select(" + on + ", " + std::to_string(a) + ", " + std::to_string(i) + ")", {{s, dt}},
               [=](const PT& x) { return P::select(x[0], a, i); }, [=](const TT& x) { return x[0].select(a, i); });
        add1("squeeze", "squeeze(" + on + ", " + std::to_string(a) + ")", {{s, dt}}, [a](const PT& x) { return P::squeeze(x[0], a); },
             [a](const TT& x) { return x[0].squeeze(a); });
        add1("unsqueeze", "unsqueeze(" + on + ", " + std::to_string(a) + ")", {{s, dt}},
             [a](const PT& x) { return P::unsqueeze(x[0], a); }, [a](const TT& x) { return x[0].unsqueeze(a); });
        for (int64_t e : {int64_t{-1}, int64_t{0}, int64_t{1}})
          add1("flatten", "flatten(" + on + ", " + std::to_string(a) + ", " + std::to_string(e) + ")", {{s, dt}},
               [=](const PT& x) { return P::flatten(x[0], a, e); }, [=](const TT& x) { return x[0].flatten(a, e); });
      }
      std::vector<Dims> expands = {s, {}, {0}, {1}, {2}, {-1}, {2, -1}, {4, 0, 3}, {2, 2, 3}};
      for (const Dims& to : expands)
        add1("expand", "expand(" + on + ", " + str(to) + ")", {{s, dt}}, [to](const PT& x) { return P::expand(x[0], to); },
             [to](const TT& x) { return x[0].expand(sizes_of(to)); });
      add1("contiguous", "contiguous(transpose(" + on + "))", {{s, dt}},
           [](const PT& x) { return P::contiguous(x[0].dim() >= 2 ? P::transpose(x[0], 0, 1) : x[0]); },
           [](const TT& x) { return (x[0].dim() >= 2 ? x[0].transpose(0, 1) : x[0]).contiguous(); });
      add1("clone", "clone(" + on + ")", {{s, dt}}, [](const PT& x) { return P::clone(x[0]); }, [](const TT& x) { return x[0].clone(); });
      add1("to", "to(" + on + ", complex128)", {{s, dt}}, [](const PT& x) { return P::to(x[0], kC); },
           [](const TT& x) { return x[0].to(torch::kComplexDouble); });
      add1("to_device", "to(" + on + ", cpu)", {{s, dt}}, [](const PT& x) { return P::to(x[0], P::kCPU); },
           [](const TT& x) { return x[0].to(torch::kCPU); });
      if (dt == kC) {
        add1("view_as_real", "view_as_real(" + on + ")", {{s, dt}}, [](const PT& x) { return P::view_as_real(x[0]); },
             [](const TT& x) { return torch_view_as_real(x[0]); });
        add1("real", "real(" + on + ")", {{s, dt}}, [](const PT& x) { return P::real(x[0]); }, [](const TT& x) { return torch::real(x[0]); });
        add1("imag", "imag(" + on + ")", {{s, dt}}, [](const PT& x) { return P::imag(x[0]); }, [](const TT& x) { return torch::imag(x[0]); });
      } else {
        add1("view_as_complex", "view_as_complex(" + on + ")", {{s, dt}}, [](const PT& x) { return P::view_as_complex(x[0]); },
             [](const TT& x) { return torch::view_as_complex(x[0]); });
        // view_as_complex of shapes that end in a pair
        Dims pairs = s;
        pairs.push_back(2);
        add1("view_as_complex", "view_as_complex(" + str(pairs) + ")", {{pairs, dt}}, [](const PT& x) { return P::view_as_complex(x[0]); },
             [](const TT& x) { return torch::view_as_complex(x[0]); });
      }
    }
  // The cases: imag of a complex (1, 0, 3) tensor, views of empty tensors at nonzero offsets.
  add1("imag", "imag((1, 0, 3) complex128)", {{{1, 0, 3}, kC}}, [](const PT& x) { return P::imag(x[0]); },
       [](const TT& x) { return torch::imag(x[0]); });
  add1("narrow", "narrow(select((2, 0, 3), 0, 1), 1, 2, 1)", {{{2, 0, 3}, kF}},
       [](const PT& x) { return P::narrow(P::select(x[0], 0, 1), 1, 2, 1); }, [](const TT& x) { return x[0].select(0, 1).narrow(1, 2, 1); });
  add1("select", "select((0, 4), 1, 2)", {{{0, 4}, kF}}, [](const PT& x) { return P::select(x[0], 1, 2); },
       [](const TT& x) { return x[0].select(1, 2); });
  add1("select", "select(select((5), 0, 0), 0, 3)", {{{5}, kF}}, [](const PT& x) { return P::select(P::select(x[0], 0, 0), 0, 3); },
       [](const TT& x) { return x[0].select(0, 0).select(0, 3); });
}

using PUnary = P::Tensor (*)(const P::Tensor&);
using TUnary = torch::Tensor (*)(const torch::Tensor&);

void unary(const char* op, PUnary pf, TUnary tf, bool pos, bool real_only, bool complex_only = false) {
  for (const Dims& s : kShapes)
    for (DType dt : kInexact) {
      if ((real_only && dt == kC) || (complex_only && dt == kF)) continue;
      add1(op, std::string(op) + "(" + str(s) + " " + str(dt) + ")", {{s, dt}},
           [=](const PT& x) { return pf(pos ? shifted(x[0]) : x[0]); }, [=](const TT& x) { return tf(pos ? shifted(x[0]) : x[0]); });
    }
}

void elementwise() {
  unary("neg", P::neg, [](const torch::Tensor& t) { return torch::neg(t); }, false, false);
  unary("exp", P::exp, [](const torch::Tensor& t) { return torch::exp(t); }, false, false);
  unary("log", P::log, [](const torch::Tensor& t) { return torch::log(t); }, true, false);
  unary("sqrt", P::sqrt, [](const torch::Tensor& t) { return torch::sqrt(t); }, true, false);
  unary("rsqrt", P::rsqrt, [](const torch::Tensor& t) { return torch::rsqrt(t); }, true, false);
  unary("sin", P::sin, [](const torch::Tensor& t) { return torch::sin(t); }, false, false);
  unary("cos", P::cos, [](const torch::Tensor& t) { return torch::cos(t); }, false, false);
  unary("tanh", P::tanh, [](const torch::Tensor& t) { return torch::tanh(t); }, false, false);
  unary("sigmoid", P::sigmoid, [](const torch::Tensor& t) { return torch::sigmoid(t); }, false, false);
  unary("silu", P::silu, [](const torch::Tensor& t) { return torch::silu(t); }, false, true);
  unary("gelu", P::gelu, [](const torch::Tensor& t) { return torch::gelu(t); }, false, true);
  unary("gelu_derivative", P::gelu_derivative, [](const torch::Tensor& t) { return torch::gelu_backward(torch::ones_like(t), t); }, false, true);
  unary("abs", P::abs, [](const torch::Tensor& t) { return torch::abs(t); }, false, false);
  unary("square", P::square, [](const torch::Tensor& t) { return torch::square(t); }, false, false);
  unary("reciprocal", P::reciprocal, [](const torch::Tensor& t) { return torch::reciprocal(t); }, true, false);
  unary("conj", P::conj, [](const torch::Tensor& t) { return torch::conj(t); }, false, false);
  unary("angle", P::angle, [](const torch::Tensor& t) { return torch::angle(t); }, false, false, true);
  // euler_phase is angle with a regularised derivative; with eps 0 it is angle's.
  unary("euler_phase", [](const P::Tensor& t) { return P::euler_phase(t, 0.0); }, [](const torch::Tensor& t) { return torch::angle(t); },
        false, false, true);
  for (const Dims& s : kShapes)
    for (DType dt : kInexact) {
      const std::string on = str(s) + " " + str(dt);
      for (double e : {2.0, 0.5, -1.5})
        add1("pow_scalar", "pow(" + on + ", " + std::to_string(e) + ")", {{s, dt}}, [e](const PT& x) { return P::pow(shifted(x[0]), e); },
             [e](const TT& x) { return torch::pow(shifted(x[0]), e); });
      add1("scalar_arith", "x * 2.5 + 1.5 - x / -4 (" + on + ")", {{s, dt}}, [](const PT& x) { return (x[0] * 2.5 + 1.5) - x[0] / -4.0; },
           [](const TT& x) { return (x[0] * 2.5 + 1.5) - x[0] / -4.0; });
      add1("scalar_arith", "3 / x - (0.5-2i) * x (" + on + ")", {{s, dt}},
           [](const PT& x) { return 3.0 / shifted(x[0]) - P::c128(0.5, -2.0) * x[0]; },
           [](const TT& x) { return 3.0 / shifted(x[0]) - c10::complex<double>(0.5, -2.0) * x[0]; });
      for (const Dims& s2 : partners(s)) {
        const std::string on2 = on + ", " + str(s2);
        auto binary = [&](const char* op, P::Tensor (*pf)(const P::Tensor&, const P::Tensor&),
                          torch::Tensor (*tf)(const torch::Tensor&, const torch::Tensor&), bool pos_rhs, bool real_only) {
          if (real_only && dt == kC) return;
          add1(op, std::string(op) + "(" + on2 + ")", {{s, dt}, {s2, dt}}, [=](const PT& x) { return pf(x[0], pos_rhs ? shifted(x[1]) : x[1]); },
               [=](const TT& x) { return tf(x[0], pos_rhs ? shifted(x[1]) : x[1]); });
        };
        binary("add", P::add, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::add(a, b); }, false, false);
        binary("sub", P::sub, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::sub(a, b); }, false, false);
        binary("mul", P::mul, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::mul(a, b); }, false, false);
        binary("div", P::div, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::div(a, b); }, true, false);
        binary("maximum", P::maximum, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::maximum(a, b); }, false, true);
        binary("minimum", P::minimum, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::minimum(a, b); }, false, true);
        binary("atan2", P::atan2, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::atan2(a, b); }, false, true);
        add1("pow", "pow(shifted(" + on2 + "))", {{s, dt}, {s2, dt}}, [](const PT& x) { return P::pow(shifted(x[0]), x[1]); },
             [](const TT& x) { return torch::pow(shifted(x[0]), x[1]); });
        if (dt == kF) {
          add1("polar", "polar(" + on2 + ")", {{s, dt}, {s2, dt}}, [](const PT& x) { return P::polar(shifted(x[0]), x[1]); },
               [](const TT& x) { return torch::polar(shifted(x[0]), x[1]); });
          add1("complex", "complex(" + on2 + ")", {{s, dt}, {s2, dt}}, [](const PT& x) { return P::complex(x[0], x[1]); },
               [](const TT& x) { return torch::complex(x[0], x[1]); });
        }
        add1("where", "where(mask, " + on2 + ")", {{s2, kB}, {s, dt}, {s2, dt}}, [](const PT& x) { return P::where(x[0], x[1], x[2]); },
             [](const TT& x) { return torch::where(x[0], x[1], x[2]); });
        add1("masked_fill", "masked_fill(" + on + ", mask " + str(s2) + ")", {{s, dt}, {s2, kB}},
             [](const PT& x) { return P::masked_fill(x[0], x[1], -0.5); }, [](const TT& x) { return x[0].masked_fill(x[1], -0.5); });
        if (dt == kF) {
          using PB = P::Tensor (*)(const P::Tensor&, const P::Tensor&);
          using TB = torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&);
          const std::tuple<const char*, PB, TB> cmp[] = {
              {"eq", P::eq, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::eq(a, b); }},
              {"ne", P::ne, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::ne(a, b); }},
              {"lt", P::lt, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::lt(a, b); }},
              {"le", P::le, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::le(a, b); }},
              {"gt", P::gt, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::gt(a, b); }},
              {"ge", P::ge, [](const torch::Tensor& a, const torch::Tensor& b) { return torch::ge(a, b); }}};
          for (const auto& c : cmp) {
            const PB pf = std::get<1>(c);
            const TB tf = std::get<2>(c);
            add1(std::get<0>(c), std::string(std::get<0>(c)) + "(" + on2 + ")", {{s, dt}, {s2, dt}},
                 [pf](const PT& x) { return pf(x[0], x[1]); }, [tf](const TT& x) { return tf(x[0], x[1]); });
          }
        }
      }
    }
}

void reductions() {
  const std::vector<std::vector<int64_t>> dim_lists = {{}, {0}, {-1}, {1}, {-2}, {0, -1}, {0, 0}, {2}, {-3}};
  for (const Dims& s : kShapes)
    for (DType dt : kInexact) {
      const std::string on = str(s) + " " + str(dt);
      for (const auto& dims : dim_lists)
        for (bool keep : {false, true}) {
          const std::string args = "(" + on + ", " + str(dims) + ", keepdim=" + std::to_string(keep) + ")";
          // An empty list is all dims in Phasor; LibTorch spells it without dims.
          auto torch_dims = [dims, keep](const torch::Tensor& t, auto&& all, auto&& some) {
            return dims.empty() ? (keep ? some(t, std::vector<int64_t>{}, true) : all(t)) : some(t, dims, keep);
          };
          add1("sum", "sum" + args, {{s, dt}}, [=](const PT& x) { return P::sum(x[0], dims, keep); },
               [=](const TT& x) {
                 return torch_dims(x[0], [](const torch::Tensor& t) { return t.sum(); },
                                   [](const torch::Tensor& t, const std::vector<int64_t>& d, bool k) { return t.sum(d, k); });
               });
          add1("mean", "mean" + args, {{s, dt}}, [=](const PT& x) { return P::mean(x[0], dims, keep); },
               [=](const TT& x) {
                 return torch_dims(x[0], [](const torch::Tensor& t) { return t.mean(); },
                                   [](const torch::Tensor& t, const std::vector<int64_t>& d, bool k) { return t.mean(d, k); });
               });
          add1("norm", "norm" + args, {{s, dt}}, [=](const PT& x) { return P::norm(x[0], dims, keep); },
               [=](const TT& x) {
                 if (dims.empty() && !keep) return torch::linalg_vector_norm(x[0], 2);
                 return torch::linalg_vector_norm(x[0], 2, dims, keep);
               });
        }
      for (int64_t d : kDims)
        for (bool keep : {false, true}) {
          const std::string args = "(" + on + ", dim=" + std::to_string(d) + ", keepdim=" + std::to_string(keep) + ")";
          if (dt == kF) {
            add("max", "max" + args, {{s, dt}},
                [=](const PT& x) {
                  const auto r = P::max(x[0], d, keep);
                  return PT{r.values, r.indices};
                },
                [=](const TT& x) {
                  const auto r = torch::max(x[0], d, keep);
                  return TT{std::get<0>(r), std::get<1>(r)};
                });
            add("min", "min" + args, {{s, dt}},
                [=](const PT& x) {
                  const auto r = P::min(x[0], d, keep);
                  return PT{r.values, r.indices};
                },
                [=](const TT& x) {
                  const auto r = torch::min(x[0], d, keep);
                  return TT{std::get<0>(r), std::get<1>(r)};
                });
            add1("argmax", "argmax" + args, {{s, dt}}, [=](const PT& x) { return P::argmax(x[0], d, keep); },
                 [=](const TT& x) { return torch::argmax(x[0], d, keep); });
            add1("logsumexp", "logsumexp" + args, {{s, dt}}, [=](const PT& x) { return P::logsumexp(x[0], d, keep); },
                 [=](const TT& x) { return torch::logsumexp(x[0], {d}, keep); });
          }
        }
      for (int64_t d : kDims) {
        if (dt == kC) break;
        const std::string args = "(" + on + ", dim=" + std::to_string(d) + ")";
        add1("softmax", "softmax" + args, {{s, dt}}, [=](const PT& x) { return P::softmax(x[0], d); },
             [=](const TT& x) { return torch::softmax(x[0], d); });
        add1("log_softmax", "log_softmax" + args, {{s, dt}}, [=](const PT& x) { return P::log_softmax(x[0], d); },
             [=](const TT& x) { return torch::log_softmax(x[0], d); });
      }
      add1("amax", "amax(" + on + ")", {{s, dt}}, [](const PT& x) { return P::ops::amax(x[0]); },
           [](const TT& x) { return torch::amax(x[0].detach()); });  // raw op: no gradient
      add1("all_finite", "all_finite(" + on + ")", {{s, dt}}, [](const PT& x) { return P::scalar_tensor(P::ops::all_finite(x[0]), kB); },
           [](const TT& x) { return torch::isfinite(x[0]).all(); });
      // sum_to: a broadcast result summed back to an input shape (LibTorch's sum_to_size).
      for (const Dims& to : partners(s))
        add1("sum_to", "sum_to(" + on + ", " + str(to) + ")", {{s, dt}}, [to](const PT& x) { return P::sum_to(x[0], to); },
             [to](const TT& x) { return x[0].sum_to_size(sizes_of(to)); });
    }
}

void linalg() {
  // (a, b) shapes with zero-sized M, N, K and batch, vectors, and 0-d operands (refused).
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{5, 5, 0}, {0, 5}}, {{0, 3}, {3, 4}}, {{3, 0}, {0, 4}}, {{3, 4}, {4, 0}}, {{0, 2, 3}, {3, 4}}, {{2, 0, 3}, {3, 4}},
      {{2, 3, 0}, {2, 0, 4}}, {{0, 3, 4}, {0, 4, 2}}, {{2, 3, 4}, {0, 4, 2}}, {{0}, {0}}, {{0}, {0, 3}}, {{3, 0}, {0}},
      {{1}, {1}}, {{1, 1}, {1, 1}}, {{1}, {1, 1}}, {{}, {3}}, {{3}, {}}, {{}, {}}, {{2, 1, 0}, {3, 0, 2}}, {{1, 0}, {1, 0}},
      {{2, 3}, {3, 4}}};
  for (const auto& [sa, sb] : shapes)
    for (DType dt : kInexact) {
      const std::string on = str(sa) + " x " + str(sb) + " " + str(dt);
      add1("matmul", "matmul(" + on + ")", {{sa, dt}, {sb, dt}}, [](const PT& x) { return P::matmul(x[0], x[1]); },
           [](const TT& x) { return torch_matmul(x[0], x[1]); });
      if (sa.size() < 2 || sb.size() < 2) continue;
      for (P::MatOp oa : {P::MatOp::None, P::MatOp::Transpose, P::MatOp::ConjTranspose})
        for (P::MatOp ob : {P::MatOp::None, P::MatOp::Transpose, P::MatOp::ConjTranspose}) {
          if (oa == P::MatOp::None && ob == P::MatOp::None) continue;
          // op(a) op(b) with the flags applied to operands stored the other way round
          const Dims ta = oa == P::MatOp::None ? sa : P::ops::transpose(P::empty(sa), -1, -2).shape();
          const Dims tb = ob == P::MatOp::None ? sb : P::ops::transpose(P::empty(sb), -1, -2).shape();
          add1("matmul", "matmul(" + str(ta) + " op " + str(tb) + " op, " + str(dt) + ")", {{ta, dt}, {tb, dt}},
               [=](const PT& x) { return P::matmul(x[0], x[1], oa, ob); },
               [=](const TT& x) { return torch::matmul(torch_op(x[0], oa), torch_op(x[1], ob)); });
        }
      if (dt == kF && !sa.empty() && !sb.empty() && sa.back() % 2 == 0)
        add1("matmul_real_part_conj", "matmul_real_part_conj(" + str(sa) + ", " + str(sa) + ")", {{sa, dt}, {sa, dt}},
             [](const PT& x) { return P::ops::matmul_real_part_conj(x[0], x[1]); },
             [](const TT& x) { return torch::matmul(x[0].detach(), x[1].detach().transpose(-1, -2)); });  // raw op
    }
}

// int64 indices 0, 1, ... (mod n, or all 0 when n is 0) of `shape`.
In indices(const Dims& shape, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = n > 0 ? static_cast<int64_t>(i) % n : 0;
  return {shape, kI, v};
}

void indexing() {
  for (const Dims& s : kShapes)
    for (DType dt : kInexact) {
      const std::string on = str(s) + " " + str(dt);
      for (int64_t d : kDims) {
        const int nd = std::max(s.size(), 1);
        const bool valid = d >= -nd && d < nd;
        const int64_t w = d < 0 ? d + nd : d;
        const int64_t n = valid && s.size() ? s[static_cast<int>(w)] : 1;  // the size along d (1 for 0-d)
        const std::string at = on + ", dim=" + std::to_string(d);
        for (const Dims& is : std::vector<Dims>{{}, {0}, {1}, {2}}) {
          // LibTorch 1.13's index_select of a 0-d tensor with other than one index returns uninitialised
          // memory (or corrupts the heap); PyTorch 2 refuses it, and so does the reference.
          add1("index_select", "index_select(" + at + ", index " + str(is) + ")", {{s, dt}, indices(is, n)},
               [d](const PT& x) { return P::index_select(x[0], d, x[1]); },
               [d](const TT& x) {
                 require(x[0].dim() > 0 || x[1].numel() == 1, "index_select(): Index to scalar can have only 1 value");
                 return torch::index_select(x[0], d, x[1]);
               });
          Dims src = s;
          if (valid && s.size()) src[static_cast<int>(w)] = is.numel();
          if (is.size() == 1 || s.size())  // (index_add's source on a 0-d x is the 0-d x)
            add1("index_add", "index_add(" + at + ", index " + str(is) + ", source " + str(src) + ")", {{s, dt}, indices(is, n), {src, dt}},
                 [d](const PT& x) { return P::index_add(x[0], d, x[1], x[2]); }, [d](const TT& x) { return x[0].index_add(d, x[1], x[2]); });
        }
        // gather / scatter_add: index of x's rank, at most x's sizes, 0 or 1 long along d.
        for (int64_t len : {int64_t{0}, int64_t{1}}) {
          Dims is = s;
          if (valid && s.size()) is[static_cast<int>(w)] = len;
          add1("gather", "gather(" + at + ", index " + str(is) + ")", {{s, dt}, indices(is, n)},
               [d](const PT& x) { return P::gather(x[0], d, x[1]); }, [d](const TT& x) { return torch::gather(x[0], d, x[1]); });
          add1("scatter_add", "scatter_add(" + str(s) + ", dim=" + std::to_string(d) + ", index " + str(is) + ")", {indices(is, n), {is, dt}},
               [s, d](const PT& x) { return P::scatter_add(s, d, x[0], x[1]); },
               [s, d](const TT& x) { return torch::zeros(sizes_of(s), x[1].options().requires_grad(false)).scatter_add(d, x[0], x[1]); });
        }
        add1("cat", "cat(" + at + ", same)", {{s, dt}, {s, dt}}, [d](const PT& x) { return P::cat({x[0], x[1]}, d); },
             [d](const TT& x) { return torch::cat({x[0], x[1]}, d); });
        add1("stack", "stack(" + at + ", same)", {{s, dt}, {s, dt}}, [d](const PT& x) { return P::stack({x[0], x[1]}, d); },
             [d](const TT& x) { return torch::stack({x[0], x[1]}, d); });
        for (int64_t k : {1, 2}) {
          add("split", "split(" + at + ", " + std::to_string(k) + ")", {{s, dt}}, [=](const PT& x) { return P::split(x[0], k, d); },
              [=](const TT& x) { return x[0].split(k, d); });
          add("chunk", "chunk(" + at + ", " + std::to_string(k) + ")", {{s, dt}}, [=](const PT& x) { return P::chunk(x[0], k, d); },
              [=](const TT& x) { return x[0].chunk(k, d); });
        }
      }
      // embedding: weight [V, D] (0 and 1 sized), ids of any shape in range.
      if (s.size() == 2)
        for (const Dims& ids : std::vector<Dims>{{}, {0}, {2}, {2, 0}})
          add1("embedding", "embedding(" + on + ", ids " + str(ids) + ")", {{s, dt}, indices(ids, s[0])},
               [](const PT& x) { return P::embedding(x[0], x[1]); },
               [](const TT& x) {  // LibTorch's embedding has no complex backward: the same rows by index_select
                 std::vector<int64_t> shape = x[1].sizes().vec();
                 shape.push_back(x[0].size(1));
                 return torch::index_select(x[0], 0, x[1].reshape({-1})).reshape(shape);
               });
    }
  // The cases: cat of (0, 2) and (0, 3) along 1; stack of (0, 1, 0); cat with a different empty shape.
  add1("cat", "cat((0, 2), (0, 3), dim=1)", {{{0, 2}, kF}, {{0, 3}, kF}}, [](const PT& x) { return P::cat({x[0], x[1]}, 1); },
       [](const TT& x) { return torch::cat({x[0], x[1]}, 1); });
  for (int64_t d : {0, 1, 2, 3, -1})
    add1("stack", "stack((0, 1, 0) x3, dim=" + std::to_string(d) + ")", {{{0, 1, 0}, kC}, {{0, 1, 0}, kC}, {{0, 1, 0}, kC}},
         [d](const PT& x) { return P::stack({x[0], x[1], x[2]}, d); }, [d](const TT& x) { return torch::stack({x[0], x[1], x[2]}, d); });
  add1("cat", "cat((2, 3), (0))", {{{2, 3}, kF}, {{0}, kF}}, [](const PT& x) { return P::cat({x[0], x[1]}, 0); },
       [](const TT& x) { return torch::cat({x[0], x[1]}, 0); });
  for (int64_t nq : {0, 1, 3})
    for (int64_t nk : {0, 1, 3})
      add1("causal_mask", "causal_mask(" + std::to_string(nq) + ", " + std::to_string(nk) + ")", {},
           [=](const PT&) { return P::ops::causal_mask(nq, nk, 1); },
           [=](const TT&) { return torch::ones({nq, nk}, torch::kBool).triu(2); });
}

void fused() {
  const double eps = 1e-6;
  for (const Dims& s : kShapes) {
    Dims ws = s.size() ? Dims{s.back()} : Dims{1};
    add1("rms_norm", "rms_norm(" + str(s) + ", weight " + str(ws) + ")", {{s, kF}, {ws, kF}},
         [=](const PT& x) { return P::rms_norm(x[0], x[1], eps); },
         [=](const TT& x) {
           require(x[0].dim() >= 1, "rms_norm: needs at least one dim");
           return x[0] * torch::rsqrt(x[0].square().mean(-1, true) + eps) * x[1];
         });
    add1("swiglu", "swiglu(" + str(s) + ")", {{s, kF}, {s, kF}}, [](const PT& x) { return P::swiglu(x[0], x[1]); },
         [](const TT& x) { return torch::silu(x[0]) * x[1]; });
  }
  for (int64_t r : {0, 1, 3})
    for (int64_t v : {0, 1, 3})
      for (bool mean : {true, false})
        for (int64_t ignore : {int64_t{-100}, int64_t{0}}) {
          const std::string what = "cross_entropy([" + std::to_string(r) + ", " + std::to_string(v) + "], ignore " + std::to_string(ignore) +
                                   ", mean=" + std::to_string(mean) + ")";
          add1("cross_entropy", what, {{{r, v}, kF}, indices({r}, v)}, [=](const PT& x) { return P::cross_entropy(x[0], x[1], ignore, mean); },
               [=](const TT& x) {
                 namespace F = torch::nn::functional;
                 return F::cross_entropy(x[0], x[1], F::CrossEntropyFuncOptions().ignore_index(ignore).reduction(
                                                         mean ? F::CrossEntropyFuncOptions::reduction_t(torch::kMean) : torch::kSum));
               });
        }
  add1("cross_entropy", "cross_entropy(0-d logits)", {{{}, kF}, indices({}, 1)}, [](const PT& x) { return P::cross_entropy(x[0], x[1]); },
       [](const TT& x) {
         require(false, "cross_entropy: logits must be [rows, classes]");
         return x[0];
       });
  // [B, N, H, P] with zeros in each place, and the wrong ranks.
  const std::vector<Dims> zshapes = {{0, 2, 1, 2}, {1, 0, 1, 2}, {1, 2, 0, 2}, {1, 2, 1, 0}, {1, 1, 1, 1}, {1, 2, 2, 2}, {}, {2, 2}};
  for (const Dims& z : zshapes) {
    const bool four = z.size() == 4;
    const int64_t n = four ? z[1] : 1, h = four ? z[2] : 1, pairs = four ? z[3] : 1;
    add1("rotate", "rotate(" + str(z) + ")", {{z, kC}, In{{n, pairs}, kC, {}, true}}, [](const PT& x) { return P::rotate(x[0], x[1]); },
         [](const TT& x) {
           require(x[0].dim() == 4, "rotate: expected [B, N, H, P]");
           return x[0] * x[1].unsqueeze(1);
         });
    const int64_t offset = 2;
    const double base = 100.0;
    add1("rotary_table", "rotary_table(" + std::to_string(n) + ", " + std::to_string(pairs) + ")", {},
         [=](const PT&) { return P::ops::rotary_table(n, pairs, offset, base, 0.0, 1, kC); },
         [=](const TT&) {
           const torch::Tensor m = torch::arange(n, torch::kDouble) + offset;
           const torch::Tensor w = torch::pow(base, -2.0 * torch::arange(pairs, torch::kDouble) / static_cast<double>(2 * pairs));
           const torch::Tensor angle = m.unsqueeze(1) * w.unsqueeze(0);
           return torch::polar(torch::ones_like(angle), angle);
         });
    cases().push_back({group(), "cmha_rotate", "cmha_rotate(" + str(z) + ")", {{z, kC}, {{h, pairs}, kF}, {{h, pairs}, kF}, {{h}, kF}},
                       [](const PT& x) { return PT{P::cmha_rotate(x[0], x[1], x[2], x[3], 1, 100.0)}; }, nullptr,
                       [](const PT& x) {
                         P::ops::cmha_rotate(x[0], {x[1], x[2], x[3], 1, 100.0});  // the fused op's shape checks, then its formula
                         return PT{P::cmha_rotate_reference(x[0], x[1], x[2], x[3], 1, 100.0)};
                       }});
    // q [B, Nq, H, d], k and v [B, Nk, H, d]: z's shape for q, and Nk of 1 (at least one key) or 0.
    for (int64_t nk : {1, 0}) {
      const Dims kv = four ? Dims{z[0], nk, z[2], z[3]} : z;
      cases().push_back({group(), "causal_attention", "causal_attention(q " + str(z) + ", kv " + str(kv) + ")", {{z, kF}, {kv, kF}, {kv, kF}},
                         [](const PT& x) { return PT{P::causal_attention(x[0], x[1], x[2], 0.5, 1)}; }, nullptr,
                         [](const PT& x) {
                           P::ops::causal_attention(x[0], x[1], x[2], {0.5, 1, P::Tensor()});  // the fused op's checks
                           return PT{P::materialized_attention(x[0], x[1], x[2], 0.5, 1)};
                         }});
    }
    // scores [B, H, Nq, Nk]
    add1("attention_softmax", "attention_softmax(" + str(z) + ")", {{z, kF}}, [](const PT& x) { return P::attention_softmax(x[0], 0.5, 1); },
         [](const TT& x) {
           require(x[0].dim() == 4, "attention_softmax: expected [B, H, Nq, Nk]");
           const torch::Tensor hidden = torch::ones({x[0].size(2), x[0].size(3)}, torch::kBool).triu(2);
           return (0.5 * x[0]).masked_fill(hidden, -INFINITY).softmax(-1);
         });
  }
  // AdamW over empty, 0-d and size-1 parameters (in place: the updated parameter is the output).
  for (const Dims& s : kShapes) {
    const P::ops::AdamWStep st{0.1, 0.01, 0.9, 0.999, 1e-8, 1.0 - 0.9, std::sqrt(1.0 - 0.999), P::Tensor()};  // corrections given: no device schedule
    add1("adamw_step_", "adamw_step_(" + str(s) + ")", {In{s, kF, {}, true}, In{s, kF, {}, true}},
         [st](const PT& x) {
           const P::Tensor param = P::ops::clone(x[0]), m = P::zeros(x[0].shape(), kF), v = P::zeros(x[0].shape(), kF);
           P::ops::adamw_step_(param, x[1], m, v, st);
           return param;
         },
         [st](const TT& x) {
           const torch::Tensor m = (1 - st.beta1) * x[1], v = (1 - st.beta2) * x[1].square();
           const torch::Tensor decayed = x[0] * (1 - st.lr * st.weight_decay);
           return decayed - st.lr * (m / st.bias_correction1) / (v.sqrt() / st.bias_correction2_sqrt + st.eps);
         });
  }
}

// ---------------------------------------------------------------- running a case

P::Tensor make_input(const In& in, P::Generator& gen) {
  if (in.dtype == kI) return P::from_blob(in.ints.data(), in.shape, kI);
  if (in.dtype == kB) return P::ops::compare(P::ops::Compare::Gt, P::randn(in.shape, kF, &gen), P::zeros({}, kF));
  return P::randn(in.shape, in.dtype, &gen);
}

bool inexact(DType d) { return P::is_inexact(d); }

// What one side computed: outputs, or the refusal; then the gradients of the
// loss sum(Re(out_i * w_i)), or the backward's refusal.
struct Side {
  std::string refused, backward_refused, foreign;  // foreign: an exception other than phasor::Error
  std::vector<P::Tensor> outs, grads;              // Phasor sides
  std::vector<torch::Tensor> touts, tgrads;        // the LibTorch side
};

Side run_phasor(const std::function<PT(const PT&)>& f, const std::vector<In>& ins, const PT& values, P::Generator weights) {
  Side side;
  PT leaves;
  for (size_t i = 0; i < ins.size(); ++i) {
    P::Tensor x = P::ops::clone(values[i]);
    if (inexact(ins[i].dtype) && !ins[i].constant) x.requires_grad_();
    leaves.push_back(x);
  }
  try {
    side.outs = f(leaves);
  } catch (const P::Error& e) {
    side.refused = e.what();
    return side;
  } catch (const std::exception& e) {
    side.foreign = e.what();
    return side;
  }
  try {
    P::Tensor loss;
    for (const P::Tensor& o : side.outs) {
      if (!inexact(o.dtype())) continue;
      const P::Tensor w = P::randn(o.shape(), o.dtype(), &weights);
      const P::Tensor term = P::sum(o.is_complex() ? P::real(o * w) : o * w);
      loss = loss.defined() ? loss + term : term;
    }
    if (loss.defined() && loss.requires_grad()) loss.backward();
    for (size_t i = 0; i < ins.size(); ++i) side.grads.push_back(leaves[i].requires_grad() ? leaves[i].grad() : P::Tensor());
  } catch (const P::Error& e) {
    side.backward_refused = e.what();
  } catch (const std::exception& e) {
    side.foreign = std::string("in backward: ") + e.what();
  }
  return side;
}

Side run_torch(const Case& c, const PT& values, P::Generator weights) {
  Side side;
  TT leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    torch::Tensor x = to_torch(values[i]);
    if (inexact(c.inputs[i].dtype) && !c.inputs[i].constant) x.requires_grad_(true);
    leaves.push_back(x);
  }
  try {
    side.touts = c.torch(leaves);
  } catch (const c10::Error& e) {
    side.refused = e.what_without_backtrace();
    return side;
  } catch (const std::exception& e) {  // a few LibTorch checks throw std:: exceptions
    side.refused = e.what();
    return side;
  }
  try {
    torch::Tensor loss;
    for (const torch::Tensor& o : side.touts) {
      if (!o.is_floating_point() && !o.is_complex()) continue;
      const torch::Tensor w = to_torch(P::randn(P::Dims(o.sizes().vec()), o.is_complex() ? kC : kF, &weights));
      const torch::Tensor term = (o.is_complex() ? torch::real(o * w) : o * w).sum();
      loss = loss.defined() ? loss + term : term;
    }
    TT wrt;
    std::vector<size_t> at;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].requires_grad()) {
        wrt.push_back(leaves[i]);
        at.push_back(i);
      }
    side.tgrads.assign(leaves.size(), torch::Tensor());
    if (loss.defined() && loss.requires_grad() && !wrt.empty()) {
      const TT g = torch::autograd::grad({loss}, wrt, {}, false, false, /*allow_unused=*/true);
      for (size_t k = 0; k < at.size(); ++k) side.tgrads[at[k]] = g[k];
    }
  } catch (const c10::Error& e) {
    side.backward_refused = e.what_without_backtrace();
  } catch (const std::exception& e) {
    side.backward_refused = e.what();
  }
  return side;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// "" when Phasor agrees with the reference on this case.
std::string run_case(const Case& c, uint64_t seed) {
  P::Generator gen(seed);
  PT values;
  for (const In& in : c.inputs) values.push_back(make_input(in, gen));
  const P::Generator weights(seed ^ 0x77ull);
  const Side got = run_phasor(c.phasor, c.inputs, values, weights);
  if (!got.foreign.empty()) return "threw a non-phasor exception: " + first_line(got.foreign);
  Side want;
  if (c.reference) {
    want = run_phasor(c.reference, c.inputs, values, weights);
    if (!want.foreign.empty()) return "the reference threw " + first_line(want.foreign);
    for (const P::Tensor& o : want.outs) want.touts.push_back(to_torch(o));
    for (const P::Tensor& g : want.grads) want.tgrads.push_back(g.defined() ? to_torch(g) : torch::Tensor());
  } else {
    want = run_torch(c, values, weights);
  }
  if (!want.refused.empty())
    return got.refused.empty() ? "accepted what the reference refuses (" + first_line(want.refused) + ")" : "";
  if (!got.refused.empty()) return "refused what the reference accepts: " + first_line(got.refused);
  if (got.outs.size() != want.touts.size())
    return std::to_string(got.outs.size()) + " outputs vs the reference's " + std::to_string(want.touts.size());
  // The fused ops' gradients of size-1 rows are sums that cancel to ~1e-8: rounding shows at 1e-10.
  const double tol = c.group == "fused" ? 1e-8 : 1e-10;
  for (size_t i = 0; i < got.outs.size(); ++i) {
    const std::string e = compare("output " + std::to_string(i), got.outs[i], want.touts[i].detach(), tol);
    if (!e.empty()) return e;
  }
  if (!want.backward_refused.empty())
    return got.backward_refused.empty() ? "backward accepted what the reference refuses (" + first_line(want.backward_refused) + ")" : "";
  if (!got.backward_refused.empty()) return "backward refused: " + first_line(got.backward_refused);
  for (size_t i = 0; i < got.grads.size(); ++i) {
    const std::string e = compare("grad of input " + std::to_string(i), got.grads[i], want.tgrads[i].defined() ? want.tgrads[i].detach() : torch::Tensor(), tol);
    if (!e.empty()) return e;
  }
  return "";
}

// Every op of tensor/ops.h, autograd/functions.h, tensor/fused.h and
// autograd/fused.h, in their order (the raw and the differentiable version of
// an op share a name: the sweep runs the differentiable one, whose forward is
// the raw kernel). Left out, with the reason:
//   copy_, fill_, binary_, axpy_: in-place writes into a given tensor (their own tests);
//   register_device_copy, name(Unary/Binary), scalar_like: not ops on tensors;
//   the *_backward of the fused ops: run by the backward of their forward;
//   the composed references (rms_norm_reference ... materialized_attention):
//   the reference side of cmha_rotate and causal_attention.
// "scalar_arith" is the tensor-scalar operators (+, -, *, / with a c128 or double).
const char* const kAllOps[] = {
    // views
    "reshape", "view", "permute", "transpose", "narrow", "select", "expand", "squeeze", "unsqueeze", "flatten", "view_as_real",
    "view_as_complex", "real", "imag", "contiguous", "clone", "to", "to_device",
    // elementwise
    "add", "sub", "mul", "div", "pow", "pow_scalar", "maximum", "minimum", "atan2", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
    "tanh", "sigmoid", "silu", "gelu", "gelu_derivative", "abs", "square", "reciprocal", "conj", "angle", "euler_phase", "polar",
    "complex", "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "scalar_arith",
    // reductions
    "sum", "mean", "max", "min", "argmax", "amax", "logsumexp", "norm", "softmax", "log_softmax", "sum_to", "all_finite",
    // linear algebra
    "matmul", "matmul_real_part_conj",
    // indexing
    "index_select", "embedding", "index_add", "gather", "scatter_add", "cat", "stack", "split", "chunk", "causal_mask",
    // fused
    "rms_norm", "swiglu", "cross_entropy", "rotary_table", "rotate", "cmha_rotate", "attention_softmax", "causal_attention",
    "adamw_step_"};

const std::vector<Case>& all_cases() {
  if (cases().empty()) {
    const std::pair<const char*, void (*)()> groups[] = {{"views", views},       {"elementwise", elementwise}, {"reductions", reductions},
                                                         {"linalg", linalg},     {"indexing", indexing},       {"fused", fused}};
    for (const auto& [name, add_cases] : groups) {
      group() = name;
      add_cases();
    }
  }
  return cases();
}

// Runs the cases of one group; one CHECK per failing case.
void sweep(const std::string& name) {
  int ran = 0;
  for (size_t i = 0; i < all_cases().size(); ++i) {
    const Case& c = all_cases()[i];
    if (c.group != name) continue;
    ++ran;
    const std::string e = run_case(c, 0xed6e'0000ull + i);
    CHECK_MESSAGE(e.empty(), c.what, ": ", e);
  }
  MESSAGE("ran ", ran, " ", name, " cases");
  CHECK(ran > 0);
}

}  // namespace

TEST_CASE("the sweep covers every op") {
  std::set<std::string> swept;
  for (const Case& c : all_cases()) swept.insert(c.op);
  for (const char* op : kAllOps) CHECK_MESSAGE(swept.count(op) == 1, op, " is never swept");
  for (const std::string& op : swept) {
    bool listed = false;
    for (const char* o : kAllOps) listed |= op == o;
    CHECK_MESSAGE(listed, op, " is swept but missing from kAllOps");
  }
}

TEST_CASE("views on 0-d, empty and size-1 tensors match LibTorch") { sweep("views"); }
TEST_CASE("elementwise ops on 0-d, empty and size-1 tensors match LibTorch") { sweep("elementwise"); }
TEST_CASE("reductions on 0-d, empty and size-1 tensors match LibTorch") { sweep("reductions"); }
TEST_CASE("matmul with zero-sized M, N, K and batch matches LibTorch") { sweep("linalg"); }
TEST_CASE("indexing, cat and split on 0-d, empty and size-1 tensors match LibTorch") { sweep("indexing"); }
TEST_CASE("fused ops on empty and size-1 inputs match their references") { sweep("fused"); }
