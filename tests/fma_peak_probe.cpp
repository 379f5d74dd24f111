// One figure of the FMA probe (bench/fma_peak.h) on one thread, in GFLOP/s of
// process CPU time (time the scheduler gave the process to others does not
// count): the best of a few short runs. tests/CMakeLists.txt builds this file
// at -O1, -O2 and -O3, and tests/fma_peak_levels.sh checks that the three
// agree: a probe whose chains spill to memory at some level reads 2-10x lower
// there.
#include <cstdio>
#include <ctime>

#include "bench/fma_peak.h"

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main() {
  constexpr int kRuns = 5;
  constexpr int64_t kIters = 4'000'000;  // about 6 ms of AVX-512 FMAs on one core
  double best = 0, checksum = 0;
  phasor::bench::FmaPeakRun run;
  for (int r = 0; r < kRuns; ++r) {
    const double t0 = process_cpu_seconds();
    run = phasor::bench::fma_peak(1, kIters);
    const double gflops = run.flops / (process_cpu_seconds() - t0) / 1e9;
    if (gflops > best) best = gflops;
    checksum += run.checksum;
  }
  std::printf("%.1f %s\n", best, run.isa.c_str());
  return checksum == 0 ? 1 : 0;  // uses the checksum, so no run is optimised away
}
