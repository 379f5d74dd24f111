#include "app/distributed_nccl.h"

#ifdef PHASOR_WITH_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <thread>

#include "app/distributed_flat.h"
#include "app/distributed_mpi.h"
#include "cuda/cuda.h"  // gpu::native_stream(): the one stream Phasor's CUDA backend queues everything on
#include "tensor/ops.h"

namespace phasor::distributed {

namespace {

// Gradients on a GPU are averaged by NCCL on device buffers; MPI carries only
// NCCL's unique id (once), the scalars and barriers.
//
// Two streams take part: Phasor's (gpu::native_stream()), on which the backend
// queues every kernel and copy, the gradients' and the contiguous staging
// copies of strided gradients made here; and NCCL's own (stream_), which copies the
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
    const cudaStream_t phasor_stream = gpu::native_stream();

    std::vector<Flat> flats = plan_flat(grads, "all_reduce_mean");
    check_counts("all_reduce_mean", kAllReduceMean, flat_counts(flats, bucket_bytes_), start);  // NCCL would overrun otherwise
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

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator() { return std::make_unique<NcclCommunicator>(); }

}  // namespace phasor::distributed

#endif  // PHASOR_WITH_NCCL
