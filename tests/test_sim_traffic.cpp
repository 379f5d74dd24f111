// The CUDA simulator's traffic counters (cuda/sim/traffic.h), and the rotation
// kernels held to them (issue #31): RoPE / XPos's rotate and the ComplexFormer
// rotation, forward and backward, read their inputs once and write their
// outputs once (plus the small per-head parameters), within 1.1x of that
// minimum, every access counted; and they move complex64 16 bytes an access
// where the layout allows. `test_sim_traffic -s` prints the measured ratios.
// Built only on the simulator (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "cuda/cuda.h"
#include "cuda/global_memory.cuh"
#include "cuda/launch.h"
#include "cuda/sim/traffic.h"
#include "phasor.h"

using namespace phasor;
using phasor::sim::Traffic;

namespace {

// Test kernels: n floats copied one at a time, or four at a time (16 bytes)
// from `in`, each block to its own n floats of `out` (blocks writing the same
// bytes would be a race the simulator reports).
__global__ void copy_floats_kernel(const float* in, float* out, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) gpu::store_global(out + i, gpu::load_global(in + i));
}
__global__ void copy_vectors_kernel(const float* in, float* out, int n) {
  for (int i = 4 * static_cast<int>(threadIdx.x); i + 4 <= n; i += 4 * static_cast<int>(blockDim.x))
    gpu::store_global_vec(out + blockIdx.x * n + i, gpu::load_global_vec<4>(in + i));
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

// The measured traffic over the minimum: every input read once, every output written once.
void check_near_minimum(const Traffic& t, size_t minimum, const std::string& what) {
  INFO(what << ": " << t.bytes() << " bytes moved, minimum " << minimum);
  const double ratio = static_cast<double>(t.bytes()) / static_cast<double>(minimum);
  CHECK(ratio >= 1.0);
  CHECK(ratio <= 1.1);
}

// The mean width of the accesses of kernel `name` in the last launched_by.
double mean_access_bytes(const std::string& name) {
  const Traffic t = sim::traffic()[name];
  REQUIRE(t.accesses > 0);
  return static_cast<double>(t.bytes()) / static_cast<double>(t.accesses);
}

size_t bytes_of(const Tensor& t) { return t.defined() ? t.nbytes() : 0; }

std::string describe(DType dt, const Dims& shape) {
  std::ostringstream os;
  os << dtype_name(dt) << " " << shape;
  return os.str();
}

Generator rng(31);
Tensor random_on(const Device& device, const Dims& shape, double lo, double hi, DType dt) {
  return ops::to_device(uniform(shape, lo, hi, dt, &rng), device);
}

// B=2, N=64: P a multiple of the vector width, P odd (vectors straddle pairs
// and heads), and H*P odd (rows at alternating 16-byte phases: single accesses).
const Dims kShapes[] = {Dims{2, 64, 4, 16}, Dims{2, 64, 4, 15}, Dims{2, 64, 3, 5}};

// Whether complex64 rows of this shape move as 16-byte vectors.
bool vectorised(const Dims& shape, DType dt) { return dt == DType::Complex128 || shape[2] * shape[3] % 2 == 0; }

void check_access_width(const std::string& kernel, const Dims& shape, DType dt) {
  INFO(kernel << " " << describe(dt, shape));
  if (vectorised(shape, dt)) CHECK(mean_access_bytes(kernel) > 12.0);  // nearly all 16-byte accesses
  else CHECK(mean_access_bytes(kernel) <= 8.0);
}

}  // namespace

TEST_CASE("sim traffic: every counted access once, under whichever schedules a launch runs") {
  const int n = 1000;
  DeviceFloats in(n), out(2 * n);
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

TEST_CASE("sim traffic: RoPE / XPos rotate reads z and the table once and writes once, forward and backward") {
  const Device g = cuda(0);
  for (DType dt : {DType::Complex64, DType::Complex128})
    for (const Dims& shape : kShapes)
      for (bool conj : {false, true}) {  // the backward multiplies by the conjugate table
        const Tensor z = random_on(g, shape, -1, 1, dt);
        const Tensor table = ops::to_device(ops::rotary_table(shape[1], shape[3], 0, 10000.0, 512.0, 1, dt), g);
        Tensor out;
        const Traffic t = launched_by([&] { out = ops::rotate(z, table, conj); });
        CHECK(t.launches == 1);
        check_near_minimum(t, bytes_of(z) + bytes_of(table) + bytes_of(out),
                           std::string("rotate ") + (conj ? "backward " : "forward ") + describe(dt, shape));
        check_access_width("rotate_kernel", shape, dt);
      }
}

TEST_CASE("sim traffic: the ComplexFormer rotation reads z once and writes once, forward and backward") {
  const Device g = cuda(0);
  for (DType dt : {DType::Complex64, DType::Complex128})
    for (const Dims& shape : kShapes)
      for (bool with_bias : {true, false}) {
        const DType rt = real_dtype(dt);
        const Dims hp = {shape[2], shape[3]};
        const Tensor z = random_on(g, shape, -1, 1, dt), grad = random_on(g, shape, -1, 1, dt);
        const ops::CmhaParams p{random_on(g, hp, 0.5, 1.5, rt), with_bias ? random_on(g, hp, -0.5, 0.5, rt) : Tensor(), random_on(g, {shape[2]}, 0.5, 1.5, rt),
                                7, 10000.0};
        const size_t parameters = bytes_of(p.delta) + bytes_of(p.phase_bias) + bytes_of(p.beta);
        const std::string what = describe(dt, shape) + (with_bias ? " bias" : "");

        Tensor out;
        Traffic t = launched_by([&] { out = ops::cmha_rotate(z, p); });
        check_near_minimum(t, bytes_of(z) + parameters + bytes_of(out), "cmha_rotate forward " + what);
        check_access_width("cmha_kernel", shape, dt);

        ops::CmhaGrads d;
        t = launched_by([&] { d = ops::cmha_rotate_backward(grad, z, p); });
        // Read: grad, z and the parameters; written: dz and the parameters' gradients.
        check_near_minimum(t, bytes_of(grad) + bytes_of(z) + 2 * parameters + bytes_of(d.dz), "cmha_rotate backward " + what);
        check_access_width("cmha_backward_kernel", shape, dt);
      }
}
