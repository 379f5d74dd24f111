#pragma once
// The op enums, a leaf header: the front-ends (tensor/ops.h), the kernel
// interface (tensor/backend.h) and the scalar maths shared with nvcc
// (tensor/scalar_math.h) name the ops through it, so none of them includes
// another's declarations. Includes nothing.

namespace phasor {
// op(A) for the last two dims of a matmul operand: as stored, transposed, or
// conjugate-transposed (passed to BLAS as a flag, never materialised).
enum class MatOp { None, Transpose, ConjTranspose };
}  // namespace phasor

namespace phasor::ops {
enum class Unary {
  Neg, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Silu, Gelu, Abs, Reciprocal, Conj, Angle, Sign, Square,
  GeluDerivative,  // d gelu(x) / dx, for gelu's backward
  Softplus,        // log(1 + exp(x)), real only (pope, carope)
  Count            // how many there are: the name table's size is checked against it
};
enum class Binary { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Atan2, Count /* how many there are */ };
enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };
const char* name(Unary op);  // for messages: "exp", "atan2", ... (tensor/elementwise.cpp)
const char* name(Binary op);
}  // namespace phasor::ops
