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
#   5. GPT-2-small-sized ComplexFormer and RoPE (d_model 768, 12 layers, 12 heads,
#      seq 1024, byte vocabulary) in TF32 and in bf16, each eager and with --cuda-graph:
#      tokens/s and the model-FLOP utilisation against the H200's dense peaks
#      (SKIP_GPT2=1 leaves them out);
#   6. `phasor sweep --preset full --device cuda`, shortened, and train --log-heads on the GPU.
# SIM=BUILD_DIR runs every section, shortened, on a build made on the CUDA
# simulator (-DPHASOR_CUDA_SIM=ON, which the README's test command makes without
# a GPU): ctest's gpu_check_sim, so that the script cannot rot between GPU runs.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/gpu-results}
mkdir -p "$out"
results=$out/gpu_check.txt
: >"$results"
work=$(mktemp -d /tmp/phasor-gpu.XXXXXX)
[ -n "${SIM:-}" ] && trap 'rm -rf "$work"' EXIT  # a GPU machine keeps it for a look afterwards
deps=$root/.gpu-deps
steps=${STEPS:-200}
status=0

say() { echo "$*" | tee -a "$results"; }
section() { say ""; say "==== $* [t=${SECONDS}s]"; }

sim=${SIM:-}
section "machine"
if [ -n "$sim" ]; then
  say "simulated: the CUDA simulator of the build in $sim (every section shortened; speeds and MFU mean nothing here)"
else
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$results"
fi
say "cpus: $(nproc); $(uname -sr)"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
[ -n "$sim" ] || say "nvcc: $(nvcc --version 2>/dev/null | tail -2 | head -1)"
# Sizes: the real run's, or the simulator's few steps of small models.
sweep_steps=${SWEEP_STEPS:-60} heads_steps=20
[ -n "$sim" ] && steps=${STEPS:-4} heads_steps=3

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
if [ -n "$sim" ]; then  # the simulator build's own binaries
  mkdir -p "$work/bin"
  for b in "$sim/phasor" "$sim/tests/test_cuda" "$sim/bench/bench_cuda"; do [ -x "$b" ] && ln -s "$(cd "$(dirname "$b")" && pwd)/$(basename "$b")" "$work/bin/"; done
  [ -x "$work/bin/phasor" ] && [ -x "$work/bin/test_cuda" ] || { say "SIM=$sim: no phasor and tests/test_cuda there"; exit 1; }
  bin=$work/bin
  say "binaries: the simulator build in $sim"
elif [ "${PHASOR_BUILD:-0}" != 1 ] && [ -x "$deps/bin/test_cuda" ] && [ -x "$deps/bin/phasor" ]; then
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
[ -n "$sim" ] && model=(--data "$data" --position complexformer --d-model 32 --n-layers 2 --n-heads 4 --d-ff 48 --seq-len 32 --batch 2 --lr 3e-3)
train=(train "${model[@]}" --steps "$steps" --eval-every 100 --log-every 10)

# ---- 3a. the CPU run starts first (the long pole) and runs beside the tests and the GPU run
(OMP_NUM_THREADS=$cpu_threads timeout 420 "$bin/phasor" "${train[@]}" --device cpu --threads "$cpu_threads" --run-dir "$work/run-cpu" \
  >"$work/train-cpu.log" 2>&1
 echo $? >"$work/train-cpu.rc") &
cpu_job=$!

# ---- 2. tests
section "cross-backend tests: tests/test_cuda (CPU reference vs CUDA)"
test_filter=()
[ -n "$sim" ] && test_filter=(-tc="cuda: matmul*,cuda: bfloat16 matmul*,cuda: a bf16*")  # ctest runs the whole of it
(cd "$work" && OMP_NUM_THREADS=4 timeout 300 "$bin/test_cuda" "${test_filter[@]}" >"$work/test.log" 2>&1)
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
  if [ ! -x "$bin/bench_cuda" ]; then
    say "no bench_cuda in this build (the benchmarks are built with -DPHASOR_BENCH=ON)"
    [ -n "$sim" ] || status=1
  elif [ -n "$sim" ]; then
    timeout 120 "$bin/bench_cuda" --benchmark_filter='BM_DeviceCopy' --benchmark_min_time=0.01 2>&1 | tee -a "$results"
  else
    # 240 s (was 200): room for the fused-attention cases, estimated at 10-20 s, not yet measured.
    timeout 240 "$bin/bench_cuda" --benchmark_min_time=0.2 --benchmark_counters_tabular=true 2>&1 | tee -a "$results"
  fi
fi

# ---- 5. GPT-2-small-sized models, TF32 and bf16: tokens/s and MFU; SKIP_GPT2=1 leaves them out
if [ "${SKIP_GPT2:-0}" != 1 ]; then
  if [ -n "$sim" ]; then
    gpt2=(--d-model 48 --n-layers 2 --n-heads 4 --d-ff 128 --seq-len 64 --max-seq-len 64 --batch 2) gpt2_steps=3 gpt2_log=1
  else  # GPT-2 small's width, depth and heads; SwiGLU's 2048 = 2/3 of GPT-2's 3072, for the same parameters
    gpt2=(--d-model 768 --n-layers 12 --n-heads 12 --d-ff 2048 --seq-len 1024 --max-seq-len 1024 --batch ${GPT2_BATCH:-8}) gpt2_steps=${GPT2_STEPS:-30} gpt2_log=5
  fi
  section "GPT-2-small-sized models (${gpt2[*]}), ${gpt2_steps} steps each: tokens/s and MFU against the H200's dense peaks"
  for position in complexformer rope; do
    for precision in tf32 bf16; do
     for launch in eager graph; do  # graph: --cuda-graph, the step captured once and replayed
      run=$work/gpt2-$position-$precision-$launch
      if [ $precision = tf32 ]; then tf32=1 flag=float32; else tf32=0 flag=bf16; fi
      graph=()
      [ $launch = graph ] && graph=(--cuda-graph)
      PHASOR_TF32=$tf32 OMP_NUM_THREADS=4 timeout 150 "$bin/phasor" train --data "$data" --position $position "${gpt2[@]}" \
        --steps "$gpt2_steps" --log-every "$gpt2_log" --eval-every 0 --eval-windows 1 --warmup 2 --device cuda --threads 4 \
        --precision $flag "${graph[@]}" --run-dir "$run" >"$run.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] || { tail -3 "$run.log" | tee -a "$results"; status=1; }
      "$bin/phasor" info --json "$run" >"$run.info" 2>/dev/null
      python3 - "$position" "$precision $launch" "$run/log.jsonl" "$run.info" "$rc" "${sim:+sim}" <<'PY' 2>&1 | tee -a "$results"
import json, sys
position, label, log, info, rc, sim = sys.argv[1:7]
precision = label.split()[0]
peak = {"tf32": 494.7e12, "bf16": 989.4e12}[precision]  # H200 SXM, dense
try:
    cfg = json.load(open(info))
    c, n = cfg["config"], cfg["parameters"]
    rows = [json.loads(l) for l in open(log)]
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:]  # the first interval holds the warm-up
    speed = sorted(speeds)[len(speeds) // 2] if speeds else float("nan")
except (OSError, ValueError, KeyError) as e:
    print(f"{position:>13} {label}: no result (exit status {rc}; {e})")
    sys.exit(0)
seq = json.load(open(log.replace("log.jsonl", "config.json")))["seq_len"]
# Model FLOPs per token: 6 N for the weights' forward and backward, and 12 L d seq for attention's two products.
flops = 6 * n + 12 * c["n_layers"] * c["d_model"] * seq
mfu = "n/a (simulated)" if sim else f"{100 * speed * flops / peak:.1f}% of {peak / 1e12:.0f} TFLOP/s"
print(f"{position:>13} {label}: {speed:,.0f} tokens/s (median of {len(speeds)} intervals), {n / 1e6:.1f} M parameters, "
      f"{flops / 1e9:.2f} GFLOP/token, MFU {mfu}")
PY
     done
    done
  done
fi

# ---- 5. the experiment sweep's GPU path (the full preset, shortened) and --log-heads on the GPU
section "phasor sweep --preset full --device cuda, shortened (kjv and arith, ${sweep_steps} steps, 1 seed)"
if [ -n "$sim" ]; then  # the preset's cells train its own model, 8,192 tokens a step: minutes a step on the simulator
  say "left out on the simulator (test_sweep covers the sweep's logic on the CPU)"
else
  timeout "${SWEEP_TIMEOUT:-240}" "$bin/phasor" sweep --preset full --device cuda --tasks kjv arith --steps "$sweep_steps" \
    --seeds 1 --jobs 2 --eval-tokens 16384 --arith-problems 20 --throughput-rounds 1 --out "$work/sweep" >"$work/sweep.log" 2>&1
  rc=$?
  tail -3 "$work/sweep.log" | tee -a "$results"
  [ -f "$work/sweep/report.md" ] && { cat "$work/sweep/report.md" >>"$results"; cp "$work/sweep/report.md" "$out/sweep-report.md"; }
  say "sweep exit status: $rc"
  [ $rc -eq 0 ] || status=1
fi
section "train --log-heads on the GPU, then plot --heads"
OMP_NUM_THREADS=4 timeout 120 "$bin/phasor" train "${model[@]}" --steps "$heads_steps" --device cuda --threads 4 --log-heads --log-every 5 \
  --run-dir "$work/run-heads" >"$work/heads.log" 2>&1 && "$bin/phasor" plot "$work/run-heads" --heads --out "$out/heads-gpu.svg" 2>&1 | tee -a "$results"
rc=${PIPESTATUS[0]}
tail -2 "$work/heads.log" | tee -a "$results"
say "log-heads exit status: $rc"
[ $rc -eq 0 ] || status=1

section "done in ${SECONDS}s (status $status)"
exit $status
