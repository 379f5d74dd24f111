#pragma once
// Zero-copy exchange between phasor::Tensor and NumPy (or anything with the
// buffer protocol), for float32, float64, complex64, complex128, int64 and bool.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "tensor/tensor.h"

namespace phasor::python {

// A view of a CPU tensor's memory for the buffer protocol (np.asarray(t),
// memoryview(t)): strides in bytes; read-only when the tensor requires grad
// (a write through it would bypass autograd's version check), else writable.
// The memoryview or array holds the Python Tensor object, which holds the storage.
pybind11::buffer_info tensor_buffer(const Tensor& t);

// The same as a NumPy array whose base is `owner` (the Python Tensor), with
// the same rule: read-only when the tensor requires grad.
pybind11::array tensor_to_numpy(const Tensor& t, pybind11::handle owner);

// Makes the buffer protocol (memoryview(t), np.asarray(t)) refuse what
// tensor_buffer refuses with a BufferError, not an abort.
void install_buffer_refusals(pybind11::handle tensor_type);

// A tensor over the buffer's memory, without a copy. The tensor holds the
// buffer view itself (a Py_buffer of `b`, released when its storage goes), so
// the exporter can neither free nor resize the memory meanwhile (array.array,
// bytearray: BufferError). Tensors over one exporter's memory (one NumPy
// array, or a NumPy view of a Phasor tensor) share one version counter, so
// autograd sees a write made through any of them. Refused (phasor::Error) for
// a read-only buffer, a dtype other than the six, or strides that are negative
// or not a multiple of the item size: phasor.tensor() copies those.
Tensor tensor_from_buffer(const pybind11::buffer& b);

// bfloat16, which NumPy lacks, as its bits: a uint16 array over a bfloat16
// tensor's memory, and a bfloat16 tensor over a uint16 array's.
pybind11::array tensor_bits(const Tensor& t, pybind11::handle owner);
Tensor tensor_from_bits(const pybind11::buffer& b);

// A copy of any array-like NumPy can read (nested lists too), in its own
// memory: integers become int64 (OverflowError past its range), float16
// float32, and any byte order the machine's.
Tensor tensor_copy(const pybind11::object& data);

}  // namespace phasor::python
