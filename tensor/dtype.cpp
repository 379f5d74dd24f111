#include "tensor/dtype.h"

#include <cfloat>
#include <cmath>
#include <sstream>

namespace phasor {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "invalid";
}

DType complex_dtype(DType t) {
  switch (t) {
    case DType::Float32:
    case DType::Complex64: return DType::Complex64;
    case DType::Float64:
    case DType::Complex128: return DType::Complex128;
    default: fail("complex_dtype: no complex counterpart of ", dtype_name(t));
  }
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_complex(a) || is_complex(b)) {
    const bool wide = a == DType::Float64 || b == DType::Float64 || a == DType::Complex128 || b == DType::Complex128;
    return wide ? DType::Complex128 : DType::Complex64;
  }
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

namespace {
// Why a real component cannot be stored in `dtype`, or null when it can.
const char* component_problem(double v, DType dtype) {
  if (dtype == DType::Int64) {
    if (std::isnan(v)) return "NaN has no integer value";
    if (!(v >= -0x1p63 && v < 0x1p63)) return "out of int64's range";  // infinities included
  } else if ((dtype == DType::Float32 || dtype == DType::Complex64) && std::isfinite(v) && std::abs(v) > FLT_MAX) {
    return "out of float32's range";
  }
  return nullptr;
}
}  // namespace

c128 checked_scalar(c128 value, DType dtype, const char* op) {
  if (dtype == DType::Bool) return value != c128(0) ? 1.0 : 0.0;  // NaN is nonzero: true
  const char* problem = !is_complex(dtype) && value.imag() != 0 ? "a real dtype drops its imaginary part" : nullptr;
  if (!problem) problem = component_problem(value.real(), dtype);
  if (!problem) problem = component_problem(value.imag(), dtype);
  if (problem) {
    std::ostringstream shown;  // as Python writes it: 2.5, nan, (0+1j)
    if (value.imag() == 0) shown << value.real();
    else shown << "(" << value.real() << (value.imag() < 0 ? "" : "+") << value.imag() << "j)";
    fail(op, ": value ", shown.str(), " cannot be converted to ", dtype, " without overflow (", problem, ")");
  }
  return value;
}

}  // namespace phasor
