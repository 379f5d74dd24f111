// DLPack both ways: Tensor.__dlpack__ / __dlpack_device__ (the array API
// standard's producer protocol) and phasor.from_dlpack (any producer, or a
// capsule), without copies. torch, NumPy, JAX, CuPy speak it.
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "autograd/functions.h"
#include "python/bindings.h"
#include "python/dlpack.h"

namespace py = pybind11;
using namespace py::literals;

namespace phasor::python {

namespace {

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";

[[noreturn]] void buffer_error(const std::string& message) {
  PyErr_SetString(PyExc_BufferError, message.c_str());
  throw py::error_already_set();
}

std::string device_name(Device d) {
  std::ostringstream name;
  name << d;
  return name.str();
}

dlpack::DataType to_dlpack(DType dtype) {
  const auto bits = static_cast<uint8_t>(8 * itemsize(dtype));
  switch (dtype) {
    case DType::Bool: return {dlpack::kDLBool, bits, 1};
    case DType::Int64: return {dlpack::kDLInt, bits, 1};
    case DType::BFloat16: return {dlpack::kDLBfloat, bits, 1};
    case DType::Complex64:
    case DType::Complex128: return {dlpack::kDLComplex, bits, 1};
    default: return {dlpack::kDLFloat, bits, 1};
  }
}

DType from_dlpack_type(dlpack::DataType t) {
  const auto is = [&](uint8_t code, uint8_t bits) { return t.code == code && t.bits == bits && t.lanes == 1; };
  if (is(dlpack::kDLFloat, 32)) return DType::Float32;
  if (is(dlpack::kDLFloat, 64)) return DType::Float64;
  if (is(dlpack::kDLComplex, 64)) return DType::Complex64;
  if (is(dlpack::kDLComplex, 128)) return DType::Complex128;
  if (is(dlpack::kDLInt, 64)) return DType::Int64;
  if (is(dlpack::kDLBool, 8)) return DType::Bool;
  if (is(dlpack::kDLBfloat, 16)) return DType::BFloat16;
  buffer_error("from_dlpack: DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
               std::to_string(t.lanes) + " lanes) is not one of float32, float64, complex64, complex128, int64, bool, bfloat16");
}

// What an exported capsule owns: the tensor (so its memory lives as long as
// the consumer holds it), its geometry as DLPack reads it, and the struct itself.
template <class Managed>
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  Managed managed{};
  static void release(Managed* m) { delete static_cast<Export*>(m->manager_ctx); }
};

template <class Managed>
Managed* export_tensor(const Tensor& t) {
  auto* e = new Export<Managed>{t, std::vector<int64_t>(t.shape().begin(), t.shape().end()),
                                std::vector<int64_t>(t.strides().begin(), t.strides().end())};
  dlpack::DLTensor& dl = e->managed.dl_tensor;
  dl.data = t.raw_data();
  dl.device = {dlpack::kDLCPU, 0};
  dl.ndim = t.dim();
  dl.dtype = to_dlpack(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &Export<Managed>::release;
  return &e->managed;
}

// A capsule nobody consumed frees what it holds; a consumed one (renamed
// "used_...") belongs to its consumer.
template <class Managed>
py::capsule capsule_of(Managed* m, const char* name) {
  PyObject* capsule = PyCapsule_New(m, name, [](PyObject* self) {
    const char* own = std::is_same_v<Managed, dlpack::ManagedTensor> ? kLegacyName : kVersionedName;
    if (!PyCapsule_IsValid(self, own)) return;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);  // a destructor may run while an exception is set
    auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(self, own));
    if (managed->deleter) managed->deleter(managed);
    PyErr_Restore(type, value, trace);
  });
  if (!capsule) {
    m->deleter(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

py::capsule dlpack_capsule(const Tensor& t, const py::object& stream, std::optional<std::pair<int, int>> max_version,
                           std::optional<std::pair<int, int>> dl_device, std::optional<bool> copy) {
  const bool to_cpu = dl_device && dl_device->first == dlpack::kDLCPU && dl_device->second == 0;
  if (!t.device().is_cpu()) {
    // The array API's cross-device export: a copy to the CPU where the consumer asks for one and allows copies.
    if (to_cpu && copy.value_or(true)) return dlpack_capsule(t.to(kCPU), stream, max_version, dl_device, true);
    buffer_error("__dlpack__: the tensor is on " + device_name(t.device()) + (simulated_device(t.device()) ? " (the CUDA simulator)" : "") +
                 ", and only CPU memory is exported: t.cpu() copies it there");
  }
  if (!stream.is_none()) buffer_error("__dlpack__: stream must be None for a CPU tensor");
  if (dl_device && !to_cpu)
    buffer_error("__dlpack__: dl_device (" + std::to_string(dl_device->first) + ", " + std::to_string(dl_device->second) +
                 ") is not the tensor's device (kDLCPU, 0)");
  const bool versioned = max_version && max_version->first >= 1;
  // The NumPy export's rule: memory a graph may have saved leaves read-only or not at all.
  if (t.requires_grad() && !versioned)
    buffer_error("__dlpack__: the tensor requires grad, and a consumer's writes would bypass autograd: export t.detach()");
  const bool copied = copy.value_or(false);
  const Tensor exported = copied ? clone(t.detach()) : t.detach();
  if (!versioned) return capsule_of(export_tensor<dlpack::ManagedTensor>(exported), kLegacyName);
  auto* m = export_tensor<dlpack::ManagedTensorVersioned>(exported);
  m->version = {1, 0};
  m->flags = (t.requires_grad() && !copied ? dlpack::kFlagReadOnly : 0) | (copied ? dlpack::kFlagIsCopied : 0);
  return capsule_of(m, kVersionedName);
}

// The consumer's side: a tensor over the producer's memory, whose storage
// calls the producer's deleter (with the GIL: NumPy's drops a reference) when it goes.
template <class Managed>
Tensor import_managed(Managed* m, bool read_only) {
  if (m->deleter == &Export<Managed>::release) {  // one of ours: the same storage, so the same version counter
    const Tensor t = static_cast<Export<Managed>*>(m->manager_ctx)->tensor;
    m->deleter(m);
    return read_only ? clone(t) : t;
  }
  std::shared_ptr<void> owner(m, [](void* p) {
    auto* managed = static_cast<Managed*>(p);
    if (!managed->deleter || !Py_IsInitialized()) return;  // after the interpreter is gone, so is the producer
    const PyGILState_STATE gil = PyGILState_Ensure();
    managed->deleter(managed);
    PyGILState_Release(gil);
  });
  const dlpack::DLTensor& dl = m->dl_tensor;
  if (dl.device.device_type != dlpack::kDLCPU)
    buffer_error("from_dlpack: only CPU memory (kDLCPU) is imported, not device type " + std::to_string(dl.device.device_type));
  // A producer's struct is read as it comes: what would be read out of bounds is refused first.
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr))
    buffer_error("from_dlpack: malformed DLTensor (ndim " + std::to_string(dl.ndim) + (dl.shape ? "" : ", no shape") + ")");
  const DType dtype = from_dlpack_type(dl.dtype);
  Dims shape, strides;
  int64_t compact = 1;
  for (int d = dl.ndim - 1; d >= 0; --d) {
    shape.insert(0, dl.shape[d]);
    strides.insert(0, dl.strides ? dl.strides[d] : compact);
    compact *= dl.shape[d];
    if (strides[0] < 0 && dl.shape[d] > 1)
      buffer_error("from_dlpack: negative strides cannot be viewed by a Phasor tensor: pass a copy (e.g. x.copy())");
    if (dl.shape[d] <= 1) strides[0] = std::max<int64_t>(strides[0], 0);  // a stride over one element is never used
  }
  Tensor t = from_external(static_cast<char*>(dl.data) + dl.byte_offset, shape, strides, dtype, std::move(owner));
  return read_only ? clone(t) : t;  // Phasor tensors are writable: read-only memory is copied
}

Tensor from_capsule(const py::capsule& capsule) {
  if (PyCapsule_IsValid(capsule.ptr(), kLegacyName)) {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kLegacyName));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // the capsule no longer frees it: the tensor does
    return import_managed(m, false);
  }
  if (PyCapsule_IsValid(capsule.ptr(), kVersionedName)) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
    if (m->version.major > 1) buffer_error("from_dlpack: DLPack version " + std::to_string(m->version.major) + " is newer than 1");
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");
    return import_managed(m, (m->flags & dlpack::kFlagReadOnly) != 0);
  }
  throw py::value_error("from_dlpack: the capsule is not an unconsumed DLPack tensor (\"dltensor\" or \"dltensor_versioned\")");
}

std::string type_name(const py::handle& x) { return py::str(py::type::of(x).attr("__name__")).cast<std::string>(); }

// A producer's __dlpack__ must return a capsule. Anything else is refused,
// another producer included: following it would go round for ever where one
// returns another that returns the first (or itself).
py::capsule capsule_returned_by(const py::object& producer, const py::object& returned) {
  if (!PyCapsule_CheckExact(returned.ptr()))
    throw py::type_error("from_dlpack: " + type_name(producer) + ".__dlpack__() returned " + type_name(returned) +
                         ", not a DLPack capsule");
  return py::reinterpret_borrow<py::capsule>(returned);
}

// The device a producer says its memory is on: CPU memory only.
void check_producer_device(const py::object& x) {
  const py::object device = x.attr("__dlpack_device__")();
  std::pair<int, int> type_and_index;
  try {
    type_and_index = device.cast<std::pair<int, int>>();
  } catch (const py::cast_error&) {
    throw py::type_error("from_dlpack: " + type_name(x) + ".__dlpack_device__() returned " + type_name(device) +
                         ", not a (device type, index) pair of ints");
  }
  if (type_and_index.first != dlpack::kDLCPU)
    buffer_error("from_dlpack: only CPU memory (kDLCPU) is imported, not device type " + std::to_string(type_and_index.first) +
                 ": move the array to the CPU first");
}

Tensor from_dlpack(const py::object& x, std::optional<bool> copy) {
  if (PyCapsule_CheckExact(x.ptr())) {
    const Tensor t = from_capsule(py::reinterpret_borrow<py::capsule>(x));
    return copy.value_or(false) ? clone(t) : t;
  }
  if (!py::hasattr(x, "__dlpack__"))
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got " + type_name(x));
  if (py::hasattr(x, "__dlpack_device__")) check_producer_device(x);
  py::object returned;
  bool copy_here = false;  // an older producer cannot be asked for a copy: it is made here
  try {
    returned = x.attr("__dlpack__")("max_version"_a = py::make_tuple(1, 0), "copy"_a = copy ? py::cast(*copy) : py::none());
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    returned = x.attr("__dlpack__")();  // a producer of the older protocol (torch 1.13, NumPy 1.24)
    copy_here = copy.value_or(false);
  }
  const Tensor t = from_capsule(capsule_returned_by(x, returned));
  return copy_here ? clone(t) : t;
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor.def("__dlpack__", &dlpack_capsule, py::kw_only(), "stream"_a = py::none(), "max_version"_a = py::none(),
             "dl_device"_a = py::none(), "copy"_a = py::none(),
             "a DLPack capsule over this tensor's memory (no copy unless copy=True); the capsule keeps the tensor alive. "
             "A tensor that requires grad is exported read-only (DLPack 1.0, max_version >= (1, 0)) or refused");
  tensor.def("__dlpack_device__", [](const Tensor& t) {
    const Device d = t.device();
    const int32_t type = d.is_cpu() ? dlpack::kDLCPU : simulated_device(d) ? dlpack::kDLExtDev : dlpack::kDLCUDA;
    return py::make_tuple(type, d.is_cpu() ? 0 : d.index);
  }, "(device type, index): kDLCPU (1), kDLCUDA (2) on a GPU, kDLExtDev (12) on the CUDA simulator");
  m.def("from_dlpack", &from_dlpack, "x"_a, py::kw_only(), "copy"_a = py::none(),
        "a tensor over the memory of x (an object with __dlpack__, e.g. a torch tensor or a NumPy array, or a DLPack "
        "capsule), without a copy; read-only memory and copy=True are copied");
}

}  // namespace phasor::python
