#pragma once
// Element types and the rules that combine them.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tensor/bfloat16.h"
#include "tensor/error.h"

namespace phasor {

// New dtypes are appended: the values are stable (files and bindings may hold them).
enum class DType : uint8_t { Bool, Int64, Float32, Float64, Complex64, Complex128, BFloat16 };

using c64 = std::complex<float>;
using c128 = std::complex<double>;

constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Complex64: return 8;
    case DType::Complex128: return 16;
    case DType::BFloat16: return 2;
  }
  return 0;
}
const char* dtype_name(DType t);
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

// bfloat16 is a storage dtype (tensor/bfloat16.h): tensors hold it, views,
// copies, conversions and printing handle it, and every op that computes
// refuses it with this message (is_floating and is_inexact leave it out).
[[noreturn]] void fail_bfloat16(const char* op);  // op may be null (a kernel reached without a front-end's check)
// Refuses `t` as the dtype an op named `op` computes in when it is bfloat16.
inline void check_computes_in(DType t, const char* op) {
  if (t == DType::BFloat16) fail_bfloat16(op);
}

constexpr bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }
constexpr bool is_inexact(DType t) { return is_complex(t) || is_floating(t); }

// complex64 -> float32, complex128 -> float64; real types map to themselves.
constexpr DType real_dtype(DType t) {
  return t == DType::Complex64 ? DType::Float32 : t == DType::Complex128 ? DType::Float64 : t;
}
// float32 -> complex64, float64 -> complex128, complex types map to themselves.
DType complex_dtype(DType t);

// Type promotion as in NumPy/PyTorch: bool < int64 < bfloat16 < float32 < float64, and
// real -> complex keeping the wider precision (float64 with complex64 gives complex128,
// bfloat16 with complex64 complex64).
DType promote(DType a, DType b);

// A scalar stored into an element of `dtype` (fill_, full, masked_fill):
// refused, with a message naming `op`, when the dtype cannot hold it, as
// PyTorch's checked_convert does: a nonzero imaginary part into a real dtype,
// NaN, an infinity or a value out of range into int64, a finite value beyond
// float's range into float32 or complex64. Bool holds anything (nonzero is
// true) and int64 truncates a fraction, as in PyTorch. Returns the value to store.
c128 checked_scalar(c128 value, DType dtype, const char* op);

template <class T> struct dtype_of_t;
template <> struct dtype_of_t<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of_t<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of_t<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of_t<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of_t<c64> { static constexpr DType value = DType::Complex64; };
template <> struct dtype_of_t<c128> { static constexpr DType value = DType::Complex128; };
template <> struct dtype_of_t<bf16> { static constexpr DType value = DType::BFloat16; };
template <class T> constexpr DType dtype_of = dtype_of_t<T>::value;

template <class T> struct is_complex_t : std::false_type {};
template <class R> struct is_complex_t<std::complex<R>> : std::true_type {};
template <class T> constexpr bool is_complex_v = is_complex_t<T>::value;

template <class T> struct real_of_t { using type = T; };
template <class R> struct real_of_t<std::complex<R>> { using type = R; };
template <class T> using real_of = typename real_of_t<T>::type;

// One element of type S as a D, on the host: complex -> real keeps the real
// part; bfloat16 converts through float32, both ways (as PyTorch's
// c10::BFloat16, whose one constructor takes a float: a float64 rounds twice).
template <class D, class S>
D element_cast(S v) {
  if constexpr (std::is_same_v<S, bf16>) return element_cast<D>(static_cast<float>(v));
  else if constexpr (std::is_same_v<D, bf16>) return bf16(element_cast<float>(v));
  else if constexpr (is_complex_v<S> && !is_complex_v<D>) return static_cast<D>(v.real());
  else return static_cast<D>(v);
}

// Calls f.template operator()<T>() with the C++ type of `t`:
//   dispatch(t, [&]<class T>() { ... });
// bfloat16 is refused: the arithmetic kernels are not instantiated for it (an
// op's front-end refuses it first, naming itself, with check_computes_in).
template <class F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f.template operator()<bool>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Complex64: return f.template operator()<c64>();
    case DType::Complex128: return f.template operator()<c128>();
    case DType::BFloat16: fail_bfloat16(nullptr);
  }
  fail("dispatch: invalid dtype");
}
// As dispatch, bfloat16 included (as bf16): for code that moves, converts or
// prints elements and does no arithmetic on them.
template <class F>
decltype(auto) dispatch_storage(DType t, F&& f) {
  if (t == DType::BFloat16) return f.template operator()<bf16>();
  return dispatch(t, std::forward<F>(f));
}
// The same over the inexact types only; `op` names the caller in the error.
template <class F>
decltype(auto) dispatch_inexact(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Complex64: return f.template operator()<c64>();
    case DType::Complex128: return f.template operator()<c128>();
    case DType::BFloat16: fail_bfloat16(op);
    default: fail(op, ": not defined for dtype ", dtype_name(t));
  }
}
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::BFloat16: fail_bfloat16(op);
    default: fail(op, ": not defined for dtype ", dtype_name(t), " (real floating dtypes only)");
  }
}

}  // namespace phasor
