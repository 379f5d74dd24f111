#include "tensor/storage.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace phasor {
namespace {

// 64-byte aligned host memory. glibc would otherwise serve every tensor over
// 128 KiB with a fresh mmap (and page faults on first touch); raising the
// threshold to its maximum (32 MiB) and never trimming keeps freed blocks in
// the heap, so a training step's allocations become cheap reuse.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  void* allocate(size_t nbytes) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    PHASOR_CHECK(p != nullptr, "out of host memory allocating ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

Allocator*& slot(DeviceType type) {
  static Allocator* allocators[2] = {nullptr, nullptr};
  return allocators[static_cast<int>(type)];
}

struct Counters {
  std::atomic<int64_t> in_use{0}, peak{0};
};
Counters& counters(DeviceType type) {
  static Counters per_type[2];
  return per_type[static_cast<int>(type)];
}

void count_allocation(DeviceType type, int64_t nbytes) {
  Counters& c = counters(type);
  const int64_t now = c.in_use.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

MemoryStats memory_stats(DeviceType type) {
  const Counters& c = counters(type);
  return {c.in_use.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed)};
}

void reset_peak_memory(DeviceType type) {
  Counters& c = counters(type);
  c.peak.store(c.in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) {
    static CpuAllocator cpu;
    return &cpu;
  }
  Allocator* a = slot(device.type);
  PHASOR_CHECK(a != nullptr, "device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return a;
}

void register_allocator(DeviceType type, Allocator* allocator) { slot(type) = allocator; }

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = nbytes ? allocator_for(device)->allocate(nbytes) : nullptr;
  count_allocation(device.type, static_cast<int64_t>(nbytes));
}

Storage::Storage(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)) {
  PHASOR_CHECK(owner_ != nullptr, "Storage: memory owned elsewhere needs its owner");
}

std::shared_ptr<uint64_t> Storage::version_counter(const std::shared_ptr<Storage>& s) {
  return std::shared_ptr<uint64_t>(s, s->version_);  // aliasing: the counter lives as long as s
}

void Storage::share_version(std::shared_ptr<uint64_t> counter) {
  PHASOR_CHECK(counter != nullptr, "Storage::share_version: no counter");
  shared_version_ = std::move(counter);
  version_ = shared_version_.get();
}

Storage::~Storage() {
  if (owner_) return;  // the owner's memory, released with owner_
  if (data_) allocator_for(device_)->deallocate(data_, nbytes_);
  counters(device_.type).in_use.fetch_sub(static_cast<int64_t>(nbytes_), std::memory_order_relaxed);
}

}  // namespace phasor
