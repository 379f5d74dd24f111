#!/usr/bin/env bash
# Configures and builds Phasor (Release) into build/: the given targets, or all of them.
# PHASOR_REQUIRE_ALL=ON in the environment (scripts/test.sh sets it) makes the
# configuration fail when a dependency of the full test suite is missing
# (CMakeLists.txt); unset, the build keeps the value it was configured with.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
args=(-DCMAKE_BUILD_TYPE=Release)
[ -z "${PHASOR_REQUIRE_ALL:-}" ] || args+=("-DPHASOR_REQUIRE_ALL=$PHASOR_REQUIRE_ALL")
# The CUDA backend that can run here: the real one where a GPU answers (and
# nvcc builds it), else the CUDA simulator (cuda/sim/), so test_cuda runs every
# kernel on the CPU instead of skipping, with or without nvcc installed.
# (.ci/run still compiles the real backend with nvcc where one is installed.)
if nvidia-smi -L >/dev/null 2>&1; then
  args+=(-DPHASOR_CUDA_SIM=OFF)
else
  args+=(-DPHASOR_CUDA_SIM=ON)
fi
cmake -S . -B build "${args[@]}" > build/build.log 2>&1 || { cat build/build.log; exit 1; }
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}" >> build/build.log 2>&1 || { tail -50 build/build.log; exit 1; }
echo "build: ok (log in build/build.log)"
