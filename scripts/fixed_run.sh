#!/usr/bin/env bash
# The fixed-run comparison of a refactoring (docs/design.md, "Changing the
# house"): train, evaluate and generate with three position variants at fixed
# seeds, and print everything a behaviour change would move: the logs without
# their timings, eval's JSON, the generated text and the checkpoints' bytes.
# Run it before and after a change and diff the two outputs; a refactoring
# leaves them identical.
#   bash scripts/fixed_run.sh [phasor-binary] > before.txt
set -euo pipefail
phasor=${1:-build/phasor}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
untimed() { sed -E -e 's/[0-9]+ tok(ens)?\/s//g' -e 's/ETA [0-9]+m[0-9]+s//g' \
                  -e 's/"(tokens_per_s|tokens_per_second|seconds|elapsed[a-z_]*|wall[a-z_]*)": *[0-9.e+-]+/"\1": _/g'; }
for position in complexformer rope alibi; do
  run=$work/$position
  echo "== $position: train"
  "$phasor" train --data kjv --position "$position" --steps 24 --run-dir "$run" --seed 7 \
    --d-model 32 --n-layers 2 --n-heads 2 --d-ff 64 --seq-len 32 --batch 4 --eval-every 12 2>&1 | untimed
  untimed < "$run/log.jsonl"
  ckpt=$run/$(cat "$run/latest")
  (cd "$ckpt" && sha256sum -- *.safetensors)
  sed "s|$work|WORK|g" "$ckpt/state.json" | untimed
  echo "== $position: eval"
  "$phasor" eval --checkpoint "$ckpt/model.safetensors" --data "$run/validation.txt" --seq-len 32 --json | untimed
  echo "== $position: generate"
  "$phasor" generate --checkpoint "$ckpt/model.safetensors" --prompt "And God said" --tokens 40 \
    --temperature 0.8 --top-k 10 --seed 1
done
