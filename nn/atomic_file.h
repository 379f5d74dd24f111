#pragma once
// Crash-safe file writing: a reader of `path` sees either the old contents or
// the new ones, never a torn mix, even if the process or machine dies mid-write.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace phasor {

// Writes `bytes` to `path + ".tmp.<pid>"`, fsyncs it, renames it over `path`,
// then fsyncs the folder so the rename itself is durable. On any failure throws
// phasor::Error naming the path and the system error, removes the temporary
// file and leaves an existing `path` untouched.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Reads a whole file; throws phasor::Error naming the path if it is missing or unreadable.
std::string read_file_bytes(const std::string& path);

// Test hook: when set, write_file_atomic fails as if the disk filled up (ENOSPC)
// once n bytes of the temporary file were written. std::nullopt turns it off.
void set_write_fault_after_bytes(std::optional<size_t> n);

}  // namespace phasor
