#pragma once
// Data-parallel training across processes: which rank this process is, and the
// collectives the training loop needs (gradient averaging, a few scalars, a
// barrier). Three transports sit behind one interface:
//
//   single  one process; every collective is the identity (always built)
//   mpi     MPI between processes, gradients staged in host memory (built when
//           CMake finds MPI: PHASOR_WITH_MPI)
//   nccl    NCCL all-reduce on GPU buffers, MPI only to exchange NCCL's unique
//           id and for the scalars (built when MPI, the CUDA toolkit and NCCL
//           are all found: PHASOR_WITH_NCCL)
//
// mpi and nccl are the library phasor_mpi (Phasor::mpi), present in a program
// that links it (app/distributed_transports.h); the `phasor` CLI does.
//
// Every collective has a deadline (`timeout_s`): a rank that waits longer for
// the others (one died or hung) throws phasor::Error naming the collective, the
// step and the wait; the command line then prints it and aborts the whole job,
// so no rank is left hanging. See docs/distributed.md.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace phasor {

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool is_root() const { return rank_ == 0; }
  // "single", "mpi" or "nccl".
  virtual const char* transport() const = 0;

  // Replaces each gradient by its mean over all ranks, in place. Gradients are
  // flattened into buckets of about `bucket_bytes` (complex ones as pairs of
  // reals) and each bucket is all-reduced. Every rank must pass gradients of
  // the same shapes and dtypes in the same order.
  virtual void all_reduce_mean(const std::vector<Tensor>& grads) = 0;
  // all_reduce_mean of the .grad of every parameter that has one; nothing for one process.
  void average_gradients(const std::vector<Tensor>& params);
  // Element-wise sum over all ranks of a few host doubles (losses, flags).
  virtual void all_reduce_sum(std::vector<double>& values) = 0;
  // Element-wise maximum over all ranks of a few host integers. Its count is
  // not checked: callers pass a count fixed by the code (same_on_every_rank).
  virtual void all_reduce_max(std::vector<int64_t>& values) = 0;
  // Whether every rank passed the same `values` (of a count fixed by the
  // code); every rank gets the same answer. lo and hi, when given, receive the
  // smallest and largest of each value over the ranks.
  bool same_on_every_rank(const std::vector<int64_t>& values, std::vector<int64_t>* lo = nullptr, std::vector<int64_t>* hi = nullptr);
  virtual void barrier() = 0;
  // Ends the whole job (every rank) with this exit code; never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }
  size_t bucket_bytes() const { return bucket_bytes_; }
  void set_bucket_bytes(size_t bytes) { bucket_bytes_ = bytes > 0 ? bytes : 1; }
  // The training step, named in timeout messages.
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

 protected:
  int rank_ = 0, world_ = 1;
  double timeout_s_ = 300.0;
  size_t bucket_bytes_ = size_t{4} << 20;
  int64_t step_ = -1;
};

struct DistributedOptions {
  // auto: MPI when a launcher (mpirun, srun) started more than one process,
  //       otherwise single; off: single even under a launcher;
  // mpi:  MPI, even with one process; nccl: NCCL for GPU gradients.
  std::string mode = "auto";
  double timeout_s = 300.0;
};

// Sets up the process-wide communicator once (before any collective).
// Throws phasor::Error when the mode is unknown or its transport was not built.
Communicator& init_distributed(const DistributedOptions& options);
// The process-wide communicator: the single-process one until init_distributed.
Communicator& world();
// Leaves MPI cleanly (every rank must call it); a no-op without MPI.
void finalize_distributed();

// At start-up: each part (what it is, its text) is hashed and the ranks
// compare the hashes; where one differs, every rank throws the same line naming
// it ("distributed: the ranks were started with different <what>; ..."). Ranks
// that disagree on the model would all-reduce gradients of other sizes, and on
// the seed, learning rate or data would train on silently.
void require_ranks_agree(const std::vector<std::pair<std::string, std::string>>& parts);

// The transports this build has, e.g. {"single", "mpi"}.
std::vector<std::string> built_transports();
// The number of processes a launcher started, from its environment
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE); 1 when not launched by one.
int launcher_world_size();

}  // namespace phasor
