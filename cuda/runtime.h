#pragma once
// Internal plumbing of the CUDA backend: the device, its one stream, the
// cuBLAS handle, the caching allocator and error checks. Host C++ only.
#include <cuda_runtime_api.h>

#include "cuda/cuda.h"
#include "tensor/error.h"

struct cublasContext;

namespace phasor::gpu {

// Throws phasor::Error naming `what` when a CUDA runtime call failed.
void check(cudaError_t status, const char* what);
#define PHASOR_CUDA_CHECK(expr) ::phasor::gpu::check((expr), #expr)
// After a kernel launch: a launch error becomes a phasor::Error naming the kernel.
void check_launch(const char* kernel);

// Initialises the device on first use; throws a clear phasor::Error when no GPU is present.
void ensure_device();
cudaStream_t stream();
cublasContext* cublas();
int multiprocessors();

// Scratch memory from the caching allocator, freed (returned to the cache) on scope exit.
// Safe with the one stream: a later kernel reusing the block runs after the current one.
class Buffer {
 public:
  explicit Buffer(size_t nbytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t nbytes_ = 0;
};

// Host <-> device copies on Phasor's stream (to host: synchronous, and it
// raises a recorded index fault).
void copy_to_device(void* dst, const void* src, size_t nbytes);
void copy_to_host(void* dst, const void* src, size_t nbytes);

// An index out of range, found by a kernel (the index kernels of cuda/index.cu, and cross-entropy's in cuda/fused.cu) so that no op reads
// its indices on the host: the first one is recorded in pinned memory the
// device writes, and the host raises it after its next synchronisation
// (copy_to_host, synchronize) with the message the CPU gives at once.
enum class IndexOp : int64_t { None = 0, IndexSelect, IndexAdd, Gather, ScatterAdd, CrossEntropy };
struct IndexFault {
  int64_t op;        // an IndexOp; None while nothing is recorded
  int64_t position;  // the flat position of the bad index (cross_entropy: its row)
  int64_t value, dim, size;
};
IndexFault* index_fault();  // the device's pointer to the record
// Throws (and clears) a recorded fault; call only after the stream has been synchronised.
void raise_index_fault();

}  // namespace phasor::gpu
