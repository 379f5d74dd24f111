#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest). The README's test command.
# PHASOR_REQUIRE_ALL: a missing dependency (LibTorch, MPI, ...) fails the
# configuration instead of leaving its tests out, and a test that cannot run
# here fails instead of being skipped, except those that need a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PHASOR_REQUIRE_ALL=ON bash scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 600
