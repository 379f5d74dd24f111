#pragma once
// The parts of the `phasor` Python module, each defined in its own file and
// called from PYBIND11_MODULE (python/module.cpp).
#include <pybind11/pybind11.h>

#include <string>

#include "tensor/device.h"

namespace phasor::python {

void bind_tensor(pybind11::module_& m);    // python/tensor_bindings.cpp: Tensor, dtypes, ops, autograd
void bind_devices(pybind11::module_& m);   // python/device_bindings.cpp: Tensor.to(device), phasor.cuda (after bind_tensor)
void bind_dlpack(pybind11::module_& m);    // python/dlpack_bridge.cpp: __dlpack__, from_dlpack (after bind_tensor)
void bind_nn(pybind11::module_& m);        // python/nn_bindings.cpp: phasor.nn, phasor.optim
void bind_models(pybind11::module_& m);    // python/model_bindings.cpp: load, evaluate, gradients, generate
void bind_fused(pybind11::module_& m);     // python/fused_bindings.cpp: causal_attention, cmha_rotate, rotary
void bind_torch_bridge(pybind11::module_& m);  // python/module.cpp: phasor.torch (python/torch_bridge.py), last

// "cpu", "cuda" or "cuda:N"; a ValueError for anything else.
Device parse_device(const std::string& name);
// Whether `device` is the CUDA simulator's: host memory that no GPU can read.
bool simulated_device(Device device);

}  // namespace phasor::python
