#!/usr/bin/env bash
# The main job: set up, build, train a small ComplexFormer on the King James
# Bible, evaluate it, generate a sample and draw its loss curve.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh phasor_cli

run=runs/kjv-complexformer
steps=${STEPS:-600}
rm -rf "$run"
echo "== train ($steps steps of 16 x 128 tokens; progress on stderr)"
build/phasor train --data kjv --position complexformer --steps "$steps" --run-dir "$run" \
  --d-model 128 --n-layers 4 --n-heads 4 --d-ff 352 --seq-len 128 --batch 16 --lr 3e-3 --eval-every 200
ckpt="$(cat "$run/latest")"
echo "== evaluate on the held-out text (the last 5% of the corpus, never trained on)"
build/phasor eval --checkpoint "$run/$ckpt/model.safetensors" --data "$run/validation.txt" --seq-len 128 --json | tee "$run/eval.json"
echo "== generate"
build/phasor generate --checkpoint "$run/$ckpt/model.safetensors" --prompt "And God said" --tokens 200 --temperature 0.8 --top-k 40 --seed 1
echo "== plot"
build/phasor plot "$run" --out "$run/loss.svg"
