#pragma once
// Finite-difference checking of gradients, for users' own functions too.
//
// Inputs and the function's output must be float64 or complex128 (finite
// differences need double precision; anything else is refused with a message
// naming the dtype). An exception from the function leaves the inputs and
// their .grad as they were. Every real scalar of every input that
// requires grad is perturbed (real and imaginary parts separately); every real
// scalar of the output (real and imaginary parts of complex outputs) is
// differentiated with backward. The full Jacobians are compared.
#include <functional>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "tensor/tensor.h"

namespace phasor {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
};

struct GradcheckResult {
  bool ok = true;
  double worst_error = 0.0;  // |analytic - numeric| - (atol + rtol |numeric|), worst entry
  std::string message;       // names the worst entry when !ok
};

GradcheckResult gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// The second-order check (PyTorch's gradgradcheck): gradcheck of the map
// (inputs, u) -> the gradients of Re<u, f(inputs)> with respect to the inputs
// that require grad, computed with create_graph, u a fixed random seed of
// f's output shape (a leaf too: the map is linear in it). The finite
// differences perturb real and imaginary parts separately, so every entry of
// the Hessian of each real output scalar is compared, as pairs of reals.
GradcheckResult gradgradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace phasor
