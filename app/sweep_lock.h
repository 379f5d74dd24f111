#pragma once
// One sweep folder, one sweep (app/sweep.h): an exclusive flock on
// DIR/sweep.lock, held for the sweep's life, with the holder's pid written in
// it for the refusal's message. The kernel drops a flock when its process
// dies, however it dies, so a lock left by a dead sweep is simply taken over.
// The sweep's own cells (its children, `sweep --cell`) run under its lock; any
// other process on the folder, a second sweep or a hand-started cell, is refused.
#include <string>

namespace phasor {

class SweepLock {
 public:
  // The lock of out_dir (which must exist). phasor::Error, one line, when
  // another process holds it: "sweep: '<dir>' is in use by another sweep
  // (pid N); wait for it to finish or stop it".
  static SweepLock acquire(const std::string& out_dir);
  // For `sweep --cell`: nothing to take when the holder is this process's
  // parent (the sweep that started it; the cell then stops with SIGTERM when
  // that parent dies); otherwise the lock itself, as acquire().
  static SweepLock for_cell(const std::string& out_dir);

  SweepLock(SweepLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  SweepLock& operator=(SweepLock&&) = delete;
  SweepLock(const SweepLock&) = delete;
  ~SweepLock();

 private:
  explicit SweepLock(int fd) : fd_(fd) {}
  int fd_ = -1;  // -1: a cell under its parent's lock
};

}  // namespace phasor
