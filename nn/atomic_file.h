#pragma once
// Crash-safe file writing: a reader of `path` sees either the old contents or
// the new ones, never a torn mix, even if the process or machine dies mid-write.
// And bounded reading: only regular files, never more than a stated size.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace phasor {

// Writes `bytes` to a new temporary file next to `path` (`path.tmp.<pid>-<random
// hex>`, created with O_CREAT | O_EXCL | O_NOFOLLOW, so a file or symlink planted
// under a guessable name is never opened or followed), fsyncs it, renames it
// over `path` (replacing a symlink there rather than writing through it), then
// fsyncs the folder so the rename itself is durable. On any failure throws
// phasor::Error naming the path and the system error, removes the temporary
// file and leaves an existing `path` untouched.
void write_file_atomic(const std::string& path, std::string_view bytes);

// A log that grows line by line (a run's log.jsonl). Opened with O_APPEND |
// O_NOFOLLOW (a symlink planted at `path` is refused, not followed); every
// write is checked, so a full disk is an error rather than a silent gap.
class AppendFile {
 public:
  AppendFile() = default;
  explicit AppendFile(const std::string& path);  // throws phasor::Error if it cannot be opened
  ~AppendFile();
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  bool is_open() const { return fd_ >= 0; }
  void write(std::string_view bytes);  // all of them, or phasor::Error naming the file

 private:
  int fd_ = -1;
  std::string path_;
};

// What repair_last_line found at the end of a log.
struct LastLineRepair {
  uint64_t dropped = 0;       // bytes of a last line cut off (0: none was)
  bool completed = false;     // a whole last line lacked its '\n', which was added
};

// The end of a line-by-line log (a run's log.jsonl) that a write cut short (a
// full disk, a killed process) left with a partial last line, which the next
// line appended would join: the last line (the bytes after the last '\n' but
// the file's final one) is given to `whole`; a line it refuses is cut off (the
// file truncated to where it starts), and a line it accepts that lacks its
// '\n' gets one. A missing or empty file, or one that is not a regular file,
// is left as it is; a symlink is refused as AppendFile refuses it (O_NOFOLLOW).
LastLineRepair repair_last_line(const std::string& path, const std::function<bool(std::string_view)>& whole);

// The largest file read_file_bytes reads unless told otherwise: 32 GiB, twice
// the optimizer state of the largest model Phasor builds (2^31 parameters).
inline constexpr uint64_t kMaxReadBytes = uint64_t{1} << 35;

// Reads a whole regular file. Throws phasor::Error naming the path if it is
// missing or unreadable, if it is not a regular file (a folder, a FIFO, a
// device or socket: opened without blocking, then refused), or if it holds
// more than `max_bytes` ("'<path>' is N bytes, more than the limit of
// <limit_text>"; limit_text defaults to "<max_bytes> bytes").
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = kMaxReadBytes, std::string_view limit_text = {});

// Test hook: when set, write_file_atomic fails as if the disk filled up (ENOSPC)
// once n bytes of the temporary file were written. std::nullopt turns it off.
void set_write_fault_after_bytes(std::optional<size_t> n);

}  // namespace phasor
