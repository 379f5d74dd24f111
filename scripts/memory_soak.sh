#!/usr/bin/env bash
# Memory soak: trains a small model for STEPS (2000) steps with periodic
# validation and checkpoints, samples the process's resident memory (VmRSS in
# /proc/PID/status) every 50 ms, and checks that it stays flat after warm-up:
# the largest sample of the last quarter of the steps must be within TOLERANCE
# (5%) of the sample taken at step 200. Prints the figures; exits 1 on growth.
#   bash scripts/memory_soak.sh                 # builds build/phasor if needed
#   STEPS=4000 TOLERANCE=0.02 bash scripts/memory_soak.sh
# Not part of CI (it takes a minute or two); see docs/bad-input.md for figures.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=${STEPS:-2000}
tolerance=${TOLERANCE:-0.05}
warm=${WARM_STEP:-200}
phasor=${PHASOR:-build/phasor}
[ -x "$phasor" ] || bash scripts/build.sh phasor_cli

work=$(mktemp -d /tmp/phasor_soak.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 400 KB of deterministic text.
awk 'BEGIN { for (i = 0; i < 6000; i++) printf "Verse %d. And the %s was divided from the %s, %d times over.\n", i, (i % 3 ? "light" : "water"), (i % 2 ? "darkness" : "firmament"), (i * 37) % 101 }' > "$work/data.txt"

"$phasor" train --data "$work/data.txt" --run-dir "$work/run" --steps "$steps" --d-model 64 --n-layers 2 --n-heads 4 --d-ff 176 \
  --seq-len 64 --batch 8 --threads "${THREADS:-2}" --log-every 10 --eval-every 250 --eval-windows 8 --ckpt-every 250 \
  > "$work/stdout" 2> "$work/stderr" &
pid=$!

# Samples "step rss_kb" until the process ends; the step is the last progress line's.
samples="$work/samples"
: > "$samples"
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
  step=$(grep -o '^step [0-9]*/' "$work/stderr" 2>/dev/null | tail -1 | tr -dc '0-9' || true)
  [ -n "$rss" ] && [ -n "$step" ] && echo "$step $rss" >> "$samples"
  sleep 0.05
done
status=0
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
  echo "memory_soak: phasor train failed (status $status):" >&2
  tail -5 "$work/stderr" >&2
  exit 1
fi

awk -v warm="$warm" -v steps="$steps" -v tol="$tolerance" '
  { step = $1; rss = $2
    if (base == "" && step >= warm) { base = rss; base_step = step }
    if (step >= steps * 3 / 4) { if (rss > late_max) late_max = rss; n_late++ }
    if (rss > peak) peak = rss
    n++ }
  END {
    if (base == "" || n_late == 0) { print "memory_soak: too few samples (" n ")"; exit 1 }
    growth = (late_max - base) / base
    printf "memory_soak: %d steps, %d samples: RSS %.1f MB at step %d, last-quarter max %.1f MB (%+.2f%%), peak %.1f MB; tolerance %.0f%%\n",
           steps, n, base / 1024, base_step, late_max / 1024, 100 * growth, peak / 1024, 100 * tol
    if (growth > tol) { print "memory_soak: FAIL: resident memory grows after warm-up"; exit 1 }
    print "memory_soak: ok"
  }' "$samples"
