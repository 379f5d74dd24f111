#pragma once
// Test-facing counters of the CUDA simulator (PHASOR_CUDA_SIM): the bytes of
// global memory each kernel reads and writes through the counted accessors of
// cuda/global_memory.cuh (load_global, store_global and their 16-byte vector
// forms). Every access counts, not each address once: a value read twice
// counts twice, as a kernel that misses the cache would fetch it twice. This is
// the strict measure of traffic the rotation kernels are held to (issue #31:
// their inputs read once, their outputs written once). A kernel's accesses
// written as plain pointer dereferences are not seen: such a kernel shows its
// launches and no bytes.
#include <cstdint>
#include <map>
#include <string>

namespace phasor::sim {

struct Traffic {
  int64_t launches = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t accesses = 0;  // loads and stores: bytes() / accesses is the mean access width (16 where all are vectors)
  int64_t bytes() const { return bytes_read + bytes_written; }
};

// Since the last reset_traffic(), by kernel: the name its launch gives it in
// the source, without template arguments ("cmha_kernel"). A launch counts once
// when it has run (after the stream is synchronised), however many schedules
// the simulator runs it under.
std::map<std::string, Traffic> traffic();
void reset_traffic();

}  // namespace phasor::sim
