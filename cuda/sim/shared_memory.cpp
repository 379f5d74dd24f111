// The shared memory of the CUDA simulator's blocks (cuda/sim/shared_memory.h).
#include "shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_runtime_api.h"
#include "internal.h"

namespace phasor::sim {

namespace {
constexpr size_t kMaxDynamic = 227 * 1024;  // an H200's opt-in maximum per block
constexpr size_t kMaxStatic = 48 * 1024;    // what a kernel may declare statically
constexpr size_t kGuard = 64 * 1024;        // a read a little past the end lands here
constexpr size_t kAlign = 16;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
unsigned char fill() { return poison_enabled() ? kPoison : 0; }
}  // namespace

BlockSharedMemory::BlockSharedMemory() : static_arena_(kMaxStatic, fill()) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  data_bytes_ = round_up(kMaxDynamic + kAlign, page);
  guard_bytes_ = round_up(kGuard, page);
  void* p = mmap(nullptr, data_bytes_ + guard_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED || mprotect(static_cast<char*>(p) + data_bytes_, guard_bytes_, PROT_NONE) != 0) {
    std::fprintf(stderr, "phasor: CUDA simulator: cannot map shared memory\n");
    std::abort();
  }
  region_ = static_cast<char*>(p);
}

BlockSharedMemory::~BlockSharedMemory() { munmap(region_, data_bytes_ + guard_bytes_); }

unsigned char* BlockSharedMemory::start_block(size_t dynamic_bytes) {
  // The last block's static arrays, and their sites, go: the next block declares its own.
  std::memset(static_arena_.data(), fill(), static_used_);
  static_sites_.clear();
  static_used_ = 0;
  dynamic_bytes_ = std::min(dynamic_bytes, kMaxDynamic);
  dynamic_span_ = round_up(dynamic_bytes_, kAlign);
  dynamic_ = reinterpret_cast<unsigned char*>(region_ + data_bytes_ - dynamic_span_);
  std::memset(dynamic_, fill(), dynamic_bytes_);
  std::memset(dynamic_ + dynamic_bytes_, kPoison, dynamic_span_ - dynamic_bytes_);  // the canary
  return dynamic_;
}

std::string BlockSharedMemory::finish_block() const {
  for (size_t i = dynamic_bytes_; i < dynamic_span_; ++i)
    if (dynamic_[i] != kPoison) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "a thread writes byte %zu of dynamic shared memory, past the launch's %zu bytes", i, dynamic_bytes_);
      return buf;
    }
  return "";
}

void* BlockSharedMemory::static_array(const void* site, size_t bytes) {
  for (const auto& s : static_sites_)
    if (s.first == site) return static_arena_.data() + s.second;
  const size_t offset = round_up(static_used_, kAlign);
  if (offset + bytes > kMaxStatic) return nullptr;
  static_sites_.emplace_back(site, offset);
  static_used_ = offset + bytes;
  return static_arena_.data() + offset;
}

bool BlockSharedMemory::past_dynamic(const void* p, size_t& beyond) const {
  const char* c = static_cast<const char*>(p);
  const char* guard = region_ + data_bytes_;
  if (c < guard || c >= guard + guard_bytes_) return false;
  beyond = static_cast<size_t>(c - reinterpret_cast<const char*>(dynamic_)) - dynamic_bytes_;
  return true;
}

}  // namespace phasor::sim
