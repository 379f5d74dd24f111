// Races between the blocks of one launch (cuda/sim/races.h).
#include "races.h"

#include <algorithm>
#include <cstdio>

namespace phasor::sim {

namespace {

// Of the accesses seen so far, the one reaching furthest of each of two
// different blocks: enough to tell whether any block but a given one still
// covers an address.
struct FurthestTwo {
  const GlobalAccess* first = nullptr;   // reaches furthest
  const GlobalAccess* second = nullptr;  // reaches furthest among the other blocks
  void add(const GlobalAccess& a) {
    if (!first) {
      first = &a;
    } else if (a.block == first->block) {
      if (a.end > first->end) first = &a;
    } else if (a.end > first->end) {
      second = first;
      first = &a;
    } else if (!second || a.end > second->end) {
      second = &a;
    }
  }
  // An access of another block than `a`'s that covers a.begin, if any.
  const GlobalAccess* other_covering(const GlobalAccess& a) const {
    const GlobalAccess* o = first && first->block != a.block ? first : second;
    return o && o->end > a.begin ? o : nullptr;
  }
};

}  // namespace

std::string first_race(std::vector<GlobalAccess>& accesses, const std::function<std::string(int64_t)>& block_name) {
  std::sort(accesses.begin(), accesses.end(), [](const GlobalAccess& a, const GlobalAccess& b) { return a.begin < b.begin; });
  FurthestTwo writes, reads;
  for (const GlobalAccess& a : accesses) {
    const GlobalAccess* w = writes.other_covering(a);
    const GlobalAccess* r = a.write ? reads.other_covering(a) : nullptr;
    if (w || r) {
      const GlobalAccess& other = w ? *w : *r;
      const bool both_write = a.write && other.write;
      const GlobalAccess& writer = a.write ? a : other;
      const GlobalAccess& reader = a.write ? other : a;
      char buf[320];
      if (both_write)
        std::snprintf(buf, sizeof buf, "blocks %s and %s both write global memory at %p without an atomic: the result depends on their order",
                      block_name(other.block).c_str(), block_name(a.block).c_str(), reinterpret_cast<void*>(std::max(a.begin, other.begin)));
      else
        std::snprintf(buf, sizeof buf, "block %s reads global memory at %p that block %s writes: blocks are not ordered, so what it reads depends on their order",
                      block_name(reader.block).c_str(), reinterpret_cast<void*>(std::max(a.begin, other.begin)), block_name(writer.block).c_str());
      return buf;
    }
    (a.write ? writes : reads).add(a);
  }
  return "";
}

}  // namespace phasor::sim
