#include "tensor/dtype.h"

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

}  // namespace phasor
