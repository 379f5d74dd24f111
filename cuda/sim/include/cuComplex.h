#pragma once
// cuComplex / cuDoubleComplex of the CUDA simulator: the toolkit's layout.
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) double2 {
  double x, y;
};
typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;
