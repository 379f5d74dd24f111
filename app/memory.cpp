#include "app/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace phasor {

// The most memory this process can still get: the least of its address-space
// limit (ulimit -v), the machine's available memory and free swap (which the
// kernel's out-of-memory killer enforces, whatever malloc returned), and what
// its cgroup's memory.max leaves.
uint64_t available_memory_bytes() {
  uint64_t available = UINT64_MAX;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) available = std::min<uint64_t>(available, limit.rlim_cur);
  std::ifstream meminfo("/proc/meminfo");
  uint64_t free_kb = 0, fields = 0;
  for (std::string key; meminfo >> key;) {
    uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:" || key == "SwapFree:") free_kb += kb, ++fields;
    meminfo.ignore(64, '\n');
  }
  if (fields == 2) available = std::min(available, free_kb * 1024);
  uint64_t cgroup_max = 0, cgroup_used = 0;
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");  // "max": no limit
  if (max_file >> cgroup_max && current_file >> cgroup_used) available = std::min(available, cgroup_max - std::min(cgroup_max, cgroup_used));
  return available;
}

}  // namespace phasor
