// Complex gradients in Phasor, in four small steps (see docs/complex-gradients.md).
//
// Every step prints its result and checks it against the value the maths
// gives; the program exits 1 if any differs. ctest builds and runs it
// (example_complex_grad). To build and run it alone, from the repository root:
//   cmake -B build && cmake --build build --target example_complex_grad
//   build/examples/complex_grad
#include <cmath>
#include <complex>
#include <cstdio>

#include "expect.h"
#include "phasor.h"

using namespace phasor;
using example::expect;
using example::first;
using example::mismatches;

int main() {
  // 1. L = |z|^2 = x^2 + y^2 at z = 3 + 4i: dL/dx + i dL/dy = 2x + 2iy = 6 + 8i.
  //    (JAX's grad would return the conjugate, 6 - 8i.)
  Tensor z = from_vector<c128>({{3.0, 4.0}});
  z.requires_grad_();
  sum(square(abs(z))).backward();
  expect("grad of |z|^2 at 3+4i:", first(z.grad()), c128(6.0, 8.0), 1e-12);

  // 2. L = Re(z c) with c = e^{1.5i}: L = a x - b y, so the gradient is a - ib = conj(c).
  //    Check it against central differences on x and y separately.
  z.zero_grad();
  const c128 c = std::polar(1.0, 1.5);
  auto loss = [&](c128 at) { return (at * c).real(); };
  sum(real(z * c)).backward();
  const double h = 1e-6;
  const c128 z0(3.0, 4.0);
  const c128 numeric((loss(z0 + h) - loss(z0 - h)) / (2 * h),
                     (loss(z0 + c128(0, h)) - loss(z0 - c128(0, h))) / (2 * h));
  expect("grad of Re(z e^{1.5i}):", first(z.grad()), std::conj(c), 1e-12);
  expect("finite differences (dL/dx, dL/dy):", numeric, std::conj(c), 1e-8);

  // 3. A holomorphic map y = z^2 seeded with G_y = 1 gives G_z = conj(f'(z)) = 2 conj(z).
  z.zero_grad();
  (z * z).backward(ones({1}, DType::Complex128));
  expect("backward of z^2 with seed 1:", first(z.grad()), 2.0 * std::conj(z0), 1e-12);

  // 4. Plain gradient descent fits a complex weight: y = w x with w_true = 0.5 - 2i.
  Generator gen(7);
  const Tensor x = randn({64}, DType::Complex128, &gen);
  const Tensor y = x * c128(0.5, -2.0);
  Tensor w = zeros({1}, DType::Complex128);
  w.requires_grad_();
  for (int step = 0; step < 200; ++step) {
    w.zero_grad();
    Tensor l = mean(square(abs(w * x - y)));
    l.backward();
    NoGradGuard no_grad;
    ops::axpy_(w, w.grad(), -0.2);  // w <- w - lr * w.grad: no conjugate needed
  }
  expect("fitted w (true 0.5 - 2i):", first(w), c128(0.5, -2.0), 1e-6);
  return mismatches == 0 ? 0 : 1;
}
