#pragma once
// What the complex-number examples print and check: a labelled result, and a
// MISMATCH line (which fails the example's ctest test) when it is off.
#include <complex>
#include <cstdio>

#include "phasor.h"

namespace example {

inline int mismatches = 0;

// Prints a result and checks it: |got - want| <= tol.
inline void expect(const char* label, phasor::c128 got, phasor::c128 want, double tol) {
  std::printf("%-44s % .6f %+.6fi\n", label, got.real(), got.imag());
  if (std::abs(got - want) <= tol) return;
  std::printf("  MISMATCH: expected % .6f %+.6fi (tolerance %g)\n", want.real(), want.imag(), tol);
  ++mismatches;
}

// The first element of a complex tensor.
inline phasor::c128 first(const phasor::Tensor& t) { return t.to_vector<phasor::c128>()[0]; }

}  // namespace example
