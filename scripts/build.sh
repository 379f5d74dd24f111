#!/usr/bin/env bash
# Configures and builds Phasor (Release) into build/: the given targets, or all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build/build.log 2>&1 || { cat build/build.log; exit 1; }
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}" >> build/build.log 2>&1 || { tail -50 build/build.log; exit 1; }
echo "build: ok (log in build/build.log)"
