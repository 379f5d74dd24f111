#pragma once
// The kernel launch of cuda/*.cu: PHASOR_LAUNCH(grid, block, shared, stream, kernel)(args...)
// is exactly kernel<<<grid, block, shared, stream>>>(args...) under nvcc, and
// the CUDA simulator's launch (cuda/sim/device.h) when built with PHASOR_CUDA_SIM,
// where the kernel's source text names it in the simulator's reports.
// PHASOR_EXTERN_SHARED(T, name) declares the dynamic shared memory of a kernel,
// PHASOR_SHARED(T, name, count) a static shared array `T name[count]` (16-byte
// aligned), which the simulator poisons at the start of every block.
#if defined(PHASOR_CUDA_SIM)
#define PHASOR_LAUNCH(grid, block, shared, stream, ...) \
  ::phasor::sim::Launch(#__VA_ARGS__, __VA_ARGS__, grid, block, shared, stream)
#define PHASOR_EXTERN_SHARED(T, name) T* const name = reinterpret_cast<T*>(::phasor::sim::current_block->dynamic_shared)
#define PHASOR_SHARED(T, name, count) T(&name)[count] = ::phasor::sim::static_shared_array<T, (count)>([] {})
#else
#define PHASOR_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define PHASOR_EXTERN_SHARED(T, name) extern __shared__ __align__(16) T name[]
#define PHASOR_SHARED(T, name, count) __shared__ __align__(16) T name[count]
#endif
