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
# Two tests at a time on a 2-core machine: oversubscribed, where OpenMP
# threads that spin while idle take the cores from the other test's threads.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
ctest --output-on-failure -j2 --timeout 600
