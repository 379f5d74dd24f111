// NCCL for the CUDA simulator (PHASOR_CUDA_SIM, cuda/sim/include/nccl.h): each
// MPI rank is one simulated device, and a communicator is MPI_COMM_WORLD's
// ranks. Compiled into phasor_app, where the real NCCL would be linked (with
// MPI, which it needs); used from one thread, as Phasor's MPI is (FUNNELED).
//
// A collective is queued on its stream like a kernel (cuda/sim/runtime.cpp):
// it reads its input when the stream reaches it, not when it is called, and
// writes its output only once every rank has contributed, so a missing event
// between streams shows as stale or poisoned values. Until the peers have
// arrived the stream is not ready (cudaStreamQuery) and a synchronisation
// waits, as on a GPU. The reduction runs on a copy, so an aborted collective
// (ncclCommAbort) never writes the caller's buffers afterwards.
//
// ncclAvg is MPI's sum divided by the number of ranks, as Phasor's MPI
// transport computes it; real NCCL may scale before summing (rounding may differ).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"
#include "nccl.h"

namespace {

thread_local std::string last_error;

// An error as NCCL reports it: the code, and the reason in ncclGetLastError
// (printed as NCCL prints its warnings when NCCL_DEBUG is set).
ncclResult_t fail(ncclResult_t code, const std::string& why) {
  last_error = "the CUDA simulator's NCCL: " + why;
  if (std::getenv("NCCL_DEBUG") != nullptr) std::fprintf(stderr, "NCCL WARN %s\n", last_error.c_str());
  return code;
}

uint64_t fingerprint(const ncclUniqueId& id) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// What every rank tells the others at setup, so that a mismatch is an error
// instead of a wrong reduction.
struct Member {
  uint64_t id;
  int rank, nranks;
};

// A communicator's state; queued collectives hold it, so it outlives the handle.
struct State {
  int rank = 0, nranks = 1;
  uint64_t id = 0;
  MPI_Comm mpi = MPI_COMM_NULL;
  // Setup, non-blocking: MPI_Comm_idup, then an all-gather of every Member.
  int stage = 0;
  MPI_Request setup = MPI_REQUEST_NULL;
  Member me{};
  std::vector<Member> members;
  ncclResult_t status = ncclInProgress;  // ncclCommGetAsyncError
  std::string error;
  bool aborted = false;
  int queued = 0;  // collectives queued and not yet finished

  void failed(ncclResult_t code, const std::string& why) {
    status = fail(code, why);
    error = last_error;
  }

  // Moves the setup on without blocking.
  void progress() {
    if (status != ncclInProgress || aborted) return;
    int done = 0;
    if (MPI_Test(&setup, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return failed(ncclSystemError, "MPI_Comm_idup failed");
    if (!done) return;
    if (stage == 0) {
      MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);  // errors become NCCL codes, not an MPI abort
      me = Member{id, rank, nranks};
      members.resize(static_cast<size_t>(nranks));
      if (MPI_Iallgather(&me, sizeof me, MPI_BYTE, members.data(), sizeof me, MPI_BYTE, mpi, &setup) != MPI_SUCCESS)
        return failed(ncclSystemError, "MPI_Iallgather failed");
      stage = 1;
      return progress();
    }
    std::vector<bool> seen(static_cast<size_t>(nranks), false);
    for (const Member& m : members) {
      if (m.id != id || m.nranks != nranks)
        return failed(ncclInvalidUsage, "the ranks passed different unique ids or numbers of ranks to ncclCommInitRank");
      if (m.rank < 0 || m.rank >= nranks || seen[static_cast<size_t>(m.rank)])
        return failed(ncclInvalidUsage, "two ranks passed the same rank " + std::to_string(m.rank) + " to ncclCommInitRank");
      seen[static_cast<size_t>(m.rank)] = true;
    }
    status = ncclSuccess;
  }
};

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // the 16- and 8-bit floats: MPI has no arithmetic for them
  }
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

template <class T>
void divide(void* data, size_t count, int n) {
  T* x = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(x[i] / static_cast<T>(n));
}

void average(void* data, size_t count, ncclDataType_t t, int n) {
  switch (t) {
    case ncclInt8: return divide<int8_t>(data, count, n);
    case ncclUint8: return divide<uint8_t>(data, count, n);
    case ncclInt32: return divide<int32_t>(data, count, n);
    case ncclUint32: return divide<uint32_t>(data, count, n);
    case ncclInt64: return divide<int64_t>(data, count, n);
    case ncclUint64: return divide<uint64_t>(data, count, n);
    case ncclFloat32: return divide<float>(data, count, n);
    default: return divide<double>(data, count, n);
  }
}

// One all-reduce on its way: the input copied when the stream reaches it,
// reduced in place by MPI in pieces of at most INT_MAX elements.
struct AllReduce {
  std::shared_ptr<State> comm;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  std::vector<char> data;
  std::vector<MPI_Request> requests;
  bool started = false;

  // The stream's poll: true once finished (or abandoned).
  bool poll() {
    if (comm->aborted || comm->status != ncclSuccess) return abandon();
    const size_t item = type_size(type);
    if (!started) {
      started = true;
      data.assign(static_cast<const char*>(send), static_cast<const char*>(send) + count * item);
      static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_SUM};
      for (size_t first = 0; first < count; first += INT_MAX) {
        requests.emplace_back();
        if (MPI_Iallreduce(MPI_IN_PLACE, data.data() + first * item, static_cast<int>(std::min<size_t>(INT_MAX, count - first)),
                           mpi_type(type), ops[op], comm->mpi, &requests.back()) != MPI_SUCCESS) {
          requests.pop_back();
          comm->failed(ncclRemoteError, "MPI_Iallreduce failed (another rank may have died)");
          return abandon();
        }
      }
    }
    int done = 0;
    if (MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      comm->failed(ncclRemoteError, "an all-reduce failed in MPI (another rank may have died)");
      return abandon();
    }
    if (!done) return false;
    if (op == ncclAvg) average(data.data(), count, type, comm->nranks);
    std::memcpy(recv, data.data(), count * item);
    --comm->queued;
    return true;
  }

  // Ends without writing `recv`. MPI may still write `data` (a collective
  // cannot be cancelled), so a started one is left alive on purpose.
  bool abandon() {
    --comm->queued;
    static auto* abandoned = new std::vector<std::vector<char>>();  // never freed
    if (started) abandoned->push_back(std::move(data));  // the moved vector keeps its storage
    return true;
  }
};

bool device_range(const void* p, size_t n) {
  phasor::sim::Region r;
  return phasor::sim::find_allocation(p, r) && static_cast<const char*>(p) + n <= r.base + r.size;
}

int group_depth = 0;

}  // namespace

struct ncclComm {
  std::shared_ptr<State> state;
};

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static unsigned serial = 0;
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "phasor-sim-nccl %ld %ld %u", static_cast<long>(getpid()),
                static_cast<long>(std::time(nullptr)), ++serial);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  if (config != nullptr && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t)))
    return fail(ncclInvalidArgument, "ncclCommInitRankConfig: the config was not set from NCCL_CONFIG_INITIALIZER");
  int initialized = 0, world = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return fail(ncclInvalidUsage, "it carries collectives over MPI: initialise MPI before ncclCommInitRank");
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (nranks != world)
    return fail(ncclInvalidUsage, "a communicator spans MPI_COMM_WORLD (" + std::to_string(world) + " ranks), not " +
                                      std::to_string(nranks));
  auto state = std::make_shared<State>();
  state->rank = rank;
  state->nranks = nranks;
  state->id = fingerprint(id);
  if (MPI_Comm_idup(MPI_COMM_WORLD, &state->mpi, &state->setup) != MPI_SUCCESS)
    return fail(ncclSystemError, "MPI_Comm_idup failed");
  *comm = new ncclComm{state};
  const bool blocking = config == nullptr || config->blocking != 0;
  if (!blocking) {
    state->progress();
    return state->status == ncclInProgress ? ncclInProgress : ncclSuccess;  // errors: ncclCommGetAsyncError
  }
  for (state->progress(); state->status == ncclInProgress; state->progress()) std::this_thread::yield();
  if (state->status != ncclSuccess) {
    last_error = state->error;
    return state->status;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr || error == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  comm->state->progress();
  *error = comm->state->status;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  State& s = *comm->state;
  if (s.queued > 0)
    return fail(ncclInvalidUsage, "ncclCommDestroy with " + std::to_string(s.queued) +
                                      " collectives still queued: synchronise their stream first, or ncclCommAbort");
  if (s.status == ncclInProgress) return fail(ncclInvalidUsage, "ncclCommDestroy before the setup finished: ncclCommAbort");
  int finalized = 0;
  MPI_Finalized(&finalized);  // Phasor finalises MPI before its communicators are destroyed
  if (!finalized && s.mpi != MPI_COMM_NULL) MPI_Comm_free(&s.mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  // Queued collectives end without touching their buffers; MPI's pending
  // requests (setup or transfers) and their communicator are left alive.
  comm->state->aborted = true;
  if (comm->state->status == ncclInProgress) comm->state->failed(ncclInvalidUsage, "the communicator was aborted");
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: NULL argument");
  *count = comm->state->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: NULL argument");
  *device = 0;  // one simulated device per process
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: NULL argument");
  *rank = comm->state->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {  // NCCL's own texts
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes)
    return fail(ncclInvalidArgument, "ncclAllReduce: invalid datatype " + std::to_string(static_cast<int>(datatype)));
  if (static_cast<int>(op) < 0 || op >= ncclNumOps)
    return fail(ncclInvalidArgument, "ncclAllReduce: invalid reduction operation " + std::to_string(static_cast<int>(op)));
  const std::shared_ptr<State>& state = comm->state;
  state->progress();
  if (state->status == ncclInProgress) return fail(ncclInvalidUsage, "ncclAllReduce before the communicator's setup finished");
  if (state->status != ncclSuccess) {
    last_error = state->error;
    return state->status;
  }
  const size_t bytes = count * type_size(datatype);
  if (count > 0 && (!device_range(sendbuff, bytes) || !device_range(recvbuff, bytes)))
    return fail(ncclInvalidArgument, "ncclAllReduce: sendbuff or recvbuff is not " + std::to_string(count) +
                                         " elements of one device allocation");
  if (mpi_type(datatype) == MPI_DATATYPE_NULL)
    return fail(ncclInvalidUsage, "16- and 8-bit floats are not simulated (MPI has no arithmetic for them)");
  if (count == 0) return ncclSuccess;
  ++state->queued;
  auto reduce = std::make_shared<AllReduce>(AllReduce{state, sendbuff, recvbuff, count, datatype, op, {}, {}, false});
  phasor::sim::enqueue_polled(stream, [reduce] { return reduce->poll(); });
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  --group_depth;
  return ncclSuccess;
}

}  // extern "C"
