#include "nn/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tensor/error.h"

namespace phasor {
namespace {

constexpr long long kNoFault = -1;
std::atomic<long long> g_fault_after_bytes{kNoFault};

[[noreturn]] void fail_io(const char* action, const std::string& path, int err) {
  fail("cannot ", action, " '", path, "': ", std::strerror(err));
}

// Closes the descriptor on every path out of a scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now so a deferred write error reported by close() is not lost.
  int close_checked() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// How many of the next `wanted` bytes may be written before the injected fault fires.
size_t bytes_allowed_by_fault(size_t already_written, size_t wanted) {
  long long limit = g_fault_after_bytes.load();
  if (limit == kNoFault) return wanted;
  size_t budget = static_cast<size_t>(limit);
  return already_written >= budget ? 0 : std::min(wanted, budget - already_written);
}

// Writes every byte, retrying short writes and EINTR; returns 0 or an errno.
int write_all(int fd, std::string_view bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    size_t chunk = bytes_allowed_by_fault(written, bytes.size() - written);
    if (chunk == 0) return ENOSPC;
    ssize_t n = ::write(fd, bytes.data() + written, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;  // no progress: treat as a full disk rather than loop forever
    written += static_cast<size_t>(n);
  }
  return 0;
}

// Writes, syncs and closes the temporary file; throws without cleaning up.
void write_and_sync(const std::string& tmp_path, std::string_view bytes) {
  FileDescriptor file(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (file.get() < 0) fail_io("create", tmp_path, errno);
  if (int err = write_all(file.get(), bytes)) fail_io("write", tmp_path, err);
  if (::fsync(file.get()) != 0) fail_io("sync", tmp_path, errno);
  if (file.close_checked() != 0) fail_io("close", tmp_path, errno);
}

std::string parent_folder(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Makes the rename durable. Some filesystems cannot sync a folder (EINVAL); that
// is no worse than not trying, so only real I/O errors are reported.
void sync_folder(const std::string& folder) {
  FileDescriptor dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) fail_io("open folder", folder, errno);
  if (::fsync(dir.get()) != 0 && errno != EINVAL) fail_io("sync folder", folder, errno);
}

}  // namespace

void set_write_fault_after_bytes(std::optional<size_t> n) {
  g_fault_after_bytes.store(n ? static_cast<long long>(*n) : kNoFault);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp_path = path + ".tmp." + std::to_string(::getpid());
  try {
    write_and_sync(tmp_path, bytes);
    if (::rename(tmp_path.c_str(), path.c_str()) != 0) fail_io("rename into", path, errno);
  } catch (...) {
    ::unlink(tmp_path.c_str());
    throw;
  }
  sync_folder(parent_folder(path));
}

std::string read_file_bytes(const std::string& path) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) fail_io("open", path, errno);
  std::string bytes;
  struct stat info {};
  if (::fstat(file.get(), &info) == 0 && info.st_size > 0) bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(file.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("read", path, errno);
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace phasor
