#!/usr/bin/env bash
# example_read_grad: `phasor grad` on the model example_train_sample trained (its
# run folder, with the held-out text it wrote), with the --activations probe (which must change
# no gradient: read_grad recomputes them without it), then docs/examples/read_grad on the file.
#   example_read_grad.sh PHASOR_CLI READ_GRAD RUN_DIR
set -euo pipefail
cli=$1 read_grad=$2 run=$3
model=$run/$(cat "$run/latest")/model.safetensors
"$cli" grad --checkpoint "$model" --data "$run/validation.txt" --seq-len 32 --window 1 --activations --out "$run/grad.safetensors"
"$read_grad" "$run/grad.safetensors" "$model" "$run/validation.txt"
