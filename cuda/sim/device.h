#pragma once
// The device model of the CUDA simulator (PHASOR_CUDA_SIM): what a .cu file
// compiled as host C++ needs from nvcc. Every simulated thread of a block is a
// fiber (cuda/sim/device.cpp): threadIdx, blockIdx, blockDim and gridDim read
// the running fiber's; __syncthreads() is a barrier of the block's fibers; the
// warp shuffles exchange values between the 32 lanes of a warp at a warp-wide
// rendezvous (the lockstep of a warp at a shuffle). Static shared arrays
// (PHASOR_SHARED, cuda/launch.h) and dynamic shared memory
// (PHASOR_EXTERN_SHARED) live in buffers of the OS thread that runs the block,
// filled with poison at the start of every block (cuda/sim/shared_memory.h).
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuComplex.h"
#include "cuda_runtime_api.h"

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
// A static __shared__ variable would be one thread_local object, holding the
// previous block's values and invisible to the simulator: it cannot be poisoned
// per block. Kernels declare static shared arrays with PHASOR_SHARED.
#define __shared__ _Pragma("GCC error \"the CUDA simulator cannot poison a __shared__ variable per block: declare it with PHASOR_SHARED(T, name, count) (cuda/launch.h)\"")

namespace phasor::sim {

struct SimThread {
  uint3 idx;
};
struct SimBlock {
  uint3 idx;
  dim3 dim, grid;
  unsigned char* dynamic_shared;
};
extern thread_local SimThread* current_thread;
extern thread_local SimBlock* current_block;

// A barrier of the block's threads, reached at `file`:`line` (all of a
// block's threads must wait at the same one).
void syncthreads(const char* file, int line);
// The running block's instance of the static shared array declared at `site`
// (`bytes` long, 16-byte aligned), poisoned at the start of every block.
void* static_shared(const void* site, size_t bytes);
template <class T, size_t N, class Site>
T (&static_shared_array(Site))[N] {
  static char site;  // one per declaration and per instantiation of the function that holds it
  return *static_cast<T(*)[N]>(static_shared(&site, sizeof(T[N])));
}
// A kernel's load or store of `bytes` of global memory at p (cuda/global_memory.cuh):
// counted in the launch's traffic (cuda/sim/traffic.h). An address that is not
// a multiple of the access's size, or bytes outside every live device
// allocation, is a fault that ends the thread, as on the hardware; two blocks
// of one launch touching the same bytes, one of them writing, are reported.
void global_access(const void* p, size_t bytes, bool write);
// The value `bytes` of lane `src` of the caller's warp, at a rendezvous of the
// lanes of `mask`; `width` splits the warp into segments, as CUDA's shuffles do.
enum class Shfl { Down, Xor };
void shuffle(unsigned mask, const void* in, void* out, size_t bytes, Shfl kind, int arg, int width);

template <class T>
T shfl(unsigned mask, T v, Shfl kind, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "the simulator shuffles scalars of up to 8 bytes");
  T r;
  shuffle(mask, &v, &r, sizeof(T), kind, arg, width);
  return r;
}

}  // namespace phasor::sim

#define threadIdx (::phasor::sim::current_thread->idx)
#define blockIdx (::phasor::sim::current_block->idx)
#define blockDim (::phasor::sim::current_block->dim)
#define gridDim (::phasor::sim::current_block->grid)
#define warpSize 32

// Its call site is the barrier's identity: threads waiting at different
// __syncthreads() are reported, not released together.
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { ::phasor::sim::syncthreads(file, line); }
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::phasor::sim::shfl(mask, v, ::phasor::sim::Shfl::Down, static_cast<int>(delta), width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::phasor::sim::shfl(mask, v, ::phasor::sim::Shfl::Xor, lane_mask, width);
}

// The round-to-nearest intrinsics: one IEEE operation each, never contracted
// into an FMA (the simulator's sources compile with -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }

namespace phasor::sim {

struct LaunchConfig {
  const char* name;
  const void* kernel;
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
};
// Checks the configuration as the hardware does; on failure, the error that
// cudaGetLastError then returns.
bool launch_ok(const LaunchConfig& c);
// A kernel parameter of pointer type, and the value the launch gave it.
struct PointerArg {
  int index;
  const void* value;
};
// Queues the grid on its stream: `body(bound)` runs one simulated thread; `args` are
// the launch's argument bytes, scanned for pointers into device allocations;
// `pointers` its pointer parameters, each of which must be null or point into
// live device memory when the kernel runs.
void enqueue_kernel(const LaunchConfig& c, std::shared_ptr<const void> bound, const void* args, size_t args_bytes,
                    void (*body)(const void*), std::vector<PointerArg> pointers);

template <class T>
void add_pointer_arg(std::vector<PointerArg>& out, int index, const T& v) {
  if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>)
    out.push_back(PointerArg{index, const_cast<const void*>(static_cast<const volatile void*>(v))});
  else
    (void)out, (void)index, (void)v;
}
template <class Args, size_t... I>
std::vector<PointerArg> pointer_args(const Args& args, std::index_sequence<I...>) {
  std::vector<PointerArg> out;
  (add_pointer_arg(out, static_cast<int>(I), std::get<I>(args)), ...);
  return out;
}

template <class... P>
struct Launch {
  using Args = std::tuple<std::decay_t<P>...>;
  struct Bound {
    void (*kernel)(P...);
    Args args;
  };
  LaunchConfig config;
  void (*kernel)(P...);
  Launch(const char* name, void (*k)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream)
      : config{name, reinterpret_cast<const void*>(k), grid, block, shared, stream}, kernel(k) {}
  // The arguments are copied at the launch, as CUDA copies them.
  template <class... A>
  void operator()(A&&... a) const {
    if (!launch_ok(config)) return;
    auto bound = std::make_shared<Bound>(Bound{kernel, Args(std::forward<A>(a)...)});
    const void* bytes = &bound->args;
    std::vector<PointerArg> pointers = pointer_args(bound->args, std::index_sequence_for<P...>{});
    enqueue_kernel(
        config, bound, bytes, sizeof(Args),
        [](const void* p) {
          const Bound& b = *static_cast<const Bound*>(p);
          std::apply(b.kernel, b.args);  // each simulated thread gets its own copies of the parameters
        },
        std::move(pointers));
  }
};

}  // namespace phasor::sim
