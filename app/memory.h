#pragma once
// What the commands that can outgrow memory (train, curvature) check before
// they allocate, so that a run too large is refused with one line instead of
// failing minutes in or meeting the kernel's out-of-memory killer.
#include <cstdint>

namespace phasor {

// The most memory this process can still get: the least of its address-space
// limit (ulimit -v), the machine's available memory and free swap, and what
// its cgroup's memory.max leaves.
uint64_t available_memory_bytes();

}  // namespace phasor
