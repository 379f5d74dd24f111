#include "app/distributed_mpi.h"

#ifdef PHASOR_WITH_MPI

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "app/distributed_flat.h"
#include "tensor/ops.h"

namespace phasor::distributed {

MpiCommunicator::MpiCommunicator() {
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

void MpiCommunicator::all_reduce_mean(const std::vector<Tensor>& grads) {
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
  check_counts("all_reduce_mean", kAllReduceMean, flat_counts(flats, bucket_bytes_), start);
  const auto transfer = Clock::now();
  std::vector<MPI_Request> requests;
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

void MpiCommunicator::all_reduce_sum(std::vector<double>& values) {
  if (values.empty()) return;
  const auto start = Clock::now();
  check_counts("all_reduce_sum", kAllReduceSum, {static_cast<int64_t>(values.size())}, start);
  std::vector<MPI_Request> r(1);
  check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, comm_, &r[0]),
        "MPI_Iallreduce");
  wait(r, "all_reduce_sum", start);
  account(start);
}

void MpiCommunicator::all_reduce_max(std::vector<int64_t>& values) {
  if (values.empty()) return;
  const auto start = Clock::now();
  std::vector<MPI_Request> r(1);
  check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX, comm_, &r[0]),
        "MPI_Iallreduce");
  wait(r, "all_reduce_max", start);
  account(start);
}

void MpiCommunicator::check_counts(const char* what, int64_t kind, const std::vector<int64_t>& counts, Clock::time_point start) {
  // A fixed number of values whatever the collective, so that ranks in
  // different collectives still meet in this one and see it.
  PHASOR_CHECK(counts.size() <= 3, "distributed: check_counts takes at most 3 counts");
  std::vector<int64_t> values{kind, 0, 0, 0};
  std::copy(counts.begin(), counts.end(), values.begin() + 1);
  std::vector<int64_t> both(values);
  for (int64_t v : values) both.push_back(-v);
  std::vector<MPI_Request> r(1);
  check(MPI_Iallreduce(MPI_IN_PLACE, both.data(), static_cast<int>(both.size()), MPI_INT64_T, MPI_MAX, comm_, &r[0]), "MPI_Iallreduce");
  wait(r, what, start);
  if (both[0] != -both[4])
    fail("distributed: ", what, at_step(), ": the ranks are in different collectives; their programs or options differ");
  for (size_t i = 1; i < 4; ++i)
    if (both[i] != -both[4 + i])
      fail("distributed: ", what, at_step(), ": the ranks pass different element counts (from ", -both[4 + i], " to ", both[i],
           "; this rank ", values[i], "); their models or options differ");
}

void MpiCommunicator::barrier() {
  const auto start = Clock::now();
  std::vector<MPI_Request> r(1);
  check(MPI_Ibarrier(comm_, &r[0]), "MPI_Ibarrier");
  wait(r, "barrier", start);
  account(start);
}

void MpiCommunicator::abort(int code) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void MpiCommunicator::finalize() {
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

void MpiCommunicator::check(int rc, const char* call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("distributed: ", call, " failed", at_step(), ": ", text, " (another rank may have died)");
}

void MpiCommunicator::wait(std::vector<MPI_Request>& requests, const char* what, Clock::time_point start, bool busy) {
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

void MpiCommunicator::account(Clock::time_point start) {
  ++collectives_;
  collective_seconds_ += seconds_since(start);
}

void MpiCommunicator::timed_out(const char* what, double waited) const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", waited);
  fail("distributed: ", what, at_step(), " waited ", secs, " s for the other ranks (timeout ", timeout_s_, " s, --dist-timeout): another rank died or hung; aborting the job");
}

}  // namespace phasor::distributed

#endif  // PHASOR_WITH_MPI
