#!/usr/bin/env bash
# The sanitizer build, build-asan/: clang, AddressSanitizer (with LeakSanitizer)
# + UndefinedBehaviorSanitizer at -O1, libFuzzer coverage on everything, the
# library, the CLI, the doctest suites and the fuzz targets (PHASOR_TESTS_ONLY:
# no LibTorch or benchmarks), and the CUDA backend on the CUDA simulator
# (PHASOR_CUDA_SIM), so that ASan sees every kernel's global-memory accesses:
# each cudaMalloc is its own heap block. Shared by scripts/ci_sanitize.sh and
# scripts/ci_fuzz.sh, so CI compiles the library once for both. PHASOR_REQUIRE_ALL:
# what these suites need (MPI and mpirun, bible-kjv) must be there, and only the
# GPU tests may skip.
#   bash scripts/build_asan.sh                 # everything
#   bash scripts/build_asan.sh fuzz_config     # only these targets
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++ >/dev/null || { echo "build_asan: clang++ is missing (scripts/setup.sh installs clang)" >&2; exit 1; }
log=build-asan.log
if [ ! -f build-asan/CMakeCache.txt ] || ! grep -q "PHASOR_FUZZ:BOOL=ON" build-asan/CMakeCache.txt ||
   ! grep -q "PHASOR_REQUIRE_ALL:BOOL=ON" build-asan/CMakeCache.txt || ! grep -q "PHASOR_CUDA_SIM:BOOL=ON" build-asan/CMakeCache.txt; then
  rm -rf build-asan
  CC=clang CXX=clang++ cmake -S . -B build-asan -DPHASOR_SANITIZE=ON -DPHASOR_FUZZ=ON -DPHASOR_TESTS_ONLY=ON -DPHASOR_REQUIRE_ALL=ON -DPHASOR_CUDA_SIM=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" > "$log" 2>&1 ||
    { cat "$log" >&2; exit 1; }
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-asan -j"${JOBS:-$(nproc)}" "${targets[@]}" >> "$log" 2>&1 ||
  { grep -E "error|Error" "$log" | head -30 >&2; tail -20 "$log" >&2; exit 1; }
