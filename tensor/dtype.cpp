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
    case DType::BFloat16: return "bfloat16";
  }
  return "invalid";
}

void fail_bfloat16(const char* op) {
  if (!op) fail("not defined for dtype bfloat16, a storage dtype (convert with to(float32))");
  fail(op, ": not defined for dtype bfloat16 (convert with to(float32))");
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

namespace {
// The order of the real dtypes in promotion (the enum's values are not: bfloat16 was appended).
int real_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::Int64: return 1;
    case DType::BFloat16: return 2;
    case DType::Float32: return 3;
    default: return 4;  // Float64
  }
}
}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_complex(a) || is_complex(b)) {
    const bool wide = a == DType::Float64 || b == DType::Float64 || a == DType::Complex128 || b == DType::Complex128;
    return wide ? DType::Complex128 : DType::Complex64;
  }
  return real_rank(a) > real_rank(b) ? a : b;
}

namespace {
// Why a real component cannot be stored in `dtype`, or null when it can.
const char* component_problem(double v, DType dtype) {
  if (dtype == DType::Int64) {
    if (std::isnan(v)) return "NaN has no integer value";
    if (!(v >= -0x1p63 && v < 0x1p63)) return "out of int64's range";  // infinities included
  } else if ((dtype == DType::Float32 || dtype == DType::Complex64) && std::isfinite(v) && std::abs(v) > FLT_MAX) {
    return "out of float32's range";
  } else if (dtype == DType::BFloat16 && std::isfinite(v) && std::abs(v) > 0x1.fep127) {
    return "out of bfloat16's range";  // its largest finite value (PyTorch's bound too)
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
