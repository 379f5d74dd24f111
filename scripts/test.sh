#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest). The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 600
