#!/usr/bin/env bash
# What one cell of the scale preset costs (docs/RESULTS.md, "Scaling"): CPU
# seconds per bf16 training step and per cell besides its steps (loading, the
# three evaluations, saving), for every size and variant. Each kjv cell of seed
# 1 runs alone (`phasor sweep --cell`, nice'd) at 20 and at 60 steps under
# /usr/bin/time: per step = (cpu60 - cpu20) / 40, fixed = cpu20 - 20 x per step.
# CPU time, not wall time, so that a shared machine's other work does not count.
#   bash bench/scale_cell_cost.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
phasor=${1:-build}/phasor
export OMP_WAIT_POLICY=PASSIVE
for steps in 20 60; do
  rm -rf "runs/scale-cost-$steps"
  # --stop-after 0: writes the plan, starts no cell
  "$phasor" sweep --preset scale --out "runs/scale-cost-$steps" --steps "$steps" --seeds 1 --tasks kjv --stop-after 0 \
    --throughput-rounds 0 > /dev/null 2>&1
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for size in 117k 837k 3.3M; do
  for variant in complexformer-paper complexformer-rope rope alibi; do
    cell=kjv-$size-$variant-s1
    for steps in 20 60; do
      /usr/bin/time -f "%U %S" -o "runs/scale-cost-$steps/$cell.time" nice -n 5 "$phasor" sweep --out "runs/scale-cost-$steps" --cell "$cell" > /dev/null 2>&1
    done
    awk -v cell="$cell" 'NR == FNR { a = $1 + $2; next } { b = $1 + $2; p = (b - a) / 40
      printf "%s: %.1f ms per step, %.1f s fixed (cpu %.2f s at 20 steps, %.2f s at 60)\n", cell, 1000 * p, a - 20 * p, a, b }' \
      "runs/scale-cost-20/$cell.time" "runs/scale-cost-60/$cell.time"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
