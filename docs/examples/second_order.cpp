// Second-order derivatives through a complex number (see
// docs/complex-gradients.md, section 9): the gradient with create_graph, the
// Hessian-vector product by differentiating it again, the same through hvp(),
// a Jacobian-vector product by jvp(), and Newton's method on a complex leaf.
//
// Every step prints its result and checks it against the value the maths
// gives; the program exits 1 if any differs. ctest builds and runs it
// (example_second_order). To build and run it alone, from the repository root:
//   cmake -B build && cmake --build build --target example_second_order
//   build/examples/second_order
#include <cmath>
#include <complex>
#include <cstdio>

#include "expect.h"
#include "phasor.h"

using namespace phasor;
using example::expect;
using example::first;
using example::mismatches;

namespace {
Tensor loss_of(const Tensor& z) { return sum(square(real(z * conj(z)))); }  // L = |z|^4 = (x^2 + y^2)^2
}  // namespace

int main() {
  // 1. The gradient of L = |z|^4 at z = 1 + 2i, with a graph of its own: 4 |z|^2 z = 20 + 40i.
  Tensor z = from_vector<c128>({{1.0, 2.0}});
  z.requires_grad_();
  const Tensor g = grad({loss_of(z)}, {z}, {}, /*create_graph=*/true)[0];
  expect("gradient 4|z|^2 z at 1+2i:", first(g), c128(20.0, 40.0), 1e-12);

  // 2. H v with v = 1 (the direction dx): differentiate <g, v> = Re(conj(g) v) again.
  //    H = [[12x^2 + 4y^2, 8xy], [8xy, 4x^2 + 12y^2]] = [[28, 16], [16, 52]], so H (1, 0) = 28 + 16i;
  //    in Wirtinger form, 2 (d2L/dz dz* v + d2L/dz*^2 conj(v)) = 8|z|^2 v + 4 z^2 conj(v).
  const Tensor v = from_vector<c128>({{1.0, 0.0}});
  expect("H v along dx (differentiating g):", first(grad({real_dot(g, v)}, {z})[0]), c128(28.0, 16.0), 1e-12);

  // 3. The same through hvp(), and along dy = i: H (0, 1) = 16 + 52i.
  expect("H v along dx (hvp):", first(hvp(loss_of(z), {z}, {v})[0]), c128(28.0, 16.0), 1e-12);
  expect("H v along dy (hvp):", first(hvp(loss_of(z), {z}, {from_vector<c128>({{0.0, 1.0}})})[0]), c128(16.0, 52.0), 1e-12);

  // 4. jvp of f(z) = z^2 along t = 1 + i: f'(z) t = 2z t = 2(1 + 2i)(1 + i) = -2 + 6i.
  const JvpResult j = jvp([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {z}, {from_vector<c128>({{1.0, 1.0}})});
  expect("jvp of z^2 along 1+i:", first(j.tangent), c128(-2.0, 6.0), 1e-12);

  // 5. Newton's method on L(w) = |w - c|^4 + |w - c|^2 (minimum at c = 0.5 - 2i): w <- w - H^{-1} g,
  //    H solved as the real 2 x 2 it is, from two Hessian-vector products per step.
  const c128 target(0.5, -2.0);
  Tensor w = from_vector<c128>({{2.0, 1.0}});
  for (int step = 0; step < 30; ++step) {
    w.requires_grad_();
    const Tensor d = w - from_vector<c128>({target});
    const Tensor loss = loss_of(d) + sum(real(d * conj(d)));
    HessianVectorProduct h(loss, {w});
    const c128 gw = first(h.gradient()[0].detach());
    const c128 hx = first(h({from_vector<c128>({{1.0, 0.0}})})[0]), hy = first(h({from_vector<c128>({{0.0, 1.0}})})[0]);
    // [[hx.re, hy.re], [hx.im, hy.im]] (dx, dy) = -(g.re, g.im)
    const double det = hx.real() * hy.imag() - hy.real() * hx.imag();
    const double dx = (-gw.real() * hy.imag() + gw.imag() * hy.real()) / det;
    const double dy = (-gw.imag() * hx.real() + gw.real() * hx.imag()) / det;
    w = from_vector<c128>({first(w.detach()) + c128(dx, dy)});
  }
  expect("Newton's method, minimum of |w-c|^4+|w-c|^2:", first(w), target, 1e-9);
  return mismatches == 0 ? 0 : 1;
}
