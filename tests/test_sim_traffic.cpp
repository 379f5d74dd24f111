// The CUDA simulator's traffic counters (cuda/sim/traffic.h): every access
// through cuda/global_memory.cuh counted once per launch, a misaligned one a fault.
// Built only on the simulator (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda.h"
#include "cuda/global_memory.cuh"
#include "cuda/launch.h"
#include "cuda/sim/traffic.h"
#include "phasor.h"

using namespace phasor;
using phasor::sim::Traffic;

namespace {

// Test kernels: n floats copied one at a time, or four at a time (16 bytes) from `in`.
__global__ void copy_floats_kernel(const float* in, float* out, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) gpu::store_global(out + i, gpu::load_global(in + i));
}
__global__ void copy_vectors_kernel(const float* in, float* out, int n) {
  for (int i = 4 * static_cast<int>(threadIdx.x); i + 4 <= n; i += 4 * static_cast<int>(blockDim.x))
    gpu::store_global_vec(out + i, gpu::load_global_vec<4>(in + i));
}

struct DeviceFloats {
  float* p = nullptr;
  explicit DeviceFloats(size_t n) { REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess); }
  ~DeviceFloats() { cudaFree(p); }
};

// The traffic of every kernel `body` launches, summed; each must show bytes
// (a kernel whose accesses bypass the counted accessors would show none).
template <class F>
Traffic launched_by(F&& body) {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  sim::reset_traffic();
  body();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  Traffic all;
  for (const auto& entry : sim::traffic()) {
    INFO("kernel " << entry.first);
    CHECK(entry.second.bytes() > 0);
    all.launches += entry.second.launches;
    all.bytes_read += entry.second.bytes_read;
    all.bytes_written += entry.second.bytes_written;
    all.accesses += entry.second.accesses;
  }
  return all;
}

}  // namespace

TEST_CASE("sim traffic: every counted access once, under whichever schedules a launch runs") {
  const int n = 1000;
  DeviceFloats in(n), out(n);
  Traffic t = launched_by([&] { PHASOR_LAUNCH(1, 64, 0, nullptr, copy_floats_kernel)(in.p, out.p, n); });
  CHECK(t.launches == 1);
  CHECK(t.bytes_read == n * 4);
  CHECK(t.bytes_written == n * 4);
  CHECK(t.accesses == 2 * n);
  CHECK(sim::traffic().count("copy_floats_kernel") == 1);

  t = launched_by([&] { PHASOR_LAUNCH(2, 32, 0, nullptr, copy_vectors_kernel)(in.p, out.p, n); });
  CHECK(t.launches == 1);
  CHECK(t.bytes_read == 2 * n * 4);  // two blocks, each copying all n
  CHECK(t.accesses == 2 * 2 * n / 4);

  sim::reset_traffic();
  CHECK(sim::traffic().empty());
}

TEST_CASE("sim traffic: a 16-byte access off a 16-byte boundary is a fault, as on the hardware") {
  DeviceFloats in(64), out(64);
  PHASOR_LAUNCH(1, 32, 0, nullptr, copy_vectors_kernel)(in.p + 1, out.p, 60);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(std::string(cudaGetErrorString(cudaErrorLaunchFailure)).find("misaligned 16-byte load") != std::string::npos);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);  // and cleared, as a CUDA program clears it
  CHECK(cudaDeviceSynchronize() == cudaSuccess);        // reported once
}
