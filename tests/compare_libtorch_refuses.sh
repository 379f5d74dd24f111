#!/usr/bin/env bash
# bench/compare_libtorch refuses yardsticks that cannot be right (one line on
# stderr, exit 1, no table): an FMA peak under 70% of the CPU's nominal rate,
# a training workload above the peak, an sgemm above the peak; and prints the
# table, with the load average, when they are sound. Runs on synthetic results
# (--from-results), so it needs neither LibTorch nor a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One JSON line as compare_phasor / compare_torch print it: NAME IMPL WORKLOAD MS FLOPS GFLOPS [NOMINAL]
line() {
  jq -nc --arg name "$1" --arg impl "$2" --arg w "$3" --argjson ms "$4" --argjson flops "$5" --argjson g "$6" --argjson nominal "${7:-0}" '
    {impl: $impl, workload: $w, name: $name, round: 1, threads: 2, blas_threads: 2, tokens_per_rep: 2048,
     times_ms: [$ms], median_ms: $ms, cpu_ms: [$ms], median_cpu_ms: $ms, peak_rss_mib: 100, base_rss_mib: 10,
     load_average: [0.5, 0.4, 0.3], flops_per_rep: $flops, gflops_per_s: $g, nominal_gflops_per_s: $nominal}'
}
# PEAK NOMINAL TRAIN_MS SGEMM_GFLOPS: a run with a 100 GFLOP/s yardstick scale.
results() {
  { line fma-peak phasor fma-peak 100 1e10 "$1" "$2"
    line sgemm phasor sgemm 100 1e10 "$4"
    line sgemm libtorch sgemm 100 1e10 "$4"
    line train-small phasor train "$3" 1e10 "$(( 10000 / $3 ))"
    line train-small libtorch train 200 1e10 50
    line fma-peak phasor fma-peak 100 1e10 "$(( $1 - 10 ))" "$2"; } > "$tmp/r.jsonl"
}
expect() {  # WANT_RC WANT_TEXT CASE
  local rc=0
  "$root/bench/compare_libtorch" --from-results "$tmp/r.jsonl" > "$tmp/out" 2> "$tmp/err" || rc=$?
  if [[ $rc != "$1" ]] || ! grep -q -- "$2" "$tmp/out" "$tmp/err"; then
    echo "compare_libtorch_refuses: $3: exit $rc (wanted $1), output:" >&2
    cat "$tmp/out" "$tmp/err" >&2
    exit 1
  fi
}
results 100 120 200 80;  expect 0 "load average (1, 5, 15 min) at the start 0.50" "sound yardsticks"
results 100 120 200 80;  expect 0 "| train-small | 10.00 | 50 | \*\*50%\*\*" "sound yardsticks: share of the peak"
results 80 120 200 60;   expect 1 "under 70% of the CPU's 120" "a peak under 70% of nominal"
results 100 120 50 80;   expect 1 "train-small (phasor) ran at 200 GFLOP/s, above the FMA peak of 100" "training above the peak"
results 100 120 200 110; expect 1 "sgemm (phasor) ran at 110 GFLOP/s, above the FMA peak of 100" "sgemm above the peak"
echo "compare_libtorch_refuses: refusals and the sound table as expected"
