#include "python/numpy_bridge.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tensor/storage.h"

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
    case DType::BFloat16:
      fail("a bfloat16 tensor has no NumPy view (NumPy has no bfloat16): use t.bits() for a uint16 array sharing "
           "its memory (phasor.from_bits() goes back), or t.to(phasor.float32) for a converted copy");
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
       ") are not supported: use float32, float64, complex64, complex128, int64 or bool in the machine's byte order, "
       "or phasor.tensor() for a converted copy");
}

// The alignment the kernels read an element with (a complex one: that of its parts).
size_t alignment(DType dtype) { return is_complex(dtype) ? itemsize(dtype) / 2 : itemsize(dtype); }

// The Py_buffer as the owner of a storage: released, with the GIL, when the
// storage goes (perhaps from a thread that does not hold the GIL). Until then
// the exporter keeps the memory where it is.
std::shared_ptr<void> pin(std::unique_ptr<Py_buffer> view) {
  return std::shared_ptr<void>(view.release(), [](void* p) {
    auto* v = static_cast<Py_buffer*>(p);
    if (Py_IsInitialized()) {  // after the interpreter is gone, so is the exporter
      const PyGILState_STATE gil = PyGILState_Ensure();
      PyBuffer_Release(v);
      PyGILState_Release(gil);
    }
    delete v;
  });
}

// The object that owns an exporter's memory: down NumPy arrays' bases and
// memoryviews' objects (np.asarray(a)[1:] and a itself, or memoryview(t) and t).
py::object memory_root(py::object o) {
  const py::dict modules = py::module_::import("sys").attr("modules");
  const py::object ndarray = modules.contains("numpy") ? modules["numpy"].attr("ndarray") : py::object();
  for (;;) {
    py::object next;
    if (PyMemoryView_Check(o.ptr())) {
      if (PyObject* obj = PyMemoryView_GET_BUFFER(o.ptr())->obj) next = py::reinterpret_borrow<py::object>(obj);
    } else if (ndarray && py::isinstance(o, ndarray)) {
      next = o.attr("base");
    }
    if (!next || next.is_none()) return o;
    o = std::move(next);
  }
}

// One version counter per root object that is not a Phasor tensor, shared by
// every storage over its memory. An entry lives as long as some storage holds
// its counter, and so a buffer of the root (which keeps the root alive): its
// address cannot be reused meanwhile. Heap-allocated: storages may outlive
// static destruction.
struct Counters {
  std::mutex mutex;
  std::unordered_map<PyObject*, std::weak_ptr<uint64_t>> by_root;
};
Counters& counters() {
  static auto* c = new Counters;
  return *c;
}

std::shared_ptr<uint64_t> version_counter_of(const py::object& root) {
  if (py::isinstance<Tensor>(root)) {  // a view of a Phasor tensor: its storage's own counter
    const Tensor& t = root.cast<const Tensor&>();
    if (t.defined()) return Storage::version_counter(t.storage());
  }
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::weak_ptr<uint64_t>& slot = c.by_root[root.ptr()];
  if (auto counter = slot.lock()) return counter;
  PyObject* key = root.ptr();
  std::shared_ptr<uint64_t> counter(new uint64_t(0), [key](uint64_t* p) {
    delete p;
    Counters& c = counters();
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.by_root.find(key);
    if (it != c.by_root.end() && it->second.expired()) c.by_root.erase(it);
  });
  slot = counter;
  return counter;
}

[[noreturn]] void overflow(const std::string& message) {
  PyErr_SetString(PyExc_OverflowError, message.c_str());
  throw py::error_already_set();
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
  return py::buffer_info(t.raw_data(), item, buffer_format(t.dtype()), t.dim(), shape, strides,
                         /*readonly=*/t.requires_grad());
}

namespace {
// The Tensor type's buffer slot: pybind11's, after the refusals of
// tensor_buffer (a bfloat16 tensor, one on a GPU) turned into a BufferError.
// Thrown inside pybind11's own slot, a C function, they would abort the
// process; NumPy clears the error and falls back to __array__, whose
// phasor.Error carries the same message.
extern "C" int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  try {
    (void)tensor_buffer(py::handle(obj).cast<const Tensor&>());
  } catch (const std::exception& e) {
    if (view) view->obj = nullptr;
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
  return py::detail::pybind11_getbuffer(obj, view, flags);
}
}  // namespace

void install_buffer_refusals(py::handle tensor_type) {
  reinterpret_cast<PyTypeObject*>(tensor_type.ptr())->tp_as_buffer->bf_getbuffer = tensor_getbuffer;
}

py::array tensor_to_numpy(const Tensor& t, py::handle owner) {
  const py::buffer_info info = tensor_buffer(t);
  py::array a(py::dtype(info), info.shape, info.strides, info.ptr, owner);
  if (info.readonly) a.attr("flags").attr("writeable") = false;
  return a;
}

namespace {
// A tensor over the buffer's memory: of the dtype its format says, or, for
// from_bits (bf16_bits), bfloat16 over an array of uint16. `who` names the
// caller in the messages.
Tensor tensor_over_buffer(const py::buffer& b, bool bf16_bits, const char* who) {
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(b.ptr(), view.get(), PyBUF_RECORDS) != 0) {
    py::error_already_set refused;  // the exporter's own reason, unless the buffer is merely read-only
    Py_buffer probe;
    if (PyObject_GetBuffer(b.ptr(), &probe, PyBUF_RECORDS_RO) == 0) {
      const bool read_only = probe.readonly;
      PyBuffer_Release(&probe);
      PHASOR_CHECK(!read_only, who, ": the array is read-only, and a tensor would write to its memory: ",
                   bf16_bits ? "copy it first (a.copy())" : "use phasor.tensor() for a copy");
    } else {
      PyErr_Clear();
    }
    throw refused;  // a released memoryview: ValueError; no buffer at all: TypeError
  }
  // From here the buffer is held, and released with the storage (or on a refusal below).
  const Py_buffer& v = *view;
  std::shared_ptr<void> owner = pin(std::move(view));
  std::string format = v.format ? v.format : "B";
  if (bf16_bits) {
    if (!format.empty() && (format[0] == '<' || format[0] == '=' || format[0] == '@')) format.erase(0, 1);
    PHASOR_CHECK(format == "H" && v.itemsize == 2, who, ": expected an array of uint16 (bfloat16 bits), got format '", format,
                 "' (item size ", v.itemsize, ")");
  }
  const DType dtype = bf16_bits ? DType::BFloat16 : dtype_of_format(format, v.itemsize);
  PHASOR_CHECK(reinterpret_cast<uintptr_t>(v.buf) % alignment(dtype) == 0, who, ": the array's memory is not aligned to ",
               alignment(dtype), " bytes, as ", dtype, " elements need: use phasor.tensor() for a copy");
  Dims shape, strides;
  py::ssize_t contiguous = v.itemsize;  // the C-order stride, for an exporter that gives none
  for (int d = v.ndim - 1; d >= 0; --d) {
    const py::ssize_t stride = v.strides ? v.strides[d] : contiguous;
    contiguous *= v.shape[d];
    PHASOR_CHECK(stride >= 0 && stride % v.itemsize == 0, who, ": stride ", stride, " bytes of dimension ", d,
                 " is negative or not a multiple of the item size ", v.itemsize, ": use phasor.tensor() for a copy");
    shape.insert(0, v.shape[d]);
    strides.insert(0, stride / v.itemsize);
  }
  const std::shared_ptr<uint64_t> version = version_counter_of(memory_root(b));
  Tensor t = from_external(v.buf, shape, strides, dtype, std::move(owner));
  t.storage()->share_version(version);
  return t;
}
}  // namespace

Tensor tensor_from_buffer(const py::buffer& b) { return tensor_over_buffer(b, false, "phasor.Tensor"); }

Tensor tensor_from_bits(const py::buffer& b) { return tensor_over_buffer(b, true, "phasor.from_bits"); }

py::array tensor_bits(const Tensor& t, py::handle owner) {
  PHASOR_CHECK(t.dtype() == DType::BFloat16, "bits(): the tensor is ", t.dtype(), ", not bfloat16");
  PHASOR_CHECK(t.device().is_cpu(), "bits(): a tensor on ", t.device(), " has no NumPy view: copy it to the CPU first (to('cpu'))");
  std::vector<py::ssize_t> shape, strides;
  for (int d = 0; d < t.dim(); ++d) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d) * 2);
  }
  py::array a(py::dtype::of<uint16_t>(), shape, strides, t.raw_data(), owner);
  if (t.requires_grad()) a.attr("flags").attr("writeable") = false;  // as tensor_to_numpy: autograd would not see a write
  return a;
}

Tensor tensor_copy(const py::object& data) {
  const py::array a = py::module_::import("numpy").attr("asarray")(data);
  const py::dtype dt = a.dtype();
  const auto size = dt.itemsize();
  const char* target = nullptr;  // the NumPy dtype of the copy
  switch (dt.kind()) {
    case 'b': target = "bool"; break;
    case 'i': target = "int64"; break;
    case 'u':
      target = "int64";
      if (size == 8 && a.size() > 0) {
        const auto largest = a.attr("max")().cast<uint64_t>();
        if (largest > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          overflow("phasor.tensor: " + std::to_string(largest) + " does not fit in int64 (at most " +
                   std::to_string(std::numeric_limits<int64_t>::max()) + ")");
      }
      break;
    case 'f': target = size <= 4 ? "float32" : size == 8 ? "float64" : nullptr; break;  // float16 too
    case 'c': target = size == 8 ? "complex64" : size == 16 ? "complex128" : nullptr; break;
  }
  if (!target) {
    const std::string name = py::str(static_cast<py::handle>(dt));
    fail("phasor.tensor: NumPy dtype '", name, "' has no Phasor dtype (bool, int64, float32, float64, complex64, complex128)");
  }
  return tensor_from_buffer(py::buffer(a.attr("astype")(target)));  // a fresh native-order array only this tensor holds
}

}  // namespace phasor::python
