#pragma once
// Races between the blocks of one launch: blocks run in no order the program
// can rely on, and nothing but an atomic orders their accesses to global
// memory, so two blocks touching the same bytes, one of them writing, give a
// result that depends on their order. The simulator records the accesses each
// block makes through the counted accessors (cuda/global_memory.cuh) and
// reports the first such pair. (Plain dereferences are not seen here; a race
// through them shows as results that differ between block orders,
// cuda/sim/device.cpp.)
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace phasor::sim {

struct GlobalAccess {
  uintptr_t begin, end;  // bytes [begin, end)
  int64_t block;         // the block's linear index in its grid
  bool write;
};

// "" or the first two accesses of different blocks to overlapping bytes, one
// of them a write, described with `block_name`. Sorts `accesses`.
std::string first_race(std::vector<GlobalAccess>& accesses, const std::function<std::string(int64_t)>& block_name);

}  // namespace phasor::sim
