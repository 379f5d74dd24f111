// The environment hooks of app/fault_injection.h, built only with PHASOR_FAULT_INJECTION.
#include "app/fault_injection.h"

#ifdef PHASOR_FAULT_INJECTION
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tensor/error.h"

namespace phasor::fault {

NanSteps nan_steps_from_environment() {
  const char* spec = std::getenv("PHASOR_FAULT_NAN_AT_STEP");
  if (!spec || !*spec) return {};
  long long first = -1, count = 1;
  char kind[8] = "loss";
  const int n = std::sscanf(spec, "%lld,%lld,%7s", &first, &count, kind);
  const std::string k = kind;
  PHASOR_CHECK(n >= 1 && first >= 0 && count > 0 && (k == "loss" || k == "inf" || k == "grad"),
               "PHASOR_FAULT_NAN_AT_STEP must be first[,count[,loss|inf|grad]], got '", spec, "'");
  return {first, count, k == "inf" ? NanSteps::Kind::Inf : k == "grad" ? NanSteps::Kind::Grad : NanSteps::Kind::Loss};
}

void rank_fault(int rank, int64_t step) {
  static const char* spec = std::getenv("PHASOR_TEST_FAULT");
  if (spec == nullptr || *spec == '\0') return;
  int at_rank = -1;
  long at = -1;
  char action[16] = {};
  if (std::sscanf(spec, "%d:%ld:%15s", &at_rank, &at, action) != 3) return;
  if (at_rank != rank || at != step) return;
  std::fprintf(stderr, "phasor: PHASOR_TEST_FAULT: rank %d %s at step %ld\n", at_rank, action, at);
  std::fflush(stderr);
  if (std::strcmp(action, "hang") == 0)
    for (;;) pause();
  std::_Exit(9);  // as a crash would: no cleanup, no MPI_Finalize
}

}  // namespace phasor::fault
#endif
