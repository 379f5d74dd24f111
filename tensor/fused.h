#pragma once
// Fused transformer ops: one pass over memory where the composed ops would
// take several. Each forward has its backward beside it. These are the raw
// front-ends (tensor/fused.cpp; kernels in tensor/cpu/fused.cpp and
// cuda/fused.cu), declared from the list PHASOR_FUSED_FRONT_ENDS of
// tensor/fused_ops.h, which states each op's maths beside its argument and
// result structs; the differentiable ones are in autograd/fused.h.
#include <vector>

#include "tensor/fused_ops.h"

namespace phasor::ops {

#define PHASOR_DECLARE_FRONT_END(Result, name, parameters) Result name parameters;
PHASOR_FUSED_FRONT_ENDS(PHASOR_DECLARE_FRONT_END)
#undef PHASOR_DECLARE_FRONT_END

// ---- rotary position tables ----
// table[m, j] = exp(i (offset + m) w_j) * zeta_j^(sign (offset + m - origin) / S)
// with w_j = base^(-2j/d) (d = 2 P); zeta = 1 (plain RoPE) when xpos_scale_base
// is 0. The XPos scales of a query and a key multiply to a function of their
// distance alone, so any common origin gives the same scores; a far one keeps
// the scales in range (models/config.h, xpos_origin). Phases are computed in
// float64 and stored in `dtype` (complex64 or complex128).
Tensor rotary_table(int64_t n, int64_t pairs, int64_t offset, double base, double xpos_scale_base, int xpos_sign, DType dtype,
                    int64_t xpos_origin = 0);
// The same table with the frequencies w_j given (P = frequencies.size()):
// context extension and the angle warm-up (models/rotary_scaling.h).
Tensor rotary_table(int64_t n, const std::vector<double>& frequencies, int64_t offset, double xpos_scale_base, int xpos_sign, DType dtype,
                    int64_t xpos_origin = 0);

}  // namespace phasor::ops
