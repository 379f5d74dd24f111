#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/random.h"

namespace phasor {

namespace {
// The real scalars of a tensor, as a flat view (complex -> interleaved pairs).
Tensor real_scalars(const Tensor& t) { return t.is_complex() ? ops::view_as_real(t) : t; }

std::vector<double> flat_values(const Tensor& t) { return real_scalars(t).to_vector<double>(); }

// Writes `value` into real scalar `k` of contiguous tensor t.
void poke(const Tensor& t, int64_t k, double value) { static_cast<double*>(real_scalars(t).raw_data())[k] = value; }
}  // namespace

GradcheckResult gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs_in, const GradcheckOptions& opt) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : inputs_in) {
    PHASOR_CHECK(!t.defined() || !is_inexact(t.dtype()) || t.dtype() == DType::Float64 || t.dtype() == DType::Complex128,
                 "gradcheck: inputs must be float64 or complex128, got ", t.dtype());
    inputs.push_back(t);
  }
  GradcheckResult result;
  std::ostringstream worst;
  // The backward passes below write .grad of every input; the caller's
  // gradients are put back at the end.
  std::vector<Tensor> saved_grads;
  for (const Tensor& t : inputs) saved_grads.push_back(t.defined() ? t.grad() : Tensor());

  // Numeric Jacobian columns: one per perturbed real scalar.
  const Tensor out0 = [&] {
    NoGradGuard no_grad;
    return f(inputs);
  }();
  const int64_t n_out = real_scalars(out0).numel();

  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    PHASOR_CHECK(x.is_contiguous(), "gradcheck: input ", i, " must be contiguous");
    const int64_t n_in = real_scalars(x).numel();
    // Numeric: d out_j / d x_k by central differences.
    std::vector<std::vector<double>> numeric(static_cast<size_t>(n_in));
    {
      NoGradGuard no_grad;
      for (int64_t k = 0; k < n_in; ++k) {
        const double v = flat_values(x)[k];
        poke(x, k, v + opt.eps);
        const std::vector<double> plus = flat_values(f(inputs));
        poke(x, k, v - opt.eps);
        const std::vector<double> minus = flat_values(f(inputs));
        poke(x, k, v);
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
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) inputs[i].set_grad(saved_grads[i]);
  result.message = worst.str();
  return result;
}

GradcheckResult gradgradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  const Tensor out0 = [&] {
    NoGradGuard no_grad;
    return f(inputs);
  }();
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
