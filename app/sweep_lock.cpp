#include "app/sweep_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "tensor/error.h"

namespace phasor {

namespace {

std::string lock_path(const std::string& out_dir) { return out_dir + "/sweep.lock"; }

// The pid written in a lock file, or 0.
long holder_of(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::strtol(buf, nullptr, 10) : 0;
}

// Opens the lock file (O_CLOEXEC: the cells the sweep starts do not inherit it,
// so the lock dies with the sweep alone).
int open_lock(const std::string& out_dir) {
  const int fd = ::open(lock_path(out_dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  PHASOR_CHECK(fd >= 0, "sweep: cannot open ", lock_path(out_dir), " (", std::strerror(errno), ")");
  return fd;
}

}  // namespace

SweepLock SweepLock::acquire(const std::string& out_dir) {
  const int fd = open_lock(out_dir);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const long pid = holder_of(fd);
    ::close(fd);
    fail("sweep: '", out_dir, "' is in use by another sweep (pid ", pid, "); wait for it to finish or stop it");
  }
  const std::string pid = std::to_string(static_cast<long>(::getpid())) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    ::close(fd);
    fail("sweep: cannot write ", lock_path(out_dir), " (", std::strerror(errno), ")");
  }
  return SweepLock(fd);
}

SweepLock SweepLock::for_cell(const std::string& out_dir) {
  const int fd = open_lock(out_dir);
  const pid_t parent = ::getppid();
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && holder_of(fd) == static_cast<long>(parent)) {
    ::close(fd);
    // The sweep that started this cell holds the lock: stop when it dies, even
    // by SIGKILL (it stops its cells itself on SIGTERM, SIGINT and SIGHUP).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) std::raise(SIGTERM);  // it died before the line above
    return SweepLock(-1);
  }
  ::close(fd);
  return acquire(out_dir);
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);  // drops the flock; the file stays, harmless to the next sweep
}

}  // namespace phasor
