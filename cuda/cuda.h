#pragma once
// The public face of the CUDA backend (device `cuda`): availability, memory
// statistics of the caching allocator, and switches. Safe to include in a
// CPU-only build: every function then reports that CUDA is absent.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensor/device_graph.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*, in CUDA and in the CUDA simulator

namespace phasor::gpu {

// Registers the allocator, the backend and the host <-> device copy of device
// cuda. tensor/backend.cpp does it during static initialisation where a program
// links this backend (Phasor::cuda; the GPU itself is touched lazily, on first
// use); code that runs in another static
// initialiser may call it first. Calling it again changes nothing.
void register_cuda();

// True when Phasor was built with CUDA and a GPU can be used.
bool available();
// Why CUDA cannot be used ("" when it can).
std::string unavailable_reason();
// True when CUDA cannot be used because this machine has no GPU at all: the
// runtime finds no device (cudaErrorNoDevice, or 0 devices), or no NVIDIA
// driver is installed (cudaErrorInsufficientDriver or cudaErrorStubLibrary with
// neither /proc/driver/nvidia nor an NVIDIA device node). False when a GPU can
// be used, and when one is there but fails: a driver older than the runtime,
// any other error of cudaGetDeviceCount, cudaSetDevice, the stream or cuBLAS.
// Tests skip on the first and fail on the second (tests/test_cuda.cpp).
bool absent();
// The GPU's name and compute capability, e.g. "NVIDIA H200 (sm_90)".
std::string device_name();
// True when device cuda is the CUDA simulator (a build with PHASOR_CUDA_SIM):
// its kernels run on the CPU, and its memory is host memory no GPU can read.
bool simulated();

struct MemoryStats {
  size_t allocated = 0;       // bytes held by live tensors (rounded block sizes)
  size_t reserved = 0;        // bytes taken from the driver (live + cached blocks)
  size_t peak_allocated = 0;  // high-water mark of `allocated`
  int64_t allocations = 0;    // allocate() calls
  int64_t cache_hits = 0;     // ... served from a freed block
};
MemoryStats memory_stats();
void reset_peak_memory();
// Returns every cached (free) block to the driver.
void empty_cache();
// Waits for all queued work on Phasor's stream.
void synchronize();
// Phasor's stream (a cudaStream_t), on which the backend queues all its work:
// for code that orders its own CUDA work with it through events (NCCL).
CUstream_st* native_stream();

// A CUDA Graph of the work the backend queues on its stream. capture(body)
// records what body queues instead of running it; replay() queues the
// recording again: the same kernels on the same memory, with no host work.
// While body runs, the caching allocator serves it from the graph's private
// pool (never given to work outside the graph until the graph is destroyed),
// and each upload from the host keeps its source in host memory the graph owns.
// Anything that would make the host wait for the device inside body (a read
// of device memory, a synchronisation) fails the capture with an error.
// What changes between replays must live in device memory written before
// each replay (a batch copied into the captured input tensors, a learning rate).
struct GraphState;
class Graph : public DeviceGraph {
 public:
  Graph();
  ~Graph() override;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void capture(const std::function<void()>& body) override;
  void replay() const override;
  bool captured() const;

 private:
  std::unique_ptr<GraphState> state_;
};
// Whether a Graph is capturing now.
bool capturing();

// TF32 tensor-core GEMMs for float32 (off by default; also PHASOR_TF32=1).
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace phasor::gpu
