#pragma once
// main() of the Google Benchmark binaries (bench_*.cpp): BENCHMARK_MAIN's,
// after OpenBLAS is switched to its best kernels, as in every program of the
// project (tensor/startup.h). Included by one file per binary.
#include <benchmark/benchmark.h>

#include "tensor/startup.h"

int main(int argc, char** argv) {
  phasor::use_best_openblas_core(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
