#pragma once
// Storage: one allocation on one device, shared by every view of it.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace phasor {

// Each device registers one allocator; the CPU one is built in, the CUDA
// backend installs its caching allocator when it is linked and a GPU exists.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};
Allocator* allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

// Bytes held by live tensor storages of one device type, and the most held at
// once since the last reset: what a memory bound is measured against (the
// allocator's view, not the process's RSS, which also counts freed heap pages).
struct MemoryStats {
  int64_t in_use = 0, peak = 0;
};
MemoryStats memory_stats(DeviceType type);
void reset_peak_memory(DeviceType type);  // peak = in_use

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory owned elsewhere (a NumPy array's, for the Python module): neither
  // allocated nor freed nor counted here; `owner` keeps it alive as long as
  // this storage lives, and is released when it goes.
  Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write; autograd compares it with the version a
  // saved tensor had when it was saved.
  uint64_t version() const { return *version_; }
  void bump_version() { ++*version_; }

  // Storages over the same memory owned elsewhere (the Python module's tensors
  // over one NumPy array, or over a NumPy view of a Phasor tensor) must count
  // their writes together, or autograd misses a write made through another one.
  // version_counter(s) is s's counter (keeping s alive); share_version makes
  // this storage count on `counter` from now on.
  static std::shared_ptr<uint64_t> version_counter(const std::shared_ptr<Storage>& s);
  void share_version(std::shared_ptr<uint64_t> counter);

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t own_version_ = 0;
  uint64_t* version_ = &own_version_;  // own_version_, or *shared_version_
  std::shared_ptr<void> owner_;        // set for memory owned elsewhere
  std::shared_ptr<uint64_t> shared_version_;  // released before owner_, which may hold what keeps it alive
};

}  // namespace phasor
