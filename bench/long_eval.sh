#!/usr/bin/env bash
# Time and peak RSS of `phasor eval` over one window of 1K, 4K, 16K and 64K
# positions of the README's model (docs/benchmarks.md, "Long windows").
# The model is trained for 20 steps only: time and memory do not depend on
# the weights.
#   bash bench/long_eval.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
phasor=${1:-build}/phasor
run=runs/long-eval-model
rm -rf "$run"
"$phasor" train --data kjv --position complexformer --d-model 128 --n-layers 4 --n-heads 4 --d-ff 352 --seq-len 128 --batch 16 \
  --steps 20 --run-dir "$run" --eval-every 0 --log-every 20 > /dev/null
model=$(ls -d "$run"/ckpt-*/ | tail -1)model.safetensors
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for len in 1024 4096 16384 65536; do
  /usr/bin/time -f "seq-len $len: %e s wall, peak RSS %M KB" "$phasor" eval --checkpoint "$model" --data kjv --seq-len "$len" --max-windows 1 2>&1 | tail -2
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
