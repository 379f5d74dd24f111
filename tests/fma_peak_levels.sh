#!/usr/bin/env bash
# The FMA probe (bench/fma_peak.h) reads the same at -O1, -O2 and -O3: its
# chains stay in registers whatever the optimisation level. Usage:
#   fma_peak_levels.sh PROBE_O1 PROBE_O2 PROBE_O3
# Each probe prints its best GFLOP/s of one thread (by process CPU time). The
# three run interleaved, round after round, each keeping its best; the test
# passes as soon as, after at least 3 rounds, the best three agree within 10%
# (a loaded machine only lowers figures, and a best of several recovers), and
# fails after 15 rounds without agreement: a spilled probe reads 2-10x lower
# at its level however often it runs.
set -euo pipefail
(( $# == 3 )) || { echo "usage: fma_peak_levels.sh PROBE_O1 PROBE_O2 PROBE_O3" >&2; exit 2; }
levels=(O1 O2 O3)
best=(0 0 0)
for round in $(seq 1 15); do
  for i in 0 1 2; do
    read -r gflops isa < <("${@:i+1:1}")
    best[i]=$(awk -v a="${best[i]}" -v b="$gflops" 'BEGIN { print (b > a ? b : a) }')
  done
  spread=$(awk -v a="${best[0]}" -v b="${best[1]}" -v c="${best[2]}" 'BEGIN {
    hi = a; lo = a; if (b > hi) hi = b; if (c > hi) hi = c; if (b < lo) lo = b; if (c < lo) lo = c; print hi / lo }')
  summary="round $round ($isa): -O1 ${best[0]}, -O2 ${best[1]}, -O3 ${best[2]} GFLOP/s, highest/lowest $spread"
  if (( round >= 3 )) && awk -v s="$spread" 'BEGIN { exit !(s <= 1.10) }'; then
    echo "fma_peak_levels: $summary: agree within 10%"
    exit 0
  fi
done
echo "fma_peak_levels: $summary: the probe's figure depends on the optimisation level (chains spilled?)" >&2
exit 1
