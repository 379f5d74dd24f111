// `import phasor`: the Tensor with its ops and autograd, and the model level
// (load a checkpoint, evaluate, window gradients, generate). A phasor::Error
// surfaces as phasor.Error (a RuntimeError) carrying the same one line the
// `phasor` CLI prints after "phasor: "; an allocation failure as MemoryError.
#include <new>

#include "app/error_message.h"
#include "phasor_version.h"
#include "python/bindings.h"
#include "tensor/error.h"

namespace py = pybind11;

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
  phasor::python::bind_dlpack(m);
  phasor::python::bind_nn(m);
  phasor::python::bind_models(m);
}
