#pragma once
// Phasor's compute runs without Python's GIL, so that Python threads calling
// it run in parallel (as PyTorch's ops do). The GIL is released only where no
// Python object is touched: after pybind11 has converted the arguments and
// before it converts the result (ReleaseGil), or around the C++ part of a
// binding that reads or builds Python objects itself (without_gil). A tensor
// over a NumPy or DLPack buffer that dies without the GIL takes it back to
// release the buffer (python/numpy_bridge.cpp, python/dlpack_bridge.cpp).
// Not released: calls into Python callables (gradcheck, jvp) and the default
// random generator (randn, rand, manual_seed), which is not thread-safe.
#include <pybind11/pybind11.h>

namespace phasor::python {

// The extra argument of a def() whose whole call may run without the GIL.
using ReleaseGil = pybind11::call_guard<pybind11::gil_scoped_release>;

// f() without the GIL.
template <class F>
auto without_gil(F&& f) {
  pybind11::gil_scoped_release release;
  return f();
}

}  // namespace phasor::python
