#include "nn/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

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

// How many bytes a crash-safe write may put down before the injected fault
// fires (set_write_fault_after_bytes): all of them when none is set.
size_t fault_budget() {
  const long long limit = g_fault_after_bytes.load();
  return limit == kNoFault ? SIZE_MAX : static_cast<size_t>(limit);
}

// Writes every byte, retrying short writes and EINTR; returns 0 or an errno
// (ENOSPC once `budget` bytes are written, as a disk that fills there).
int write_all(int fd, std::string_view bytes, size_t budget = SIZE_MAX) {
  size_t written = 0;
  while (written < bytes.size()) {
    const size_t chunk = written >= budget ? 0 : std::min(bytes.size() - written, budget - written);
    if (chunk == 0) return ENOSPC;
    ssize_t n = ::write(fd, bytes.data() + written, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;  // no progress: treat as a full disk rather than loop forever
    written += static_cast<size_t>(n);
  }
  return 0;
}

// 64 unpredictable bits, so no other user can plant a file under the
// temporary's name before it is created.
uint64_t random_bits() {
  uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) == static_cast<ssize_t>(sizeof bits)) return bits;
  std::random_device device;  // getrandom unavailable (an old kernel): the C++ library's entropy source
  return (uint64_t{device()} << 32) ^ device();
}

// Creates a new temporary file next to `path` (never an existing one, never
// through a symlink); returns its descriptor and sets tmp_path.
int create_temporary(const std::string& path, std::string& tmp_path) {
  for (int attempt = 0;; ++attempt) {
    char suffix[48];
    std::snprintf(suffix, sizeof suffix, ".tmp.%ld-%016llx", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(random_bits()));
    tmp_path = path + suffix;
    const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST || attempt == 100) return fd;
  }
}

// Writes, syncs and closes a new temporary file; throws without cleaning up
// (tmp_path names the file once it exists).
void write_and_sync(const std::string& path, std::string& tmp_path, std::string_view bytes) {
  std::string trying;
  FileDescriptor file(create_temporary(path, trying));
  if (file.get() < 0) fail_io("create", trying, errno);
  tmp_path = trying;
  if (int err = write_all(file.get(), bytes, fault_budget())) fail_io("write", tmp_path, err);
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
  std::string tmp_path;
  try {
    write_and_sync(path, tmp_path, bytes);
    if (::rename(tmp_path.c_str(), path.c_str()) != 0) fail_io("rename into", path, errno);
  } catch (...) {
    if (!tmp_path.empty()) ::unlink(tmp_path.c_str());
    throw;
  }
  sync_folder(parent_folder(path));
}

AppendFile::AppendFile(const std::string& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666)), path_(path) {
  if (fd_ < 0) fail_io("open", path, errno);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

void AppendFile::write(std::string_view bytes) {
  PHASOR_CHECK(fd_ >= 0, "cannot write '", path_, "': not open");
  if (const int err = write_all(fd_, bytes)) fail_io("write", path_, err);  // no injected fault: only saves take one
}

LastLineRepair repair_last_line(const std::string& path, const std::function<bool(std::string_view)>& whole) {
  FileDescriptor file(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) {
    if (errno == ENOENT) return {};
    fail_io("open", path, errno);
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) fail_io("read", path, errno);
  if (!S_ISREG(info.st_mode) || info.st_size == 0) return {};
  const auto size = static_cast<uint64_t>(info.st_size);
  // The last line, read backwards in chunks until the '\n' before it.
  std::string line;
  uint64_t start = 0;  // where the last line begins
  bool newline_at_end = false;
  char buffer[1 << 16];
  for (uint64_t pos = size; pos > 0;) {
    const uint64_t n = std::min<uint64_t>(pos, sizeof buffer);
    pos -= n;
    const ssize_t got = ::pread(file.get(), buffer, n, static_cast<off_t>(pos));
    if (got < 0 && errno == EINTR) {
      pos += n;
      continue;
    }
    if (got != static_cast<ssize_t>(n)) fail_io("read", path, got < 0 ? errno : EIO);
    std::string_view chunk(buffer, n);
    if (pos + n == size && chunk.back() == '\n') {  // the file's final '\n' ends the last line
      newline_at_end = true;
      chunk.remove_suffix(1);
    }
    const size_t at = chunk.rfind('\n');
    if (at != std::string_view::npos) {
      start = pos + at + 1;
      line.insert(0, chunk.substr(at + 1));
      break;
    }
    line.insert(0, chunk);
  }
  if (line.find_first_not_of(" \t\r") == std::string::npos) return {};  // a blank line: nothing was cut short
  if (whole(line)) {
    if (newline_at_end) return {};
    if (::pwrite(file.get(), "\n", 1, static_cast<off_t>(size)) != 1) fail_io("write", path, errno);
    if (::fsync(file.get()) != 0) fail_io("write", path, errno);
    return {0, true};
  }
  if (::ftruncate(file.get(), static_cast<off_t>(start)) != 0 || ::fsync(file.get()) != 0) fail_io("truncate", path, errno);
  return {size - start, false};
}

std::string read_file_bytes(const std::string& path, uint64_t max_bytes, std::string_view limit_text) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) fail_io("open", path, errno);
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) fail_io("read", path, errno);
  if (S_ISDIR(info.st_mode)) fail_io("read", path, EISDIR);
  PHASOR_CHECK(S_ISREG(info.st_mode), "cannot read '", path, "': not a regular file (",
               S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode) ? "a device" : "a socket or other special file",
               "); give a regular file");
  const std::string limit = limit_text.empty() ? std::to_string(max_bytes) + " bytes" : std::string(limit_text);
  const auto refuse_size = [&](uint64_t size) { fail("'", path, "' is ", size, " bytes, more than the limit of ", limit); };
  if (static_cast<uint64_t>(info.st_size) > max_bytes) refuse_size(static_cast<uint64_t>(info.st_size));
  std::string bytes;
  bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(file.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("read", path, errno);
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) refuse_size(bytes.size());  // a file that grew while being read
  }
}

}  // namespace phasor
