#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) and runs each
# for a bounded time from its committed seed corpus, fuzz/corpus/<target>/.
#   bash scripts/ci_fuzz.sh                 # every target, FUZZ_SECONDS (40) each
#   FUZZ_SECONDS=600 FUZZ_JOBS=1 bash scripts/ci_fuzz.sh config   # longer, one compile at a time
# New inputs go to build-fuzz/corpus/<target>/ (the committed seeds stay as they
# are); a crash is written to build-fuzz/artifacts/ and fails the script: add
# that file to fuzz/corpus/<target>/ and a doctest case that replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-40}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config data)
out=build-fuzz
mkdir -p "$out/obj" "$out/artifacts"

command -v clang++ >/dev/null || { echo "ci_fuzz: clang++ is missing (scripts/setup.sh installs clang)" >&2; exit 1; }
openblas_include=$(dirname "$(ls /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h /usr/include/openblas/cblas.h /usr/include/cblas.h 2>/dev/null | head -1)")
# OpenMP: clang's own runtime (libomp-dev) if present, otherwise GCC's libgomp
# with its omp.h, which every machine with build-essential has.
if echo '#include <omp.h>
int main() { return omp_get_max_threads() > 0 ? 0 : 1; }' | clang++ -x c++ -fopenmp - -o "$out/omp_probe" 2>/dev/null; then
  openmp=(-fopenmp)
else
  openmp=(-fopenmp=libgomp -idirafter "$(gcc -print-file-name=include)")
fi
flags=(-std=c++20 -gline-tables-only -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I. -I"$openblas_include" "${openmp[@]}")

# The library (everything but the CLI's main) once, with coverage for the fuzzer.
start=$(date +%s)
: > "$out/build.log"
sources=$(ls tensor/*.cpp autograd/*.cpp nn/*.cpp models/*.cpp models/data/*.cpp | grep -v '^models/main.cpp$')
# An object is rebuilt when its source or any header is newer than it.
newest_header=$(ls -t tensor/*.h autograd/*.h nn/*.h models/*.h models/data/*.h phasor.h | head -1)
export FUZZ_FLAGS="${flags[*]} -fsanitize=fuzzer-no-link" FUZZ_OUT=$out FUZZ_NEWEST_HEADER=$newest_header
echo "$sources" | xargs -P "${FUZZ_JOBS:-$(nproc)}" -I{} bash -c '
  src={}; obj=$FUZZ_OUT/obj/${src//\//_}.o
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$FUZZ_NEWEST_HEADER" -nt "$obj" ]; then
    clang++ $FUZZ_FLAGS -Wno-pass-failed -c "$src" -o "$obj" 2>> "$FUZZ_OUT/build.log" ||
      { echo "ci_fuzz: compiling $src failed (log in $FUZZ_OUT/build.log)" >&2; tail -30 "$FUZZ_OUT/build.log" >&2; exit 255; }
  fi'
rm -f "$out/libphasor_fuzz.a"
ar rcs "$out/libphasor_fuzz.a" $(for src in $sources; do echo "$out/obj/${src//\//_}.o"; done)
for t in "${targets[@]}"; do
  clang++ "${flags[@]}" -fsanitize=fuzzer "fuzz/fuzz_$t.cpp" "$out/libphasor_fuzz.a" -lopenblas -o "$out/fuzz_$t"
done
echo "ci_fuzz: built ${targets[*]} in $(( $(date +%s) - start )) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  if "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
       -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    echo "ci_fuzz: $t ok: $runs inputs in $seconds s, $cov, corpus $(ls "$out/corpus/$t" | wc -l) new + $(ls "fuzz/corpus/$t" | wc -l) seeds"
  else
    status=1
    echo "ci_fuzz: $t FAILED (log in $log):" >&2
    grep -A30 -m1 -E 'ERROR: |runtime error|fuzz_[a-z]*: ' "$log" >&2 || tail -40 "$log" >&2
    ls "$out/artifacts/$t-"* 2>/dev/null >&2 || true
  fi
done
exit $status
