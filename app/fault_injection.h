#pragma once
// The faults the tests inject into the `phasor` CLI through the environment,
// all in one place. Compiled in only when the build defines
// PHASOR_FAULT_INJECTION (the CMake option of that name, on by default where
// the tests are built, since they drive these hooks); without it every hook
// below is an empty inline function and the variables are ignored.
//   PHASOR_FAULT_NAN_AT_STEP="first[,count[,loss|inf|grad]]" (tests/test_faults.cpp,
//     tests/test_bad_input.cpp): steps first .. first+count-1 (0-based) get a
//     NaN loss (loss, the default), an infinite loss (inf) or a NaN in one
//     gradient (grad), to exercise the skipping of bad steps.
//   PHASOR_TEST_FAULT="<rank>:<step>:<exit|hang>" (tests/test_distributed.cpp):
//     that rank exits abruptly (as a crash would) or hangs forever at that step.
// May include: the standard library only.
#include <cstdint>

namespace phasor::fault {

// The steps PHASOR_FAULT_NAN_AT_STEP spoils, and how.
struct NanSteps {
  enum class Kind { Loss, Inf, Grad };
  int64_t first = -1, count = 0;
  Kind kind = Kind::Loss;
  bool at(int64_t step) const { return first >= 0 && step >= first && step - first < count; }
  bool loss_at(int64_t step) const { return at(step) && kind != Kind::Grad; }  // the loss is NaN or Inf
  bool grad_at(int64_t step) const { return at(step) && kind == Kind::Grad; }  // one gradient holds a NaN
};

#ifdef PHASOR_FAULT_INJECTION
// Reads PHASOR_FAULT_NAN_AT_STEP (none when unset); throws phasor::Error when it is malformed.
NanSteps nan_steps_from_environment();
// Exits or hangs here when PHASOR_TEST_FAULT names this rank and step.
void rank_fault(int rank, int64_t step);
#else
inline NanSteps nan_steps_from_environment() { return {}; }
inline void rank_fault(int, int64_t) {}
#endif

}  // namespace phasor::fault
