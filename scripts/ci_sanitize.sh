#!/usr/bin/env bash
# The whole doctest suite under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer, in the sanitizer build (scripts/build_asan.sh:
# build-asan/, clang, -O1), and the Python module's tests (python_tests: the
# stock interpreter with the ASan runtime preloaded, leak checking off). ASan and LSan reports go to files under
# build-asan/reports/ (a report in a CLI child process must not hide in a
# test's captured stderr); the script fails if a test fails or if any report
# was written. UBSan halts the process on its first report: a test fails, and a
# CLI child's report breaks the exit status or the one-line stderr the tests check.
#   bash scripts/ci_sanitize.sh            # configure, build, run
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
bash scripts/build_asan.sh
built=$(date +%s)
echo "ci_sanitize: built in $((built - start)) s (log in build-asan.log)"

reports=$PWD/build-asan/reports
rm -rf "$reports"
mkdir -p "$reports"
# malloc_context_size=8 (ASan's default is 30): the allocation and free stacks of
# a report keep 8 frames, and the suite takes about a quarter less time (test_attention
# 74 s -> 55 s, on a loaded machine), since every tensor allocation unwinds its stack.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:malloc_context_size=8:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
export LSAN_OPTIONS="log_path=$reports/lsan"
# Two test binaries at a time on 2 cores: idle OpenMP threads sleep at once
# rather than spin on the other binary's cores (scripts/test.sh does the same).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
status=0
(cd build-asan && ctest --output-on-failure -j2 --timeout 1200) || status=$?
echo "ci_sanitize: tests ran in $(($(date +%s) - built)) s"
if [ -n "$(ls -A "$reports")" ]; then
  echo "ci_sanitize: sanitizer reports:" >&2
  for f in "$reports"/*; do
    echo "--- $f" >&2
    head -60 "$f" >&2
  done
  status=1
fi
[ "$status" -eq 0 ] && echo "ci_sanitize: ok, no sanitizer reports"
exit "$status"
