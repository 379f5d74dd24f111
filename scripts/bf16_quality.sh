#!/usr/bin/env bash
# bf16 mixed precision against float32 on the README's main job: the same 600
# steps at the same seed in both precisions, each evaluated over every
# held-out window in float32, and every position variant trained 600 steps in
# bf16 with its NaN/Inf-skipped steps counted. Prints a markdown table.
#   bash scripts/bf16_quality.sh [phasor-binary] [out-dir]
set -euo pipefail
phasor=${1:-build/phasor}
out=${2:-runs/bf16-quality}
steps=${STEPS:-600}
mkdir -p "$out"
model="--d-model 128 --n-layers 4 --n-heads 4 --d-ff 352 --seq-len 128 --batch 16 --lr 3e-3 --eval-every 200"
train() {  # run-dir position precision
  rm -rf "$1"
  "$phasor" train --data kjv --position "$2" --precision "$3" --steps "$steps" --run-dir "$1" $model > "$1.out" 2> "$1.err"
}
eval_loss() {  # run-dir -> the float32 loss over every held-out window
  "$phasor" eval --checkpoint "$1/$(cat "$1/latest")/model.safetensors" --data "$1/validation.txt" --seq-len 128 --json |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["loss"])'
}
skipped() { grep -c '"skipped":true' "$1/log.jsonl" || true; }
tokens_per_s() { python3 -c 'import json,sys; print(round([json.loads(l) for l in open(sys.argv[1]) if "tokens_per_s" in l][-1]["tokens_per_s"]))' "$1/log.jsonl"; }

echo "| run | precision | eval loss (nats/byte, all held-out windows) | skipped steps | tokens/s (last log line) |"
echo "|---|---|---|---|---|"
for precision in float32 bf16; do
  run=$out/main-$precision
  train "$run" complexformer "$precision"
  echo "| main job (complexformer) | $precision | $(eval_loss "$run") | $(skipped "$run") | $(tokens_per_s "$run") |"
done
for position in rope xpos alibi sinusoidal learned none; do
  run=$out/$position-bf16
  train "$run" "$position" bf16
  echo "| $position | bf16 | $(eval_loss "$run") | $(skipped "$run") | $(tokens_per_s "$run") |"
done
