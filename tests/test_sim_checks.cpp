// What the CUDA simulator checks of a kernel that a GPU would run wrongly or
// fault on (issue 48, items 13-17): each case plants the bug in a kernel of
// its own and holds the simulator to catching it. Static shared arrays are
// poisoned per block; dynamic shared memory ends where the launch's bytes end;
// blocks run in other orders, and two blocks touching the same global bytes
// (one writing) are reported; pointer arguments, counted accesses and cuBLAS
// operands must lie in live device memory; threads waiting at different
// __syncthreads() are reported; shuffles honour their width.
// Built only on the simulator (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/global_memory.cuh"
#include "cuda/launch.h"

using namespace phasor;

namespace {

template <class T>
struct Device {
  T* p = nullptr;
  explicit Device(size_t n) { REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)) == cudaSuccess); }
  ~Device() { cudaFree(p); }
  std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    REQUIRE(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
};

// The failure the next synchronisation reports ("" if none), cleared as a CUDA program clears it.
std::string launch_failure() {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return "";
  const std::string what = cudaGetErrorString(e);
  cudaGetLastError();
  return what.empty() ? "failed" : what;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr int kPoisonInt = -1;  // 0xff bytes

// ---- item 13: static shared memory, poisoned per block

// Planted bug: only block 0 fills the shared array; the others read it unwritten.
__global__ void stale_static_shared_kernel(int* out) {
  PHASOR_SHARED(int, s, 64);
  if (blockIdx.x == 0) s[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}
// Two arrays of one kernel are distinct, and each block has its own.
__global__ void two_static_arrays_kernel(int* out) {
  PHASOR_SHARED(int, a, 32);
  PHASOR_SHARED(double, b, 32);
  a[threadIdx.x] = static_cast<int>(blockIdx.x);
  b[threadIdx.x] = -1.0;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = a[31 - threadIdx.x];
}

// Over the 48 KiB of static shared memory a kernel may declare (nvcc refuses it).
__global__ void too_much_static_shared_kernel(float* out) {
  PHASOR_SHARED(float, a, 8 * 1024);
  PHASOR_SHARED(float, b, 8 * 1024);
  a[threadIdx.x] = 1.0f;
  b[threadIdx.x] = 2.0f;
  out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

// ---- item 14: dynamic shared memory ends where the launch's bytes end

__global__ void fill_dynamic_shared_kernel(float* out) {
  PHASOR_EXTERN_SHARED(float, s);
  s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}
// Planted bug: the last thread reads one float past the launch's blockDim.x floats.
__global__ void read_past_dynamic_shared_kernel(float* out) {
  PHASOR_EXTERN_SHARED(float, s);
  s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x + 1];
}
// Planted bug: the last thread writes one float past the launch's blockDim.x floats.
__global__ void write_past_dynamic_shared_kernel(float* out) {
  PHASOR_EXTERN_SHARED(float, s);
  s[threadIdx.x + 1] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

// ---- item 15: blocks in other orders, and races between blocks

// Planted bug: every block writes out[0] (plain stores): the last block to run wins.
__global__ void last_block_wins_kernel(int* out) {
  if (threadIdx.x == 0) out[0] = static_cast<int>(blockIdx.x);
}
// Planted bug: every block stores the same value at out[0] (counted stores): a race, though the result never differs.
__global__ void same_value_race_kernel(float* out) {
  if (threadIdx.x == 0) gpu::store_global(out, 1.0f);
}
// Planted bug: blocks 1.. read x[0], which block 0 writes.
__global__ void read_other_block_kernel(float* x) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) gpu::store_global(x, 2.0f);
  else gpu::store_global(x + blockIdx.x, gpu::load_global(x));
}
// Correct: every block reads the shared parameters and writes its own elements.
__global__ void own_elements_kernel(const float* params, float* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  gpu::store_global(out + i, gpu::load_global(params) * static_cast<float>(i));
}

// ---- item 16: pointers into live device memory only

__global__ void fill_kernel(float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 3.0f;
}
// Planted bug: one counted store past the end of `out` (n floats).
__global__ void store_past_end_kernel(float* out, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i <= n) gpu::store_global(out + i, 3.0f);
}

// ---- item 17: barriers reached from different calls, shuffle widths

// Planted bug: the two halves of the block wait at different __syncthreads().
__global__ void split_barrier_kernel(float* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2.0f;
    __syncthreads();
  }
}
// A barrier in a loop every thread runs as often: the same __syncthreads() each time.
__global__ void loop_barrier_kernel(float* out) {
  for (int k = 0; k < 3; ++k) {
    out[threadIdx.x] = static_cast<float>(k);
    __syncthreads();
  }
}
__global__ void shuffle_width_kernel(int* down, int* xor_out, int width) {
  const int lane = static_cast<int>(threadIdx.x);
  down[lane] = __shfl_down_sync(0xffffffffu, lane, 4, width);
  xor_out[lane] = __shfl_xor_sync(0xffffffffu, lane, 8, width);
}

}  // namespace

TEST_CASE("sim checks: static shared arrays hold poison at the start of every block, not the last block's values") {
  Device<int> out(4 * 64);
  PHASOR_LAUNCH(4, 64, 0, nullptr, stale_static_shared_kernel)(out.p);
  REQUIRE(launch_failure() == "");
  std::vector<int> expected(4 * 64, kPoisonInt);
  std::fill(expected.begin(), expected.begin() + 64, 7);
  CHECK(out.read(4 * 64) == expected);

  Device<int> two(8 * 32);
  PHASOR_LAUNCH(8, 32, 0, nullptr, two_static_arrays_kernel)(two.p);
  REQUIRE(launch_failure() == "");
  for (int i = 0; i < 8 * 32; ++i) expected[i] = i / 32;
  expected.resize(8 * 32);
  CHECK(two.read(8 * 32) == expected);

  Device<float> big(32);
  PHASOR_LAUNCH(1, 32, 0, nullptr, too_much_static_shared_kernel)(big.p);
  CHECK(contains(launch_failure(), "its static shared arrays take over the 48 KiB a kernel may declare"));
}

TEST_CASE("sim checks: dynamic shared memory ends at the launch's bytes: a read or write past them is reported") {
  Device<float> out(256);
  // A larger launch first: the buffer a later, smaller launch gets must not show its values.
  PHASOR_LAUNCH(1, 256, 256 * sizeof(float), nullptr, fill_dynamic_shared_kernel)(out.p);
  REQUIRE(launch_failure() == "");

  PHASOR_LAUNCH(1, 32, 32 * sizeof(float), nullptr, read_past_dynamic_shared_kernel)(out.p);
  std::string failure = launch_failure();
  CHECK(contains(failure, "read_past_dynamic_shared_kernel"));
  CHECK(contains(failure, "thread (31, 0, 0) reads dynamic shared memory 0 bytes past the launch's 128"));

  PHASOR_LAUNCH(1, 32, 32 * sizeof(float), nullptr, write_past_dynamic_shared_kernel)(out.p);
  failure = launch_failure();
  CHECK(contains(failure, "thread (31, 0, 0) writes dynamic shared memory 0 bytes past the launch's 128"));

  // 20 bytes: the write lands before the next 16-byte boundary, on the canary.
  PHASOR_LAUNCH(1, 5, 5 * sizeof(float), nullptr, write_past_dynamic_shared_kernel)(out.p);
  failure = launch_failure();
  CHECK(contains(failure, "writes byte 20 of dynamic shared memory, past the launch's 20 bytes"));

  // Within its bytes, a launch runs clean.
  PHASOR_LAUNCH(1, 32, 32 * sizeof(float), nullptr, fill_dynamic_shared_kernel)(out.p);
  CHECK(launch_failure() == "");
}

TEST_CASE("sim checks: blocks that depend on each other's plain writes differ between block orders") {
  Device<int> out(1);
  PHASOR_LAUNCH(64, 32, 0, nullptr, last_block_wins_kernel)(out.p);
  const std::string failure = launch_failure();
  CHECK(contains(failure, "last_block_wins_kernel"));
  CHECK(contains(failure, "its results differ between the in-order and the reversed schedule of its threads and blocks"));
}

TEST_CASE("sim checks: two blocks touching the same global bytes through counted accesses, one writing, are reported") {
  Device<float> x(64);
  PHASOR_LAUNCH(4, 32, 0, nullptr, same_value_race_kernel)(x.p);
  std::string failure = launch_failure();
  CHECK(contains(failure, "same_value_race_kernel"));
  CHECK(contains(failure, "both write global memory at"));
  CHECK(contains(failure, "without an atomic"));

  PHASOR_LAUNCH(4, 32, 0, nullptr, read_other_block_kernel)(x.p);
  failure = launch_failure();
  CHECK(contains(failure, "reads global memory at"));
  CHECK(contains(failure, "that block (0, 0, 0) writes"));

  Device<float> params(1), out(4 * 32);
  PHASOR_LAUNCH(4, 32, 0, nullptr, own_elements_kernel)(params.p, out.p);
  CHECK(launch_failure() == "");
}

TEST_CASE("sim checks: a pointer argument outside live device memory is reported, and the kernel does not run") {
  std::vector<float> host(32, 0.0f);
  PHASOR_LAUNCH(1, 32, 0, nullptr, fill_kernel)(host.data(), 32);
  std::string failure = launch_failure();
  CHECK(contains(failure, "fill_kernel: its argument 0"));
  CHECK(contains(failure, "points into no live device memory"));
  CHECK(host == std::vector<float>(32, 0.0f));

  {
    Device<float> d(64);
    PHASOR_LAUNCH(1, 32, 0, nullptr, fill_kernel)(d.p + 64 + 16, 32);  // past the allocation's end
    CHECK(contains(launch_failure(), "its argument 0"));
    PHASOR_LAUNCH(1, 32, 0, nullptr, fill_kernel)(d.p + 64, 0);  // an empty range at the end: allowed
    CHECK(launch_failure() == "");
    PHASOR_LAUNCH(1, 32, 0, nullptr, fill_kernel)(nullptr, 0);
    CHECK(launch_failure() == "");
  }
  float* freed = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&freed), 256) == cudaSuccess);
  REQUIRE(cudaFree(freed) == cudaSuccess);
  PHASOR_LAUNCH(1, 32, 0, nullptr, fill_kernel)(freed, 32);
  CHECK(contains(launch_failure(), "its argument 0"));
}

TEST_CASE("sim checks: a counted access outside every live allocation faults, and does not happen") {
  Device<float> out(64);
  PHASOR_LAUNCH(1, 128, 0, nullptr, store_past_end_kernel)(out.p, 64);
  const std::string failure = launch_failure();
  CHECK(contains(failure, "thread (64, 0, 0) makes a 4-byte store of global memory at"));
  CHECK(contains(failure, "outside every live device allocation"));
}

TEST_CASE("sim checks: a cuBLAS operand outside live device memory is reported, and the product is not computed") {
  cublasHandle_t h = nullptr;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  const int n = 4;
  Device<float> a(n * n), c(n * n);
  std::vector<float> host_b(n * n, 1.0f);
  const float one = 1.0f, zero = 0.0f;
  REQUIRE(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.p, n, host_b.data(), n, &zero, c.p, n) == CUBLAS_STATUS_SUCCESS);
  std::string failure = launch_failure();
  CHECK(contains(failure, "cublasSgemm: B of product 0"));
  CHECK(contains(failure, "is not in live device memory"));

  // The second product's C runs past the end of c (stride n * n, two products).
  REQUIRE(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.p, n, 0, a.p, n, 0, &zero, c.p, n, n * n, 2) ==
          CUBLAS_STATUS_SUCCESS);
  failure = launch_failure();
  CHECK(contains(failure, "cublasSgemmStridedBatched: C of product 1"));

  REQUIRE(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.p, n, a.p, n, &zero, c.p, n) == CUBLAS_STATUS_SUCCESS);
  CHECK(launch_failure() == "");
  REQUIRE(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
}

TEST_CASE("sim checks: threads waiting at different __syncthreads() are reported, not released together") {
  Device<float> out(64);
  PHASOR_LAUNCH(1, 64, 0, nullptr, split_barrier_kernel)(out.p);
  const std::string failure = launch_failure();
  CHECK(contains(failure, "split_barrier_kernel"));
  CHECK(contains(failure, "waits at the __syncthreads() of test_sim_checks.cpp:"));
  CHECK(contains(failure, "all of a block's threads must reach the same barrier"));

  PHASOR_LAUNCH(1, 64, 0, nullptr, loop_barrier_kernel)(out.p);
  CHECK(launch_failure() == "");
}

TEST_CASE("sim checks: a shuffle's width cuts the warp into segments, as on the hardware") {
  Device<int> down(32), xor_out(32);
  PHASOR_LAUNCH(1, 32, 0, nullptr, shuffle_width_kernel)(down.p, xor_out.p, 8);
  REQUIRE(launch_failure() == "");
  const std::vector<int> d = down.read(32), x = xor_out.read(32);
  for (int lane = 0; lane < 32; ++lane) {
    INFO("lane " << lane);
    CHECK(d[lane] == (lane % 8 < 4 ? lane + 4 : lane));  // past its segment's end: its own value
    CHECK(x[lane] == ((lane & 8) ? lane - 8 : lane));     // a later segment: its own value; an earlier one is readable
  }
  PHASOR_LAUNCH(1, 32, 0, nullptr, shuffle_width_kernel)(down.p, xor_out.p, 32);
  REQUIRE(launch_failure() == "");
  const std::vector<int> d32 = down.read(32), x32 = xor_out.read(32);
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(d32[lane] == (lane < 28 ? lane + 4 : lane));
    CHECK(x32[lane] == (lane ^ 8));
  }

  PHASOR_LAUNCH(1, 32, 0, nullptr, shuffle_width_kernel)(down.p, xor_out.p, 12);
  CHECK(contains(launch_failure(), "shuffles with width 12: a shuffle's width is a power of 2 up to 32"));
}
