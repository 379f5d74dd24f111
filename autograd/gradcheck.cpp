#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>
#include <type_traits>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/random.h"

namespace phasor {

namespace {
// The real scalars of a tensor, as a flat view (complex -> interleaved pairs).
Tensor real_scalars(const Tensor& t) { return t.is_complex() ? ops::view_as_real(t) : t; }

std::vector<double> flat_values(const Tensor& t) { return real_scalars(t).to_vector<double>(); }

bool double_precision(DType t) { return t == DType::Float64 || t == DType::Complex128; }

// Finite differences need double precision (PyTorch's gradcheck warns for
// anything else); a float32 output would also hold its seed as floats.
void check_double(const char* op, const char* what, const Tensor& t) {
  PHASOR_CHECK(!t.defined() || !is_inexact(t.dtype()) || double_precision(t.dtype()), op, ": ", what,
               " must be float64 or complex128 (finite differences need double precision), got ", t.dtype());
}

// Reads or writes real scalar `k` of contiguous tensor t, in t's own dtype.
template <class Access>
void at_scalar(const Tensor& t, int64_t k, Access&& access) {
  const Tensor r = real_scalars(t);
  dispatch(r.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T>) access(static_cast<T*>(r.raw_data())[k]);
    else fail("gradcheck: no real scalars in a ", r.dtype(), " tensor");
  });
}
void poke(const Tensor& t, int64_t k, double value) {
  at_scalar(t, k, [&](auto& slot) { slot = static_cast<std::remove_reference_t<decltype(slot)>>(value); });
}
double peek(const Tensor& t, int64_t k) {
  double value = 0;
  at_scalar(t, k, [&](auto& slot) { value = static_cast<double>(slot); });
  return value;
}

// Puts a perturbed scalar back when its scope ends, however it ends (the
// checked function may throw): the caller's input is left as it was found.
class Perturbation {
 public:
  Perturbation(const Tensor& t, int64_t k) : t_(t), k_(k), original_(peek(t, k)) {}
  ~Perturbation() { poke(t_, k_, original_); }
  Perturbation(const Perturbation&) = delete;
  Perturbation& operator=(const Perturbation&) = delete;
  void set(double value) const { poke(t_, k_, value); }
  double original() const { return original_; }

 private:
  Tensor t_;
  int64_t k_;
  double original_;
};

// Puts every input's .grad back when the check ends, by return or by exception.
class GradRestorer {
 public:
  explicit GradRestorer(const std::vector<Tensor>& inputs) : inputs_(inputs) {
    for (const Tensor& t : inputs_) grads_.push_back(t.defined() ? t.grad() : Tensor());
  }
  ~GradRestorer() {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].defined()) inputs_[i].set_grad(grads_[i]);
  }
  GradRestorer(const GradRestorer&) = delete;
  GradRestorer& operator=(const GradRestorer&) = delete;

 private:
  std::vector<Tensor> inputs_, grads_;
};
}  // namespace

GradcheckResult gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  for (const Tensor& t : inputs) check_double("gradcheck", "inputs", t);
  GradcheckResult result;
  std::ostringstream worst;
  // The backward passes below write .grad of every input; the caller's
  // gradients are put back at the end.
  const GradRestorer restore_grads(inputs);

  // Numeric Jacobian columns: one per perturbed real scalar.
  const Tensor out0 = [&] {
    NoGradGuard no_grad;
    return f(inputs);
  }();
  check_double("gradcheck", "the function's output", out0);
  const int64_t n_out = real_scalars(out0).numel();

  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    PHASOR_CHECK(x.is_contiguous(), "gradcheck: input ", i, " must be contiguous");
    PHASOR_CHECK(x.device().is_cpu(), "gradcheck: input ", i, " must be on the CPU (its scalars are perturbed in place)");
    const int64_t n_in = real_scalars(x).numel();
    // Numeric: d out_j / d x_k by central differences.
    std::vector<std::vector<double>> numeric(static_cast<size_t>(n_in));
    {
      NoGradGuard no_grad;
      for (int64_t k = 0; k < n_in; ++k) {
        const Perturbation scalar(x, k);
        scalar.set(scalar.original() + opt.eps);
        const std::vector<double> plus = flat_values(f(inputs));
        scalar.set(scalar.original() - opt.eps);
        const std::vector<double> minus = flat_values(f(inputs));
        numeric[k].resize(plus.size());
        for (size_t j = 0; j < plus.size(); ++j) numeric[k][j] = (plus[j] - minus[j]) / (2 * opt.eps);
      }
    }
    // Analytic: one backward per real output scalar j, seeded with e_j (or i e_j
    // for an imaginary part: L = Im y_j has G_y = i there).
    for (int64_t j = 0; j < n_out; ++j) {
      for (const Tensor& t : inputs)
        if (t.defined()) t.zero_grad();
      const Tensor out = f(inputs);
      PHASOR_CHECK(out.requires_grad(), "gradcheck: the function output does not depend on inputs that require grad");
      Tensor seed = zeros(out.shape(), out.dtype());
      poke(seed, j, 1.0);
      out.backward(seed);
      const Tensor g = x.grad();
      const std::vector<double> analytic = g.defined() ? flat_values(g) : std::vector<double>(static_cast<size_t>(n_in), 0.0);
      for (int64_t k = 0; k < n_in; ++k) {
        const double num = numeric[k][j], ana = analytic[k];
        const double excess = std::abs(ana - num) - (opt.atol + opt.rtol * std::abs(num));
        const bool nan = std::isnan(ana) || std::isnan(num);
        if (excess > result.worst_error || nan) {
          result.worst_error = nan ? INFINITY : excess;
          result.ok = false;
          worst.str("");
          worst << "gradcheck: input " << i << " scalar " << k << " (" << (x.is_complex() ? (k % 2 ? "imag" : "real") : "real")
                << " part), output scalar " << j << ": analytic " << ana << " vs numeric " << num;
        }
      }
    }
  }
  result.message = worst.str();
  return result;
}

GradcheckResult gradgradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  for (const Tensor& t : inputs) check_double("gradgradcheck", "inputs", t);
  const Tensor out0 = [&] {
    NoGradGuard no_grad;
    return f(inputs);
  }();
  check_double("gradgradcheck", "the function's output", out0);
  std::vector<size_t> wanted;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) wanted.push_back(i);
  PHASOR_CHECK(!wanted.empty(), "gradgradcheck: no input requires grad");
  Generator gen(0x5eed);
  Tensor u = randn(out0.shape(), out0.dtype(), &gen);
  u.requires_grad_();
  // The gradients as one real vector (complex ones as their pairs); an input
  // the output does not reach contributes nothing.
  const TensorFunction first_order = [&](const std::vector<Tensor>& in) {
    AutoGradMode enable(true);  // gradcheck evaluates under NoGradGuard; this map needs a backward
    std::vector<Tensor> x(in.begin(), in.end() - 1), xs;
    for (size_t i : wanted) xs.push_back(x[i]);
    const Tensor y = f(x);
    std::vector<Tensor> parts;
    if (y.requires_grad())
      for (const Tensor& g : grad({y}, xs, {in.back()}, /*create_graph=*/true, true, /*allow_unused=*/true))
        if (g.defined()) parts.push_back(reshape(g.is_complex() ? view_as_real(g) : g, {-1}));
    Tensor out = parts.empty() ? zeros({0}, DType::Float64) : cat(parts, 0);
    // A gradient that is constant (angle of a real) still has to be a function of u for gradcheck: add 0 u.
    if (!out.requires_grad()) out = out + real_dot(in.back(), in.back()) * 0.0;
    return out;
  };
  std::vector<Tensor> all = inputs;
  all.push_back(u);
  return gradcheck(first_order, all, opt);
}

}  // namespace phasor
