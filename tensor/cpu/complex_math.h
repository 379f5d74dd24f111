#pragma once
// Vectorised complex64 kernels for the elementwise ops whose scalar
// std::complex forms are slow (abs: hypot; angle: atan2; exp: cexpf; division:
// C99 Annex G's __divsc3), run on unit-stride runs of the strided loop. Each
// run whose values the fast maths would not treat as libm does (infinities,
// NaN, a division by zero, phases past the sincos's exact range) takes the
// scalar path instead, so the results are libm's to within a few float ulps.
#include "tensor/op_types.h"
#include "tensor/tensor.h"

namespace phasor::cpu {

// out = op(x) for complex64 x when op has a fast path here (Abs, Angle, Exp):
// true when done, false to leave it to the scalar maths.
bool complex64_unary(ops::Unary op, const Tensor& out, const Tensor& x);
// out = a / b for complex64 operands: true when done (Div), false otherwise.
bool complex64_binary(ops::Binary op, const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace phasor::cpu
