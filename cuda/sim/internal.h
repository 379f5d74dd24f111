#pragma once
// What the parts of the CUDA simulator share (cuda/sim/*.cpp); not seen by cuda/*.cu.
#include <cstdint>
#include <functional>
#include <string>

#include "cuda_runtime_api.h"

namespace phasor::sim {

// The device allocation (cudaMalloc) holding address p, if any.
struct Region {
  char* base = nullptr;
  size_t size = 0;
};
bool find_allocation(const void* p, Region& r);
// Whether [p, p + bytes) lies in one live device allocation or pinned host
// block (mapped, so the device's too); with bytes 0, whether p points into one
// or just past its end (where an empty range may start).
bool in_device_memory(const void* p, size_t bytes);
// The same without taking the runtime's lock, for a kernel's threads: the
// thread that runs queued work holds that lock, so nothing is allocated or
// freed while a kernel runs.
bool in_device_memory_while_running(const void* p, size_t bytes);

// Queues work on a stream; it runs in order, at the latest when the host
// synchronises with it (or at once when PHASOR_SIM_DEFER=0).
void enqueue(cudaStream_t s, std::function<void()> task);
// Queues work that may have to wait for something outside the device (the
// peers of a collective): `poll` is called until it returns true, and until
// then the stream is not ready (cudaStreamQuery) and a synchronisation waits.
void enqueue_polled(cudaStream_t s, std::function<bool()> poll);

// A fault found while running queued work: returned by the next
// synchronisation as cudaErrorLaunchFailure, whose error string names it.
void record_failure(const std::string& what);

// Counts a kernel launch in sync_counts() (cuda/sim/sync_counts.h).
void count_launch();
// Adds a launch that has run, the global bytes it read and wrote and its
// number of accesses, to traffic() (cuda/sim/traffic.h).
void record_traffic(const char* launch_name, int64_t bytes_read, int64_t bytes_written, int64_t accesses);

// A switch of the simulator's checks from the environment: on unless set to 0.
bool check_enabled(const char* name);

constexpr unsigned char kPoison = 0xff;  // NaN in every float format, -1 in every integer

}  // namespace phasor::sim
