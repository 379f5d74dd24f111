#pragma once
// The shared memory of the blocks one OS thread of the CUDA simulator runs:
// the static shared arrays of a kernel (PHASOR_SHARED, cuda/launch.h) and its
// dynamic shared memory (PHASOR_EXTERN_SHARED). Both are filled with poison at
// the start of every block, so that a read before a write sees NaN (or -1),
// never the previous block's values. The dynamic buffer ends where a page that
// can be neither read nor written begins: a read or write past the launch's
// bytes faults there (cuda/sim/device.cpp turns the fault into a report), and
// the few bytes between the launch's end and the next 16-byte boundary hold a
// canary checked when the block ends.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace phasor::sim {

class BlockSharedMemory {
 public:
  BlockSharedMemory();
  ~BlockSharedMemory();
  BlockSharedMemory(const BlockSharedMemory&) = delete;
  BlockSharedMemory& operator=(const BlockSharedMemory&) = delete;

  // Poisons both kinds for a new block of a launch with `dynamic_bytes` of
  // dynamic shared memory (at most the device's 227 KiB); returns that buffer.
  unsigned char* start_block(size_t dynamic_bytes);
  // "" or what the block did past its dynamic shared memory that did not fault.
  std::string finish_block() const;
  // The block's instance of the static array declared at `site`; null if the
  // block's static arrays would exceed the 48 KiB a kernel may declare.
  void* static_array(const void* site, size_t bytes);
  // Whether p lies in the guard after the dynamic buffer; if so, how many bytes
  // past the launch's dynamic shared memory it is.
  bool past_dynamic(const void* p, size_t& beyond) const;
  size_t dynamic_bytes() const { return dynamic_bytes_; }

 private:
  char* region_ = nullptr;  // data pages, then the guard pages
  size_t data_bytes_ = 0, guard_bytes_ = 0;
  unsigned char* dynamic_ = nullptr;
  size_t dynamic_bytes_ = 0, dynamic_span_ = 0;  // the launch's bytes; rounded up to 16
  std::vector<unsigned char> static_arena_;      // never reallocated: arrays handed out stay put
  std::vector<std::pair<const void*, size_t>> static_sites_;  // site -> offset, this block
  size_t static_used_ = 0;
};

}  // namespace phasor::sim
