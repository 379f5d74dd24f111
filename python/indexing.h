#pragma once
// t[index] and t[index] = value as NumPy has them: ints (negative from the
// end), slices with any step, `...`, None, and integer or boolean arrays (a
// Phasor tensor, a NumPy array or a list) among them, broadcast together.
#include <pybind11/pybind11.h>

#include "tensor/tensor.h"

namespace phasor::python {

// Basic indices give views (differentiable: the gradient flows back into the
// indexed tensor), except a negative step, which copies (Phasor's strides are
// non-negative). An integer or boolean array gathers a copy, as in NumPy.
// Bad indices raise IndexError or TypeError with one line.
Tensor get_item(const Tensor& t, const pybind11::handle& index);

// Writes `value` (a tensor, an array-like or a number, broadcast to the
// indexed shape) into the indexed elements of t's memory.
void set_item(const Tensor& t, const pybind11::handle& index, const pybind11::handle& value);

}  // namespace phasor::python
