#pragma once
// Counted global-memory accesses. load_global / store_global move one element;
// load_global_vec / store_global_vec move W consecutive elements as one access
// of W * sizeof(T) bytes (16 at most, the widest the hardware loads). Under
// nvcc they are plain loads and stores, a 16-byte one a single 128-bit
// instruction. On the CUDA simulator each one also adds its bytes to the
// running launch's traffic (cuda/sim/traffic.h), and a misaligned one faults
// as it does on the hardware. Kernels whose traffic is held to a bound (the
// rotations, issue #31) make every global access through these.
//
// VectorRows splits rows of elements into 16-byte vectors where the operands'
// layout allows it, and into single elements elsewhere.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include <cuda_runtime.h>

namespace phasor::gpu {

// W consecutive elements of T, aligned as one access of their size.
template <class T, int W>
struct alignas(W * sizeof(T)) Vec {
  static_assert(W * sizeof(T) <= 16 && (W * sizeof(T) & (W * sizeof(T) - 1)) == 0, "an access moves 1, 2, 4, 8 or 16 bytes");
  T v[W];
};

namespace detail {
#ifndef PHASOR_CUDA_SIM
// The built-in type of an access of N bytes, so that nvcc emits one instruction for it.
template <size_t N> struct access_word;
template <> struct access_word<1> { using type = unsigned char; };
template <> struct access_word<2> { using type = unsigned short; };
template <> struct access_word<4> { using type = unsigned; };
template <> struct access_word<8> { using type = uint2; };
template <> struct access_word<16> { using type = uint4; };
#endif
}  // namespace detail

template <int W, class T>
__device__ __forceinline__ Vec<T, W> load_global_vec(const T* p) {
  Vec<T, W> v;
#ifdef PHASOR_CUDA_SIM
  ::phasor::sim::global_access(p, sizeof v, false);
  std::memcpy(static_cast<void*>(&v), p, sizeof v);  // (void*: T may have constructors, and is trivially copyable)
#else
  using Word = typename detail::access_word<sizeof v>::type;
  const Word word = *reinterpret_cast<const Word*>(p);
  memcpy(&v, &word, sizeof v);
#endif
  return v;
}

template <int W, class T>
__device__ __forceinline__ void store_global_vec(T* p, const Vec<T, W>& v) {
#ifdef PHASOR_CUDA_SIM
  ::phasor::sim::global_access(p, sizeof v, true);
  std::memcpy(static_cast<void*>(p), &v, sizeof v);
#else
  using Word = typename detail::access_word<sizeof v>::type;
  Word word;
  memcpy(&word, &v, sizeof v);
  *reinterpret_cast<Word*>(p) = word;
#endif
}

template <class T>
__device__ __forceinline__ T load_global(const T* p) {
  return load_global_vec<1>(p).v[0];
}

template <class T>
__device__ __forceinline__ void store_global(T* p, const T& v) {
  store_global_vec<1>(p, Vec<T, 1>{{v}});
}

// Rows of `count` elements of T cut into groups for the accesses above: `head`
// single elements up to the first 16-byte boundary, `vectors` vectors of
// kWidth elements, then single elements to the row's end. vector_rows gives
// vectors only where every row of every operand starts at the same distance
// from a 16-byte boundary; otherwise every group is a single element.
template <class T>
struct VectorRows {
  static constexpr int kWidth = sizeof(T) < 16 ? static_cast<int>(16 / sizeof(T)) : 1;
  int count = 0, head = 0, vectors = 0;

  __host__ __device__ int groups() const { return count - vectors * (kWidth - 1); }
  // The first element of group g.
  __host__ __device__ int first(int g) const { return g < head ? g : g < head + vectors ? head + (g - head) * kWidth : g + vectors * (kWidth - 1); }
  // f(first element, std::integral_constant<int, its width>) for group g.
  template <class F>
  __device__ void visit(int g, F&& f) const {
    if (g >= head && g < head + vectors) f(first(g), std::integral_constant<int, kWidth>{});
    else f(first(g), std::integral_constant<int, 1>{});
  }
};

template <class T>
VectorRows<T> vector_rows(int64_t count, std::initializer_list<const void*> operands) {
  constexpr int w = VectorRows<T>::kWidth;
  const uintptr_t phase = reinterpret_cast<uintptr_t>(*operands.begin()) % 16;
  bool aligned_alike = (count * sizeof(T)) % 16 == 0 && phase % sizeof(T) == 0;  // every row at the first row's phase
  for (const void* p : operands) aligned_alike = aligned_alike && reinterpret_cast<uintptr_t>(p) % 16 == phase;
  VectorRows<T> r;
  r.count = static_cast<int>(count);
  r.head = aligned_alike ? static_cast<int>(std::min<int64_t>(count, ((16 - phase) % 16) / sizeof(T))) : r.count;
  r.vectors = (r.count - r.head) / w;
  return r;
}

}  // namespace phasor::gpu
