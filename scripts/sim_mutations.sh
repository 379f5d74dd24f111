#!/usr/bin/env bash
# Mutation check of the CUDA simulator (docs/design.md, docs/cuda-launch-sites.md):
# each mutation below is applied to a copy of the sources, test_cuda is rebuilt
# on the simulator and run on the cases that execute the mutated code; a
# mutation that no case catches is a failure of this script. The list covers
# every __syncthreads() of cuda/ (checked: one left out is a failure too).
# Slow (a build, then a rebuild per mutation that is not a barrier): run by hand, not in CI.
#   bash scripts/sim_mutations.sh [build-dir]     # default build-mutations/
#   ONLY=regex bash scripts/sim_mutations.sh      # the mutations whose name matches (grep -E)
#   REV=HEAD bash scripts/sim_mutations.sh        # a commit's sources, not the working tree's
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${1:-$root/build-mutations}
orig=$work/orig  # the unmutated sources (then with the barriers made switchable)
src=$work/src    # the sources built, one file mutated at a time
jobs=${JOBS:-2}
mkdir -p "$work"
rm -rf "$orig" && mkdir -p "$orig"
if [ -n "${REV:-}" ]; then
  git -C "$root" archive "$REV" | tar -x -C "$orig"
else
  git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$orig")  # the tracked sources
fi
rm -rf "$src" && cp -r "$orig" "$src"  # new time stamps: nothing built from an earlier (mutated) run is kept
cmake -S "$src" -B "$work/build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DPHASOR_CUDA_SIM=ON -DPHASOR_PYTHON=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache > "$work/configure.log" 2>&1
# test_cuda and the libraries it links, not the CLI that every test target waits for.
build_test() {
  cmake --build "$work/build" -j"$jobs" --target phasor phasor_cuda doctest_main > "$work/build.log" 2>&1 &&
    cmake --build "$work/build" -j"$jobs" --target test_cuda/fast >> "$work/build.log" 2>&1
}

# (doctest splits filters at commas: `?` stands for the commas in case names)
attn='*fused op attention_forward*,*fused op attention_backward*'
fallback='*fused causal attention?s fallback*,*fused op attention_forward*,*fused op attention_backward*'
# Barriers: name | file | function | which barrier of the function (1 = first) | doctest cases that must catch it
barriers=(
  "block_reduce: 1st barrier (the warp partials)|cuda/common.cuh|block_reduce|1|*sum over any dims*,*logsumexp*,*fused op attention_softmax*"
  "block_reduce: 2nd barrier (the block total)|cuda/common.cuh|block_reduce|2|*sum over any dims*,*logsumexp*,*fused op attention_softmax*"
  "extreme_kernel: its barrier (the warp bests)|cuda/reduce.cu|extreme_kernel|1|*max and min*"
  "rotate_kernel: its barrier (the table row in shared memory)|cuda/rotation.cu|rotate_kernel|1|*fused op rotate*"
  "block_phases: its barrier (the block's phase terms in shared memory)|cuda/rotation.cu|block_phases|1|*fused op cmha_rotate*"
  "cmha_backward_kernel: its barrier (the column partials)|cuda/rotation.cu|cmha_backward_kernel|1|*fused op cmha_rotate*"
  "for_each_tile: 1st barrier (the previous tile's readers; the tile loop of the three tiled kernels)|cuda/attention.cu|for_each_tile|1|$attn"
  "for_each_tile: 2nd barrier (the tile loads)|cuda/attention.cu|for_each_tile|2|$attn"
  "for_each_tile: 3rd barrier (the P, dS tiles)|cuda/attention.cu|for_each_tile|3|$attn"
  "attention_forward_simple_kernel: its barrier (the query row)|cuda/attention.cu|attention_forward_simple_kernel|1|$fallback"
  "attention_dq_simple_kernel: 1st barrier (the query and gradient rows)|cuda/attention.cu|attention_dq_simple_kernel|1|$fallback"
  "attention_dq_simple_kernel: 2nd barrier (the chunk's dS)|cuda/attention.cu|attention_dq_simple_kernel|2|$fallback"
  "attention_dq_simple_kernel: 3rd barrier (ds rewritten by the next chunk)|cuda/attention.cu|attention_dq_simple_kernel|3|$fallback"
  "attention_dkdv_simple_kernel: 1st barrier (the key and value rows)|cuda/attention.cu|attention_dkdv_simple_kernel|1|$fallback"
  "attention_dkdv_simple_kernel: 2nd barrier (the chunk's P and dS)|cuda/attention.cu|attention_dkdv_simple_kernel|2|$fallback"
  "attention_dkdv_simple_kernel: 3rd barrier (ps, ds rewritten by the next chunk)|cuda/attention.cu|attention_dkdv_simple_kernel|3|$fallback"
  "exclusive_scan_kernel: 1st barrier (the threads' sums)|cuda/index.cu|exclusive_scan_kernel|1|*index_select? index_add*"
  "exclusive_scan_kernel: 2nd barrier (the scanned sums)|cuda/index.cu|exclusive_scan_kernel|2|*index_select? index_add*"
)
# Other mutations: name | file | sed expression | doctest cases that must catch it
edits=(
  "load_tile: tile bound off by one|cuda/attention.cu|s/dst\[r \* LD + e\] = r < rows \&\& e < d/dst[r * LD + e] = r <= rows \&\& e < d/|$attn"
  "copy_to_host: stream synchronisation dropped|cuda/runtime.cpp|/cudaMemcpyDeviceToHost, stream()), \"cudaMemcpyAsync (device to host)\");/{n;s/.*cudaStreamSynchronize.*//}|*copies both ways*"
  "row kernels: one block too few|cuda/common.cuh|s/  return static_cast<unsigned>(rows);/  return static_cast<unsigned>(rows - 1);/|*fused op rms_norm*"
)

# The line of the k-th `__syncthreads();` in the function `fn` of `file` (a
# function starts at an unindented line naming it with a `(`, ends at `}`).
barrier_line() {
  awk -v fn="$2" -v k="$3" '
    /^[^ \/#]/ && $0 ~ ("[ *]" fn "\\(") && $0 !~ /;$/ { in_fn = 1; seen = 0; next }
    /^}/ { in_fn = 0 }
    in_fn && /__syncthreads\(\);/ && ++seen == k { print NR; exit }' "$1"
}

selected() { [ -z "${ONLY:-}" ] || grep -qE -- "$ONLY" <<< "$1"; }

failed=0
# Every barrier of cuda/ is in the list, once.
listed=$(for m in "${barriers[@]}"; do
  IFS='|' read -r name file fn k cases <<< "$m"
  line=$(barrier_line "$orig/$file" "$fn" "$k")
  [ -n "$line" ] || echo "barrier not found: $name" >&2
  echo "$file:$line"
done | sort)
present=$(cd "$orig" && grep -n '__syncthreads();' cuda/*.cu cuda/*.cuh | cut -d: -f1,2 | sort)
if [ "$listed" != "$present" ]; then
  echo "the barrier list does not match cuda/'s __syncthreads() one to one:"
  diff <(echo "$listed") <(echo "$present") || true
  failed=1
fi

# The barriers are removed at run time, so that one build serves them all: in
# the copy, barrier i of the list becomes `if (!phasor_mutant(i)) __syncthreads();`,
# skipped when PHASOR_MUTANT=i (a uniform condition: the same as deleting it).
cat > "$work/mutant.h" <<'H'
#pragma once
#include <cstdlib>
inline bool phasor_mutant(int i) {
  static const int chosen = std::getenv("PHASOR_MUTANT") ? std::atoi(std::getenv("PHASOR_MUTANT")) : 0;
  return chosen == i;
}
H
i=0
for m in "${barriers[@]}"; do
  IFS='|' read -r name file fn k cases <<< "$m"
  i=$((i + 1))
  line=$(barrier_line "$orig/$file" "$fn" "$k")
  [ -z "$line" ] || sed -i "${line}s/__syncthreads();/if (!phasor_mutant($i)) __syncthreads();/" "$orig/$file"
done
for f in $(grep -l 'phasor_mutant(' "$orig"/cuda/*.cu "$orig"/cuda/*.cuh); do sed -i "1i #include \"$work/mutant.h\"" "$f"; done
for f in $(cd "$orig" && grep -l 'phasor_mutant(' cuda/*.cu cuda/*.cuh); do cp "$orig/$f" "$src/$f"; done

# The unmutated copy passes every case the mutations use (else "caught" means nothing).
all_cases=$(for m in "${barriers[@]}" "${edits[@]}"; do if selected "${m%%|*}"; then echo "${m##*|}"; fi; done | tr ',' '\n' | sort -u | paste -sd,)
if ! build_test; then
  echo "the unmutated sources do not build (log: $work/build.log)"; exit 1
fi
if ! "$work/build/tests/test_cuda" "--test-case=$all_cases" > "$work/run.log" 2>&1; then
  echo "the unmutated sources fail the cases (log: $work/run.log)"; exit 1
fi
# Each filter names a case (a filter that matches none would pass any mutant off as caught).
IFS=, read -ra filters <<< "$all_cases"
for c in "${filters[@]}"; do
  n=$("$work/build/tests/test_cuda" "--test-case=$c" --list-test-cases 2>&1 | grep -c '^cuda: ' || true)
  [ "$n" -gt 0 ] || { echo "no test case matches the filter $c"; exit 1; }
done

# Runs the cases on the mutant; PHASOR_MUTANT (if any) already set.
judge() {
  local name=$1 cases=$2
  local rc=0
  timeout 900 "$work/build/tests/test_cuda" "--test-case=$cases" > "$work/run.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "mutation SURVIVED: $name ($cases)"; failed=1
  elif [ "$rc" = 124 ]; then  # e.g. a heap corrupted by the mutant: doctest's signal handler then hangs in malloc
    echo "mutation caught: $name, by $cases: the run hung (killed after 900 s)"
  else
    echo "mutation caught: $name, by $cases: $(grep -m1 -E 'differ|ERROR|CRASH' "$work/run.log" | cut -c1-220)"
  fi
}

i=0
for m in "${barriers[@]}"; do
  IFS='|' read -r name file fn k cases <<< "$m"
  i=$((i + 1))
  selected "$name" || continue
  PHASOR_MUTANT=$i judge "$name" "$cases"
done
for m in "${edits[@]}"; do
  IFS='|' read -r name file expr cases <<< "$m"
  selected "$name" || continue
  sed -e "$expr" "$orig/$file" > "$src/$file"
  if cmp -s "$orig/$file" "$src/$file"; then
    echo "mutation NOT APPLIED: $name"; failed=1
  elif ! build_test; then
    echo "mutation does not compile: $name"; failed=1
  else
    judge "$name" "$cases"
  fi
  cp "$orig/$file" "$src/$file"  # a new time stamp: the next build undoes the mutation
done
exit "$failed"
