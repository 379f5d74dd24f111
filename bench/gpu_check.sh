#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (sm_90 by default), in a few
# minutes, all results in ONE file ($OUT/gpu_check.txt, or gpu-results/ here):
#   1. binaries: the prebuilt ones staged in .gpu-deps/bin (bench/stage_gpu_deps.sh)
#      when they run here, else a build (CMAKE_CUDA_ARCHITECTURES=${ARCH:-90}) that
#      falls back to the headers and libraries staged in .gpu-deps/ for whatever
#      Debian package the machine lacks (PHASOR_BUILD=1 forces the build);
#   2. the cross-backend tests (tests/test_cuda: every Backend op, CPU vs CUDA);
#   3. the README's small model (complexformer, d_model 128, 4 layers, 4 heads,
#      d_ff 352, seq 128, batch 16) trained ${STEPS:-200} steps on the GPU and on
#      the CPU (concurrently), and the two loss curves compared;
#   4. the GPU benchmarks (bench/bench_cuda; SKIP_BENCH=1 leaves them out), the
#      fused causal attention's forward and forward + backward (TFLOP/s, ms at
#      N = 1024, 4096, 16384, head widths 32/64/128) last among them;
#   5. `phasor sweep --preset full --device cuda`, shortened, and train --log-heads on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/gpu-results}
mkdir -p "$out"
results=$out/gpu_check.txt
: >"$results"
work=$(mktemp -d /tmp/phasor-gpu.XXXXXX)
deps=$root/.gpu-deps
steps=${STEPS:-200}
status=0

say() { echo "$*" | tee -a "$results"; }
section() { say ""; say "==== $* [t=${SECONDS}s]"; }

section "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$results"
say "cpus: $(nproc); $(uname -sr)"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
say "nvcc: $(nvcc --version 2>/dev/null | tail -2 | head -1)"

# Staged libraries: only those the system lacks.
# Unpacked outside the tree; .gpu-deps/lib (what its cmake/ configs name) links there.
if [ -f "$deps/libs.tar.xz" ]; then
  tar -C "$work" -xJf "$deps/libs.tar.xz"
  for lib in libgomp.so.1 libgfortran.so.5 libquadmath.so.0; do
    ldconfig -p 2>/dev/null | grep -q "$lib" && rm -f "$work/lib/$lib"
  done
  ln -sfn "$work/lib" "$deps/lib"
  export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done

# ---- 1. binaries
bin=""
if [ "${PHASOR_BUILD:-0}" != 1 ] && [ -x "$deps/bin/test_cuda" ] && [ -x "$deps/bin/phasor" ]; then
  if ! ldd "$deps/bin/test_cuda" "$deps/bin/phasor" "$deps/bin/bench_cuda" 2>&1 | grep -q "not found" && "$deps/bin/phasor" --help >/dev/null 2>&1; then
    bin=$deps/bin
    say "binaries: prebuilt (.gpu-deps/bin)"
  else
    say "binaries: the prebuilt ones do not run here:"
    ldd "$deps/bin/test_cuda" "$deps/bin/phasor" 2>&1 | grep "not found" | tee -a "$results"
  fi
fi
if [ -z "$bin" ]; then
  section "build (sm_${ARCH:-90})"
  args=(-DCMAKE_BUILD_TYPE=Release -DPHASOR_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}")
  if [ ! -f /usr/include/doctest/doctest.h ] || [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/CLI/CLI.hpp ] ||
    ! ls /usr/lib/x86_64-linux-gnu/libopenblas.so >/dev/null 2>&1; then
    say "missing Debian packages: using .gpu-deps"
    args+=(-DCMAKE_PREFIX_PATH="$deps/cmake" "-DCMAKE_CXX_FLAGS=-isystem $deps/include" -DOPENBLAS_INCLUDE_DIR="$deps/include"
      -DOPENBLAS_LIBRARY="$deps/lib/libopenblas.so" -Dbenchmark_DIR="$deps/cmake")
  fi
  if ! cmake -S . -B build-gpu "${args[@]}" >"$work/cmake.log" 2>&1; then
    tail -30 "$work/cmake.log" | tee -a "$results"
    exit 1
  fi
  if ! cmake --build build-gpu -j "$(nproc)" --target test_cuda phasor_cli bench_cuda >"$work/build.log" 2>&1; then
    grep -E "error|Error" "$work/build.log" | head -40 | tee -a "$results"
    exit 1
  fi
  mkdir -p "$work/bin"
  ln -s "$root/build-gpu/tests/test_cuda" "$root/build-gpu/phasor" "$root/build-gpu/bench/bench_cuda" "$work/bin/"
  bin=$work/bin
  say "built in ${SECONDS}s"
fi

data=kjv
[ -f "$deps/kjv.txt" ] && data=$deps/kjv.txt
if [ -d "$deps/cache" ]; then  # the built-in corpora, prepared on the staging machine
  cp -r "$deps/cache" "$work/cache"
  export PHASOR_CACHE=$work/cache
fi
cpus=$(nproc)
cpu_threads=$((cpus > 6 ? cpus - 4 : 2))
model=(--data "$data" --position complexformer --d-model 128 --n-layers 4 --n-heads 4 --d-ff 352 --seq-len 128 --batch 16 --lr 3e-3)
train=(train "${model[@]}" --steps "$steps" --eval-every 100 --log-every 10)

# ---- 3a. the CPU run starts first (the long pole) and runs beside the tests and the GPU run
(OMP_NUM_THREADS=$cpu_threads timeout 420 "$bin/phasor" "${train[@]}" --device cpu --threads "$cpu_threads" --run-dir "$work/run-cpu" \
  >"$work/train-cpu.log" 2>&1
 echo $? >"$work/train-cpu.rc") &
cpu_job=$!

# ---- 2. tests
section "cross-backend tests: tests/test_cuda (CPU reference vs CUDA)"
(cd "$work" && OMP_NUM_THREADS=4 timeout 300 "$bin/test_cuda" >"$work/test.log" 2>&1)
rc=$?
if [ "$(wc -l <"$work/test.log")" -le 400 ]; then  # failures in full, then the summary
  tee -a "$results" <"$work/test.log"
else
  { head -360 "$work/test.log"; echo "[... $(wc -l <"$work/test.log") lines in all ...]"; tail -5 "$work/test.log"; } | tee -a "$results"
fi
say "test_cuda exit status: $rc$([ $rc -eq 77 ] && echo ' (skipped: no usable GPU)')"
[ $rc -eq 0 ] || status=1

# ---- 3b. the GPU run
section "training on the GPU: ${train[*]} --device cuda"
OMP_NUM_THREADS=4 timeout 300 "$bin/phasor" "${train[@]}" --device cuda --threads 4 --run-dir "$work/run-gpu" >"$work/train-gpu.log" 2>&1
rc=$?
tail -4 "$work/train-gpu.log" | tee -a "$results"
say "exit status: $rc"
[ $rc -eq 0 ] || status=1

section "training on the CPU ($cpu_threads threads, concurrent with the above)"
wait $cpu_job
tail -4 "$work/train-cpu.log" | tee -a "$results"
say "exit status: $(cat "$work/train-cpu.rc" 2>/dev/null)"

section "loss curves, CPU vs GPU"
python3 - "$work/run-cpu/log.jsonl" "$work/run-gpu/log.jsonl" <<'PY' 2>&1 | tee -a "$results"
import json, sys, math
def load(p):
    train, val, speed = {}, {}, []
    try:
        for line in open(p):
            r = json.loads(line)
            if "loss" in r and not r.get("skipped"): train[r["step"]] = r["loss"]
            if "val_loss" in r: val[r["step"]] = r["val_loss"]
            if "tokens_per_s" in r: speed.append(r["tokens_per_s"])
    except OSError as e:
        print("cannot read", p, e)
    return train, val, speed
ct, cv, cs = load(sys.argv[1]); gt, gv, gs = load(sys.argv[2])
print(f"{'step':>6} {'cpu loss':>10} {'gpu loss':>10} {'|diff|':>9}")
worst = 0.0
for s in sorted(set(ct) | set(gt)):
    c, g = ct.get(s, math.nan), gt.get(s, math.nan)
    d = abs(c - g)
    if d == d: worst = max(worst, d)
    print(f"{s:>6} {c:>10.4f} {g:>10.4f} {d:>9.4f}")
for s in sorted(set(cv) | set(gv)):
    print(f"validation at step {s}: cpu {cv.get(s, math.nan):.4f}  gpu {gv.get(s, math.nan):.4f}")
med = lambda v: sorted(v)[len(v) // 2] if v else math.nan
print(f"max |cpu - gpu| training loss over logged steps: {worst:.4f}")
print(f"median tokens/s: cpu {med(cs):.0f}  gpu {med(gs):.0f}  (speed-up {med(gs) / med(cs) if cs and gs else math.nan:.1f}x)")
PY
cp "$work/run-cpu/log.jsonl" "$out/log-cpu.jsonl" 2>/dev/null
cp "$work/run-gpu/log.jsonl" "$out/log-gpu.jsonl" 2>/dev/null

# ---- 4. benchmarks (the machine is quiet again); SKIP_BENCH=1 leaves them out
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  section "benchmarks: bench/bench_cuda"
  # 240 s (was 200): room for the fused-attention cases, estimated at 10-20 s, not yet measured.
  timeout 240 "$bin/bench_cuda" --benchmark_min_time=0.2 --benchmark_counters_tabular=true 2>&1 | tee -a "$results"
fi

# ---- 5. the experiment sweep's GPU path (the full preset, shortened) and --log-heads on the GPU
section "phasor sweep --preset full --device cuda, shortened (kjv and arith, ${SWEEP_STEPS:-60} steps, 1 seed)"
timeout "${SWEEP_TIMEOUT:-240}" "$bin/phasor" sweep --preset full --device cuda --tasks kjv arith --steps "${SWEEP_STEPS:-60}" \
  --seeds 1 --jobs 2 --eval-tokens 16384 --arith-problems 20 --throughput-rounds 1 --out "$work/sweep" >"$work/sweep.log" 2>&1
rc=$?
tail -3 "$work/sweep.log" | tee -a "$results"
[ -f "$work/sweep/report.md" ] && { cat "$work/sweep/report.md" >>"$results"; cp "$work/sweep/report.md" "$out/sweep-report.md"; }
say "sweep exit status: $rc"
[ $rc -eq 0 ] || status=1
section "train --log-heads on the GPU, then plot --heads"
OMP_NUM_THREADS=4 timeout 120 "$bin/phasor" train "${model[@]}" --steps 20 --device cuda --threads 4 --log-heads --log-every 5 \
  --run-dir "$work/run-heads" >"$work/heads.log" 2>&1 && "$bin/phasor" plot "$work/run-heads" --heads --out "$out/heads-gpu.svg" 2>&1 | tee -a "$results"
rc=${PIPESTATUS[0]}
tail -2 "$work/heads.log" | tee -a "$results"
say "log-heads exit status: $rc"
[ $rc -eq 0 ] || status=1

section "done in ${SECONDS}s (status $status)"
exit $status
