#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ in the sanitizer build (scripts/build_asan.sh:
# clang, ASan + UBSan; already built when scripts/ci_sanitize.sh ran first) and
# runs each for a bounded time from its committed seed corpus, fuzz/corpus/<target>/.
#   bash scripts/ci_fuzz.sh                 # every target, FUZZ_SECONDS (40) each
#   FUZZ_SECONDS=600 bash scripts/ci_fuzz.sh config   # longer, one target
# New inputs go to build-fuzz/corpus/<target>/ (the committed seeds stay as they
# are); a crash is written to build-fuzz/artifacts/ and fails the script: add
# that file to fuzz/corpus/<target>/ and a doctest case that replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-40}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config data)
out=build-fuzz
mkdir -p "$out/artifacts"

start=$(date +%s)
bash scripts/build_asan.sh "${targets[@]/#/fuzz_}"
echo "ci_fuzz: built ${targets[*]} in $(( $(date +%s) - start )) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  if "build-asan/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
       -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    echo "ci_fuzz: $t ok: $runs inputs in $seconds s, $cov, corpus $(ls "$out/corpus/$t" | wc -l) new + $(ls "fuzz/corpus/$t" | wc -l) seeds"
  else
    status=1
    echo "ci_fuzz: $t FAILED (log in $log):" >&2
    grep -A30 -m1 -E 'ERROR: |runtime error|fuzz_[a-z]*: ' "$log" >&2 || tail -40 "$log" >&2
    ls "$out/artifacts/$t-"* 2>/dev/null >&2 || true
  fi
done
exit $status
