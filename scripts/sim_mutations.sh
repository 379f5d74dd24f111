#!/usr/bin/env bash
# Mutation check of the CUDA simulator (docs/design.md): each mutation below is
# applied with sed to a copy of the sources, test_cuda is rebuilt on the
# simulator and run on the cases that execute the mutated code; a mutation
# that no case catches is a failure of this script. Slow (a rebuild per
# mutation): run by hand, not in CI.
#   bash scripts/sim_mutations.sh [build-dir]     # default build-mutations/
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${1:-$root/build-mutations}
src=$work/src
mkdir -p "$work"
rm -rf "$src" && mkdir -p "$src"
git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$src")  # the tracked sources
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DPHASOR_CUDA_SIM=ON -DPHASOR_PYTHON=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > "$work/configure.log" 2>&1

# name | file | sed expression (applied to the copy) | doctest cases that must catch it
mutations=(
  "block_reduce: 2nd barrier removed|cuda/common.cuh|/  if (lane == 0) s\[warp\] = v;/{n;s/__syncthreads();//}|*sum over any dims*,*logsumexp*"
  "block_reduce: 3rd barrier removed|cuda/common.cuh|/    if (lane == 0) s\[0\] = v;/{n;n;s/__syncthreads();//}|*sum over any dims*,*logsumexp*"
  "extreme_kernel: barrier removed|cuda/reduce.cu|/  if (lane == 0) s\[warp\] = best;/{n;s/__syncthreads();//}|*max and min*"
  "cmha_backward_kernel: barrier removed|cuda/fused.cu|/  s_beta\[ty \* bx + tx\] = acc_beta;/{n;s/__syncthreads();//}|*ComplexFormer rotation*"
  "attention_forward_kernel: barrier after the P tile removed|cuda/attention.cu|/ps\[(ty + 16 \* i) \* LP + tx + 16 \* j\] = s\[i\]\[j\];/{n;n;s/__syncthreads();//}|*fused causal attention*"
  "load_tile: tile bound off by one|cuda/attention.cu|s/dst\[r \* LD + e\] = r < rows \&\& e < d/dst[r * LD + e] = r <= rows \&\& e < d/|*fused causal attention*"
  "copy_to_host: stream synchronisation dropped|cuda/runtime.cpp|/cudaMemcpyDeviceToHost, stream()), \"cudaMemcpyAsync (device to host)\");/{n;s/.*cudaStreamSynchronize.*//}|*copies both ways*"
  "row kernels: one block too few|cuda/common.cuh|s/  return static_cast<unsigned>(rows);/  return static_cast<unsigned>(rows - 1);/|*RMSNorm*"
)
failed=0
for m in "${mutations[@]}"; do
  IFS='|' read -r name file expr cases <<< "$m"
  cp "$root/$file" "$src/$file"
  sed -i -e "$expr" "$src/$file"
  if cmp -s "$root/$file" "$src/$file"; then
    echo "mutation NOT APPLIED (the sed matched nothing): $name"; failed=1; continue
  fi
  if ! cmake --build "$work/build" -j"$(nproc)" --target test_cuda > "$work/build.log" 2>&1; then
    echo "mutation does not compile: $name"; failed=1
  elif "$work/build/tests/test_cuda" "--test-case=$cases" > "$work/run.log" 2>&1; then
    echo "mutation SURVIVED: $name ($cases)"; failed=1
  else
    echo "mutation caught: $name, by $cases: $(grep -m1 -E 'ERROR|CRASH|differ' "$work/run.log" | cut -c1-200)"
  fi
  cp "$root/$file" "$src/$file"
done
exit "$failed"
