#include "tensor/storage.h"

#include <malloc.h>

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

}  // namespace

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
}

Storage::~Storage() {
  if (data_) allocator_for(device_)->deallocate(data_, nbytes_);
}

}  // namespace phasor
