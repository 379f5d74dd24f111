#pragma once
// The MPI transport of data-parallel training (app/distributed.h): gradients
// staged in host memory and all-reduced by MPI, every collective under the
// deadline. The NCCL transport (app/distributed_nccl.cpp) builds on it. Only
// sources compiled with MPI (PHASOR_WITH_MPI, CMakeLists.txt) see its content.
#ifdef PHASOR_WITH_MPI
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "app/distributed.h"

namespace phasor::distributed {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override { finalize(); }
  const char* transport() const override { return "mpi"; }

  void all_reduce_mean(const std::vector<Tensor>& grads) override;
  void all_reduce_sum(std::vector<double>& values) override;
  void all_reduce_max(std::vector<int64_t>& values) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;
  void finalize();
  MPI_Comm comm() const { return comm_; }

 protected:
  void check(int rc, const char* call) const;
  std::string at_step() const { return step_ >= 0 ? " at step " + std::to_string(step_) : std::string(); }

  // The watchdog: polls the requests until all complete or the deadline passes.
  // MPI moves a non-blocking collective forward only inside MPI calls. A large
  // all-reduce takes many rounds between the ranks, so once every rank is known
  // to be there (`busy`) polling never naps: a nap per round would cost more
  // than the transfer. Otherwise (waiting for ranks still computing, or a
  // collective of a few rounds) it naps between polls, up to 100 us, so a
  // waiting rank leaves the core to those still computing.
  void wait(std::vector<MPI_Request>& requests, const char* what, Clock::time_point start, bool busy = false);
  void account(Clock::time_point start);
  // Before a collective moves data: every rank must be in the same collective
  // (`kind`) with the same element counts (`counts`: per dtype, and the bucket
  // size that splits them), or MPI and NCCL would read and write past the
  // buffers of the rank with fewer. Throws the same line on every rank
  // otherwise. It waits for every rank, so it is also the barrier before the transfer.
  void check_counts(const char* what, int64_t kind, const std::vector<int64_t>& counts, Clock::time_point start);
  [[noreturn]] void timed_out(const char* what, double waited) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<char>> host_;
  int64_t collectives_ = 0;
  double collective_seconds_ = 0, transfer_seconds_ = 0;
};

}  // namespace phasor::distributed

#endif  // PHASOR_WITH_MPI
