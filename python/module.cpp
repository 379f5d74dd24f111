// `import phasor`: the Tensor with its ops and autograd, and the model level
// (load a checkpoint, evaluate, window gradients, generate). A phasor::Error
// surfaces as phasor.Error (a RuntimeError) carrying the same one line the
// `phasor` CLI prints after "phasor: "; an allocation failure as MemoryError.
#include <new>

#include <pybind11/eval.h>

#include "app/error_message.h"
#include "phasor_version.h"
#include "python/bindings.h"
#include "python/torch_bridge_source.h"
#include "tensor/error.h"

namespace py = pybind11;

namespace phasor::python {

// phasor.torch runs its Python source in a submodule; registered in
// sys.modules so that `import phasor.torch` finds it too.
void bind_torch_bridge(py::module_& m) {
  py::module_ bridge = m.def_submodule("torch", "Phasor's ops inside PyTorch's autograd (torch imported on first use)");
  py::dict scope = bridge.attr("__dict__");
  scope["_phasor"] = m;
  py::exec(kTorchBridgeSource, scope);
  py::module_::import("sys").attr("modules")["phasor.torch"] = bridge;
}

}  // namespace phasor::python

PYBIND11_MODULE(phasor, m) {
  m.doc() = "Phasor: complex-valued tensors with reverse-mode autodiff, and the ComplexFormer language model";
  m.attr("__version__") = PHASOR_VERSION;
  static py::exception<phasor::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const phasor::Error& e) {
      error(phasor::error_message(e).c_str());
    } catch (const std::bad_alloc& e) {
      PyErr_SetString(PyExc_MemoryError, phasor::error_message(e).c_str());
    }
  });
  phasor::python::bind_tensor(m);
  phasor::python::bind_devices(m);
  phasor::python::bind_dlpack(m);
  phasor::python::bind_nn(m);
  phasor::python::bind_models(m);
  phasor::python::bind_fused(m);
  phasor::python::bind_torch_bridge(m);
}
