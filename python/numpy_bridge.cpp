#include "python/numpy_bridge.h"

#include <string>

namespace py = pybind11;

namespace phasor::python {

namespace {

std::string buffer_format(DType dtype) {
  switch (dtype) {
    case DType::Bool: return py::format_descriptor<bool>::format();
    case DType::Int64: return py::format_descriptor<int64_t>::format();
    case DType::Float32: return py::format_descriptor<float>::format();
    case DType::Float64: return py::format_descriptor<double>::format();
    case DType::Complex64: return py::format_descriptor<c64>::format();
    case DType::Complex128: return py::format_descriptor<c128>::format();
  }
  fail("unknown dtype");
}

// The struct-module format of a buffer ("<f", "Zd", "l", ...) as a dtype.
DType dtype_of_format(std::string format, py::ssize_t itemsize) {
  if (!format.empty() && (format[0] == '<' || format[0] == '=' || format[0] == '@')) format.erase(0, 1);
  if (format == "f" && itemsize == 4) return DType::Float32;
  if (format == "d" && itemsize == 8) return DType::Float64;
  if (format == "Zf" && itemsize == 8) return DType::Complex64;
  if (format == "Zd" && itemsize == 16) return DType::Complex128;
  if ((format == "l" || format == "q") && itemsize == 8) return DType::Int64;
  if (format == "?" && itemsize == 1) return DType::Bool;
  fail("phasor.Tensor: arrays of format '", format, "' (item size ", itemsize,
       ") are not supported: use float32, float64, complex64, complex128, int64 or bool");
}

}  // namespace

py::buffer_info tensor_buffer(const Tensor& t) {
  PHASOR_CHECK(t.device().is_cpu(), "a tensor on ", t.device(), " has no NumPy view: copy it to the CPU first (to('cpu'))");
  const auto item = static_cast<py::ssize_t>(itemsize(t.dtype()));
  std::vector<py::ssize_t> shape, strides;
  for (int d = 0; d < t.dim(); ++d) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d) * item);
  }
  return py::buffer_info(t.raw_data(), item, buffer_format(t.dtype()), t.dim(), shape, strides, /*readonly=*/false);
}

py::array tensor_to_numpy(const Tensor& t, py::handle owner) {
  const py::buffer_info info = tensor_buffer(t);
  return py::array(py::dtype(info), info.shape, info.strides, info.ptr, owner);
}

Tensor tensor_from_buffer(const py::buffer& b) {
  py::buffer_info info;
  try {
    info = b.request(/*writable=*/true);
  } catch (const py::error_already_set&) {
    fail("phasor.Tensor: the array is read-only, and a tensor would write to its memory: use phasor.tensor() for a copy");
  }
  const DType dtype = dtype_of_format(info.format, info.itemsize);
  Dims shape, strides;
  for (py::ssize_t d = 0; d < info.ndim; ++d) {
    PHASOR_CHECK(info.strides[d] >= 0 && info.strides[d] % info.itemsize == 0, "phasor.Tensor: stride ", info.strides[d],
                 " bytes of dimension ", d, " is negative or not a multiple of the item size ", info.itemsize,
                 ": use phasor.tensor() for a copy");
    shape.push_back(info.shape[d]);
    strides.push_back(info.strides[d] / info.itemsize);
  }
  // The owner holds a reference to the exporting object; it may be released
  // from a thread without the GIL (a tensor freed inside a C++ call): take it.
  auto owner = std::shared_ptr<void>(b.inc_ref().ptr(), [](void* o) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(o));
  });
  return from_external(info.ptr, shape, strides, dtype, std::move(owner));
}

Tensor tensor_copy(const py::object& data) {
  py::array a = py::module_::import("numpy").attr("array")(data, py::arg("copy") = true);
  if (a.dtype().kind() == 'i' || a.dtype().kind() == 'u') a = a.attr("astype")("int64");
  return tensor_from_buffer(a);  // a fresh array only this tensor holds
}

}  // namespace phasor::python
