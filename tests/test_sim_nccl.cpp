// The CUDA simulator's NCCL (cuda/sim/nccl.cpp) on 2 MPI ranks, below the
// application (test_distributed_nccl runs the application's NCCL path on it):
// NCCL's error codes for bad arguments, an all-reduce that leaves its stream
// not ready until the other rank arrives and writes its output only then, an
// aborted one that never writes it, and setups that refuse mismatched unique
// ids or duplicate ranks. Built only on the simulator with MPI
// (tests/CMakeLists.txt); the case re-runs its binary under mpirun.
#include <doctest/doctest.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/helpers.h"
#include "tests/skip.h"

using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

struct DeviceFloats {
  float* p = nullptr;
  size_t n;
  explicit DeviceFloats(const std::vector<float>& v) : n(v.size()) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p); }
  // The simulated device's memory is host memory: read it as it is now,
  // without waiting for any stream.
  std::vector<float> now() const { return std::vector<float>(p, p + n); }
};

ncclUniqueId shared_id(int rank) {
  ncclUniqueId id;
  if (rank == 0) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  return id;
}

// A non-blocking setup, polled to its end: its final state.
ncclResult_t setup_state(ncclComm_t* comm, ncclUniqueId id, int rank) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(comm, 2, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) return r;
  ncclResult_t state = ncclInProgress, polled = ncclSuccess;
  while (polled == ncclSuccess && state == ncclInProgress) polled = ncclCommGetAsyncError(*comm, &state);
  return polled == ncclSuccess ? state : polled;
}

void child() {
  // The case watches queued all-reduces wait for the other rank: with
  // PHASOR_SIM_DEFER=0 a queued one would run, and wait, at once.
  setenv("PHASOR_SIM_DEFER", "1", 1);
  int initialized = 0, provided = 0, rank = 0, world = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  REQUIRE(world == 2);
  const ncclUniqueId id = shared_id(rank);

  // Arguments NCCL refuses, refused with its codes and texts.
  ncclComm_t bad = nullptr;
  CHECK(ncclCommInitRank(nullptr, 2, id, rank) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&bad, 2, id, 2) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&bad, 0, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&bad, 3, id, rank) == ncclInvalidUsage);  // the simulator's communicators span MPI_COMM_WORLD
  ncclConfig_t unset{};
  CHECK(ncclCommInitRankConfig(&bad, 2, id, rank, &unset) == ncclInvalidArgument);
  CHECK(std::string(ncclGetErrorString(ncclInvalidArgument)) == "invalid argument (run with NCCL_DEBUG=WARN for details)");

  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess);
  int count = 0, user_rank = -1;
  CHECK((ncclCommCount(comm, &count) == ncclSuccess && count == 2));
  CHECK((ncclCommUserRank(comm, &user_rank) == ncclSuccess && user_rank == rank));
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);

  const float scale = static_cast<float>(rank + 1);
  DeviceFloats x({1 * scale, 2 * scale, 3 * scale, 4 * scale});
  std::vector<float> host(4);
  CHECK(ncclAllReduce(x.p, x.p, 4, static_cast<ncclDataType_t>(13), ncclSum, comm, stream) == ncclInvalidArgument);
  CHECK(ncclAllReduce(x.p, x.p, 4, ncclFloat32, static_cast<ncclRedOp_t>(9), comm, stream) == ncclInvalidArgument);
  CHECK(ncclAllReduce(x.p, x.p, 4, ncclFloat32, ncclSum, nullptr, stream) == ncclInvalidArgument);
  CHECK(ncclAllReduce(host.data(), x.p, 4, ncclFloat32, ncclSum, comm, stream) == ncclInvalidArgument);  // not device memory
  CHECK(ncclAllReduce(x.p, x.p, 5, ncclFloat32, ncclSum, comm, stream) == ncclInvalidArgument);  // past the allocation
  CHECK(ncclAllReduce(x.p, x.p, 4, ncclFloat16, ncclSum, comm, stream) == ncclInvalidUsage);   // not simulated
  CHECK(std::string(ncclGetLastError(comm)).find("16- and 8-bit floats") != std::string::npos);

  // Rank 1 joins only after rank 0 has seen its stream not ready and its
  // buffer untouched; then both end with the mean.
  if (rank == 0) {
    REQUIRE(ncclAllReduce(x.p, x.p, 4, ncclFloat32, ncclAvg, comm, stream) == ncclSuccess);
    CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);
    CHECK(cudaGetLastError() == cudaSuccess);  // "not ready" is no error
    CHECK(x.now() == std::vector<float>{1, 2, 3, 4});
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(ncclAllReduce(x.p, x.p, 4, ncclFloat32, ncclAvg, comm, stream) == ncclSuccess);
  }
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(x.now() == std::vector<float>{1.5f, 3.0f, 4.5f, 6.0f});

  // An aborted all-reduce ends its stream's wait and never writes its output,
  // not even once the other rank's matching one completes it in MPI.
  DeviceFloats y({scale, scale});
  if (rank == 0) {
    REQUIRE(ncclAllReduce(y.p, y.p, 2, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
    CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);
    CHECK(ncclCommAbort(comm) == ncclSuccess);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);  // rank 1's all-reduce has completed meanwhile
    CHECK(y.now() == std::vector<float>{1, 1});
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE(ncclAllReduce(y.p, y.p, 2, ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(y.now() == std::vector<float>{3, 3});
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
  }

  // Setups the ranks disagree on fail on every rank, with ncclInvalidUsage.
  ncclUniqueId other = id;
  if (rank == 0) REQUIRE(ncclGetUniqueId(&other) == ncclSuccess);
  ncclComm_t mismatched = nullptr;
  CHECK(setup_state(&mismatched, other, rank) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(mismatched)).find("different unique ids") != std::string::npos);
  ncclCommAbort(mismatched);
  ncclComm_t duplicate = nullptr;
  CHECK(setup_state(&duplicate, id, 0) == ncclInvalidUsage);
  ncclCommAbort(duplicate);

  cudaStreamDestroy(stream);
  MPI_Finalize();
}

}  // namespace

TEST_CASE("the simulator's NCCL: NCCL's error codes, stream order, abort and setup checks on 2 ranks") {
  if (std::getenv("PHASOR_SIM_NCCL_CHILD") != nullptr) return child();
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) PHASOR_SKIP_UNLESS_REQUIRED("mpirun is not on PATH (openmpi-bin)");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const fs::path dir = scratch_root("sim_nccl");
  const Cli r = run_shell("timeout -k 5 120 mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none "
                          "-x PHASOR_SIM_NCCL_CHILD=1 -x ASAN_OPTIONS=detect_leaks=0 " + quote(self) + " --no-colors",
                          dir);
  CHECK_MESSAGE(r.status == 0, r.out, r.err);
  CHECK_MESSAGE(count_of(r.out, "Status: SUCCESS") == 2, r.out, r.err);
}
