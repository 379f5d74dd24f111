#pragma once
// Zero-copy exchange between phasor::Tensor and NumPy (or anything with the
// buffer protocol), for float32, float64, complex64, complex128, int64 and bool.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "tensor/tensor.h"

namespace phasor::python {

// A view of a CPU tensor's memory for the buffer protocol (np.asarray(t),
// memoryview(t)): strides in bytes, writable. The memoryview or array holds
// the Python Tensor object, which holds the storage.
pybind11::buffer_info tensor_buffer(const Tensor& t);

// The same as a NumPy array whose base is `owner` (the Python Tensor).
pybind11::array tensor_to_numpy(const Tensor& t, pybind11::handle owner);

// A tensor over the buffer's memory, without a copy: the tensor keeps the
// buffer's exporter (the array) alive, and writes on either side are seen on
// the other. Refused (phasor::Error) for a read-only buffer, a dtype other than
// the six, or strides that are negative or not a multiple of the item size:
// phasor.tensor() copies those.
Tensor tensor_from_buffer(const pybind11::buffer& b);

// A copy of any array-like NumPy can read (nested lists too), in its own memory.
Tensor tensor_copy(const pybind11::object& data);

}  // namespace phasor::python
