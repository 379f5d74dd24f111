// Devices from Python: Tensor.to(device), .cpu(), .cuda(), and phasor.cuda
// (is_available, is_simulated, device_name, synchronize, memory statistics).
// Device cuda exists where the module was built with the CUDA backend
// (PHASOR_WITH_CUDA, which Phasor::cuda defines): on a GPU, or on the CUDA
// simulator, whose tensors say so (phasor.cuda.is_simulated(), and DLPack's
// device type, python/dlpack_bridge.cpp).
#include <pybind11/stl.h>

#include <charconv>
#include <string>

#include "python/bindings.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#ifdef PHASOR_WITH_CUDA
#include "cuda/cuda.h"
#endif

namespace py = pybind11;
using namespace pybind11::literals;

namespace phasor::python {

Device parse_device(const std::string& name) {
  if (name == "cpu") return kCPU;
  if (name == "cuda") return cuda(0);
  int index = -1;
  const std::string prefix = "cuda:";
  if (name.starts_with(prefix)) {
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec != std::errc() || end != last || first == last) index = -1;
  }
  if (index < 0) throw py::value_error("device must be 'cpu', 'cuda' or 'cuda:N', got '" + name + "'");
  return cuda(index);
}

bool simulated_device(Device device) {
#ifdef PHASOR_WITH_CUDA
  return device.is_cuda() && gpu::simulated();
#else
  (void)device;
  return false;
#endif
}

void bind_devices(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor.def("to", [](const Tensor& t, const std::string& device) { return t.to(parse_device(device)); }, "device"_a,
             "a copy on device 'cpu', 'cuda' or 'cuda:N' (this tensor where it is there already); gradients flow back")
      .def("to", [](const Tensor& t, const std::string& device, DType dtype) { return t.to(parse_device(device)).to(dtype); },
           "device"_a, "dtype"_a)
      .def("cpu", [](const Tensor& t) { return t.to(kCPU); }, "t.to('cpu')")
      .def("cuda", [](const Tensor& t, int index) { return t.to(cuda(index)); }, "index"_a = 0, "t.to('cuda:index')");

  py::module_ c = m.def_submodule("cuda", "device cuda: a GPU, or the CUDA simulator in a build with PHASOR_CUDA_SIM");
#ifdef PHASOR_WITH_CUDA
  c.def("is_available", &gpu::available, "whether tensors can go to device cuda")
      .def("is_simulated", &gpu::simulated, "whether device cuda is the CUDA simulator (kernels on the CPU, host memory)")
      .def("unavailable_reason", &gpu::unavailable_reason, "why device cuda cannot be used ('' when it can)")
      .def("device_name", &gpu::device_name)
      .def("synchronize", &gpu::synchronize, "waits for the work queued on device cuda")
      .def("memory_allocated", [] { return gpu::memory_stats().allocated; }, "bytes held by live tensors on device cuda")
      .def("max_memory_allocated", [] { return gpu::memory_stats().peak_allocated; }, "the high-water mark of memory_allocated()")
      .def("empty_cache", &gpu::empty_cache, "returns the caching allocator's free blocks to the driver");
#else
  c.def("is_available", [] { return false; }, "whether tensors can go to device cuda")
      .def("is_simulated", [] { return false; }, "whether device cuda is the CUDA simulator")
      .def("unavailable_reason", [] { return std::string("Phasor was built without CUDA"); }, "why device cuda cannot be used");
#endif
}

}  // namespace phasor::python
