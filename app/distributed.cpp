#include "app/distributed.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tensor/ops.h"

#ifdef PHASOR_WITH_MPI
#include <mpi.h>
#endif
#ifdef PHASOR_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cuda/runtime.h"  // gpu::stream(): the one stream Phasor's CUDA backend queues everything on
#endif

namespace phasor {

namespace {

using Clock = std::chrono::steady_clock;

[[maybe_unused]] double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != v && *end == '\0') ? static_cast<int>(n) : fallback;
}

// ------------------------------------------------------------ one process

class SingleProcess final : public Communicator {
 public:
  const char* transport() const override { return "single"; }
  void all_reduce_mean(const std::vector<Tensor>&) override {}
  void all_reduce_sum(std::vector<double>&) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }
};

std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> slot = std::make_unique<SingleProcess>();
  return slot;
}

// ------------------------------------------------------------ flattening

// Where one gradient's elements live in the flat buffer of its real dtype, and
// the host (or device) tensor that holds them contiguously meanwhile.
struct Piece {
  Tensor grad;     // the caller's gradient (written back at the end)
  Tensor staging;  // contiguous, on the transport's device; == grad when no copy was needed
  size_t offset = 0, count = 0;  // in reals of the flat buffer
};

struct Flat {
  DType dtype;  // Float32 or Float64
  std::vector<Piece> pieces;
  size_t count = 0;
};

// Splits gradients by real dtype, in order; each complex element counts as two reals.
[[maybe_unused]] std::vector<Flat> plan_flat(const std::vector<Tensor>& grads, const char* who) {
  std::vector<Flat> flats;
  for (const Tensor& g : grads) {
    PHASOR_CHECK(g.defined(), who, ": undefined gradient");
    const DType rd = real_dtype(g.dtype());
    PHASOR_CHECK(rd == DType::Float32 || rd == DType::Float64, who, ": gradients must be float or complex, got ", g.dtype());
    Flat* f = nullptr;
    for (Flat& x : flats)
      if (x.dtype == rd) f = &x;
    if (f == nullptr) f = &flats.emplace_back(Flat{rd, {}, 0});
    const size_t n = static_cast<size_t>(g.numel()) * (is_complex(g.dtype()) ? 2 : 1);
    f->pieces.push_back(Piece{g, Tensor(), f->count, n});
    f->count += n;
  }
  return flats;
}

// ------------------------------------------------------------ MPI

#ifdef PHASOR_WITH_MPI

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;  // only the main thread calls MPI
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    }
    // Our own communicator, with errors returned (and turned into phasor::Error)
    // instead of MPI's default of aborting without a word of context.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }
  ~MpiCommunicator() override { finalize(); }

  const char* transport() const override { return "mpi"; }

  void all_reduce_mean(const std::vector<Tensor>& grads) override {
    if (grads.empty()) return;
    const auto start = Clock::now();
    std::vector<Flat> flats = plan_flat(grads, "all_reduce_mean");
    // Stage into host buffers (one per dtype, kept between steps); wait, napping,
    // until every rank has arrived; then start one non-blocking all-reduce per
    // bucket and poll them all without napping.
    if (host_.size() < flats.size()) host_.resize(flats.size());
    for (size_t fi = 0; fi < flats.size(); ++fi) {
      Flat& f = flats[fi];
      const size_t item = itemsize(f.dtype);
      std::vector<char>& buf = host_[fi];
      if (buf.size() < f.count * item) buf.resize(f.count * item);
      for (Piece& p : f.pieces) {
        p.staging = p.grad.device().is_cpu() ? ops::contiguous(p.grad) : ops::contiguous(ops::to_device(p.grad, kCPU));
        std::memcpy(buf.data() + p.offset * item, p.staging.raw_data(), p.count * item);
      }
    }
    std::vector<MPI_Request> requests(1);
    check(MPI_Ibarrier(comm_, &requests[0]), "MPI_Ibarrier");
    wait(requests, "all_reduce_mean", start);
    const auto transfer = Clock::now();
    requests.clear();
    for (size_t fi = 0; fi < flats.size(); ++fi) {
      const Flat& f = flats[fi];
      const size_t item = itemsize(f.dtype), bucket = std::max<size_t>(1, bucket_bytes_ / item);
      for (size_t first = 0; first < f.count; first += bucket) {
        requests.emplace_back();
        check(MPI_Iallreduce(MPI_IN_PLACE, host_[fi].data() + first * item, static_cast<int>(std::min(bucket, f.count - first)),
                             f.dtype == DType::Float32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, comm_, &requests.back()),
              "MPI_Iallreduce");
      }
    }
    wait(requests, "all_reduce_mean", start, /*busy=*/true);
    transfer_seconds_ += seconds_since(transfer);
    for (size_t fi = 0; fi < flats.size(); ++fi) {
      Flat& f = flats[fi];
      char* buf = host_[fi].data();
      if (f.dtype == DType::Float32) {
        auto* x = reinterpret_cast<float*>(buf);
        for (size_t i = 0; i < f.count; ++i) x[i] /= static_cast<float>(world_);
      } else {
        auto* x = reinterpret_cast<double*>(buf);
        for (size_t i = 0; i < f.count; ++i) x[i] /= static_cast<double>(world_);
      }
      const size_t item = itemsize(f.dtype);
      for (Piece& p : f.pieces) {
        std::memcpy(p.staging.raw_data(), buf + p.offset * item, p.count * item);
        if (!p.staging.same_storage(p.grad))
          ops::copy_(p.grad, p.grad.device().is_cpu() ? p.staging : ops::to_device(p.staging, p.grad.device()));
      }
    }
    account(start);
  }

  void all_reduce_sum(std::vector<double>& values) override {
    if (values.empty()) return;
    const auto start = Clock::now();
    std::vector<MPI_Request> r(1);
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, comm_, &r[0]),
          "MPI_Iallreduce");
    wait(r, "all_reduce_sum", start);
    account(start);
  }

  void barrier() override {
    const auto start = Clock::now();
    std::vector<MPI_Request> r(1);
    check(MPI_Ibarrier(comm_, &r[0]), "MPI_Ibarrier");
    wait(r, "barrier", start);
    account(start);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  void finalize() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (std::getenv("PHASOR_DIST_STATS") != nullptr)
      std::fprintf(stderr,
                   "distributed: rank %d of %d: %ld collectives took %.3f s in all (copies and waiting for other ranks included), "
                   "of which %.3f s moving gradients once every rank had arrived\n",
                   rank_, world_, static_cast<long>(collectives_), collective_seconds_, transfer_seconds_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  MPI_Comm comm() const { return comm_; }

 protected:
  void check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fail("distributed: ", call, " failed", at_step(), ": ", text, " (another rank may have died)");
  }

  std::string at_step() const { return step_ >= 0 ? " at step " + std::to_string(step_) : std::string(); }

  // The watchdog: polls the requests until all complete or the deadline passes.
  // MPI moves a non-blocking collective forward only inside MPI calls. A large
  // all-reduce takes many rounds between the ranks, so once every rank is known
  // to be there (`busy`) polling never naps: a nap per round would cost more
  // than the transfer. Otherwise (waiting for ranks still computing, or a
  // collective of a few rounds) it naps between polls, up to 100 us, so a
  // waiting rank leaves the core to those still computing.
  void wait(std::vector<MPI_Request>& requests, const char* what, Clock::time_point start, bool busy = false) {
    for (int spins = 0;; ++spins) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) break;
      if (busy) {
        if (spins > 1000) sched_yield();
      } else if (spins > 100) {
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(100, (spins - 100) * 5)));
      }
      const double waited = seconds_since(start);
      if (waited > timeout_s_) timed_out(what, waited);
    }
  }

  void account(Clock::time_point start) {
    ++collectives_;
    collective_seconds_ += seconds_since(start);
  }

  [[noreturn]] void timed_out(const char* what, double waited) const {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", waited);
    fail("distributed: ", what, at_step(), " waited ", secs, " s for the other ranks (timeout ", timeout_s_, " s, --dist-timeout): another rank died or hung; aborting the job");
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<char>> host_;
  int64_t collectives_ = 0;
  double collective_seconds_ = 0, transfer_seconds_ = 0;
};

#endif  // PHASOR_WITH_MPI

// ------------------------------------------------------------ NCCL

#ifdef PHASOR_WITH_NCCL

// Gradients on a GPU are averaged by NCCL on device buffers; MPI carries only
// NCCL's unique id (once), the scalars and barriers.
//
// Two streams take part: Phasor's (gpu::stream()), on which the backend queues
// every kernel and copy, the gradients' and the contiguous staging copies of
// strided gradients made here; and NCCL's own (stream_), which copies the
// gradients into the flat buffer, all-reduces it and copies the means back.
// Nothing orders two streams but events: NCCL's stream waits for `staged_`,
// recorded on Phasor's stream once every staging copy is queued, before it reads
// a gradient; Phasor's stream waits for `reduced_`, recorded on NCCL's after the
// copies back, before anything later (the copies into strided gradients, the
// optimizer) reads one.
class NcclCommunicator final : public MpiCommunicator {
 public:
  ~NcclCommunicator() override {
    if (nccl_ != nullptr) ncclCommDestroy(nccl_);
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (staged_ != nullptr) cudaEventDestroy(staged_);
    if (reduced_ != nullptr) cudaEventDestroy(reduced_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  const char* transport() const override { return "nccl"; }

  void all_reduce_mean(const std::vector<Tensor>& grads) override {
    if (grads.empty()) return;
    const auto start = Clock::now();
    const Device device = grads.front().device();
    for (const Tensor& g : grads)
      PHASOR_CHECK(g.defined() && g.device() == device && device.is_cuda(),
                   "distributed: the nccl transport averages GPU gradients, but a gradient is on ",
                   g.defined() ? g.device() : kCPU, "; train on a GPU (--device cuda) or use --distributed mpi");
    cuda_check(cudaSetDevice(device.index), "cudaSetDevice");
    if (nccl_ == nullptr) connect(start);
    const cudaStream_t phasor_stream = gpu::stream();

    std::vector<Flat> flats = plan_flat(grads, "all_reduce_mean");
    size_t bytes = 0;
    for (const Flat& f : flats) bytes += f.count * itemsize(f.dtype);
    if (bytes > capacity_) {
      if (buffer_ != nullptr) cuda_check(cudaFree(buffer_), "cudaFree");
      buffer_ = nullptr;
      cuda_check(cudaMalloc(&buffer_, bytes), "cudaMalloc");
      capacity_ = bytes;
    }
    // Contiguous copies of strided gradients, queued on Phasor's stream (the
    // gradient itself when it is contiguous); NCCL's stream starts once they
    // and everything queued before them (the backward pass) are done.
    for (Flat& f : flats)
      for (Piece& p : f.pieces) p.staging = ops::contiguous(p.grad);
    cuda_check(cudaEventRecord(staged_, phasor_stream), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(stream_, staged_, 0), "cudaStreamWaitEvent");

    // From here NCCL's stream may use the staging tensors: if anything fails,
    // they must not go back to the caching allocator (to be reused by Phasor's
    // stream) while it still can. quiesce() aborts the communicator (NCCL's
    // kernels then end) and waits for NCCL's stream before they are released.
    try {
      queue_reduction(flats);
      cuda_check(cudaEventRecord(reduced_, stream_), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(phasor_stream, reduced_, 0), "cudaStreamWaitEvent");
      wait_stream("all_reduce_mean", start);
    } catch (...) {
      quiesce();
      throw;
    }
    for (Flat& f : flats)
      for (Piece& p : f.pieces)
        if (!p.staging.same_storage(p.grad)) ops::copy_(p.grad, p.staging);  // on Phasor's stream
  }

 private:
  // Gradients into the flat buffer, the all-reduce, the means back: on NCCL's stream.
  void queue_reduction(std::vector<Flat>& flats) {
    char* base = static_cast<char*>(buffer_);
    for (Flat& f : flats) {
      const size_t item = itemsize(f.dtype);
      for (Piece& p : f.pieces)
        cuda_check(cudaMemcpyAsync(base + p.offset * item, p.staging.raw_data(), p.count * item, cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync");
      const size_t bucket = std::max<size_t>(1, bucket_bytes_ / item);
      for (size_t first = 0; first < f.count; first += bucket)
        nccl_check(ncclAllReduce(base + first * item, base + first * item, std::min(bucket, f.count - first),
                                 f.dtype == DType::Float32 ? ncclFloat32 : ncclFloat64, ncclAvg, nccl_, stream_),
                   "ncclAllReduce");
      for (Piece& p : f.pieces)
        cuda_check(cudaMemcpyAsync(p.staging.raw_data(), base + p.offset * item, p.count * item, cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync");
      base += f.count * item;
    }
    // Phasor's stream reads the means only after NCCL's stream wrote them (the
    // event, recorded by the caller). The host waits as well: the watchdog needs
    // it, and the staging tensors, whose memory NCCL's stream uses, must outlive that use.
  }

  // After a failure with work queued on NCCL's stream: no kernel of it may
  // still run when the staging tensors are freed. A failed communicator is
  // aborted (its kernels return); later calls connect a new one.
  void quiesce() noexcept {
    if (nccl_ != nullptr) ncclCommAbort(nccl_);
    nccl_ = nullptr;
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    cudaGetLastError();
  }

  void connect(Clock::time_point start) {
    // Ranks sharing a node must not share a GPU (NCCL refuses duplicate devices).
    ncclUniqueId id;
    if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::vector<MPI_Request> r(1);
    check(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, comm_, &r[0]), "MPI_Ibcast");
    wait(r, "nccl unique id broadcast", start);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming), "cudaEventCreate");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a missing peer hits our deadline instead of hanging
    nccl_check(ncclCommInitRankConfig(&nccl_, world_, id, rank_, &config), "ncclCommInitRankConfig");
    for (;;) {
      ncclResult_t state = ncclSuccess;
      nccl_check(ncclCommGetAsyncError(nccl_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) nccl_check(state, "ncclCommInitRankConfig");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (seconds_since(start) > timeout_s_) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        timed_out("nccl communicator setup", seconds_since(start));
      }
    }
  }

  void wait_stream(const char* what, Clock::time_point start) {
    for (int spins = 0;; ++spins) {
      const cudaError_t s = cudaStreamQuery(stream_);
      if (s == cudaSuccess) return;
      if (s != cudaErrorNotReady) cuda_check(s, "cudaStreamQuery");
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(nccl_, &state);
      if (state != ncclSuccess && state != ncclInProgress) nccl_check(state, what);
      if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (seconds_since(start) > timeout_s_) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        timed_out(what, seconds_since(start));
      }
    }
  }

  void cuda_check(cudaError_t rc, const char* call) const {
    if (rc != cudaSuccess) fail("distributed: ", call, " failed", at_step(), ": ", cudaGetErrorString(rc));
  }
  void nccl_check(ncclResult_t rc, const char* call) const {
    if (rc != ncclSuccess && rc != ncclInProgress)
      fail("distributed: ", call, " failed", at_step(), ": ", ncclGetErrorString(rc));
  }

  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t staged_ = nullptr, reduced_ = nullptr;  // see the class comment
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
};

#endif  // PHASOR_WITH_NCCL

#ifdef PHASOR_WITH_NCCL
// Before anything touches CUDA: give each rank on a node its own GPU unless the
// launcher (srun --gpus-per-task, a wrapper) already chose.
void pick_gpu_per_local_rank() {
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) return;
  int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", -1)));
  int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", env_int("SLURM_NTASKS_PER_NODE", 1)));
  if (local >= 0 && local_size > 1) setenv("CUDA_VISIBLE_DEVICES", std::to_string(local).c_str(), 1);
}
#endif

}  // namespace

// ------------------------------------------------------------ entry points

void Communicator::average_gradients(const std::vector<Tensor>& params) {
  if (world_ == 1) return;
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  all_reduce_mean(grads);
}

std::vector<std::string> built_transports() {
  std::vector<std::string> t{"single"};
#ifdef PHASOR_WITH_MPI
  t.push_back("mpi");
#endif
#ifdef PHASOR_WITH_NCCL
  t.push_back("nccl");
#endif
  return t;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int n = env_int(name, 0);
    if (n > 0) return n;
  }
  return 1;
}

Communicator& world() { return *world_slot(); }

Communicator& init_distributed(const DistributedOptions& o) {
  PHASOR_CHECK(o.mode == "auto" || o.mode == "off" || o.mode == "mpi" || o.mode == "nccl",
               "--distributed must be auto, off, mpi or nccl, got '", o.mode, "'");
  PHASOR_CHECK(o.timeout_s > 0, "--dist-timeout must be positive, got ", o.timeout_s);
  PHASOR_CHECK(std::string(world().transport()) == "single" && world().world_size() == 1,
               "distributed: already initialised");
  const int launched = launcher_world_size();
  std::string mode = o.mode;
  if (mode == "auto") mode = launched > 1 ? "mpi" : "off";
  std::string built;
  for (const std::string& t : built_transports()) built += (built.empty() ? "" : ", ") + t;
  if (mode == "mpi") {
#ifdef PHASOR_WITH_MPI
    world_slot() = std::make_unique<MpiCommunicator>();
#else
    fail("distributed: ", o.mode == "auto" ? "launched as one of " + std::to_string(launched) + " processes, but " : std::string(),
         "this phasor was built without MPI (built transports: ", built,
         "); install an MPI (libopenmpi-dev), re-run cmake and rebuild, or run a single process");
#endif
  } else if (mode == "nccl") {
#ifdef PHASOR_WITH_NCCL
    pick_gpu_per_local_rank();
    world_slot() = std::make_unique<NcclCommunicator>();
#else
    fail("distributed: --distributed nccl is not built into this phasor (built transports: ", built,
         "); it needs MPI, the CUDA toolkit with NCCL and the CUDA backend at cmake time");
#endif
  }
  world().set_timeout_s(o.timeout_s);
  return world();
}

void finalize_distributed() {
#ifdef PHASOR_WITH_MPI
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(world_slot().get())) mpi->finalize();
#endif
}

}  // namespace phasor
