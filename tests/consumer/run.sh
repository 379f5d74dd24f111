#!/usr/bin/env bash
# The ctest test package_consumer: installs the build into a temporary prefix,
# makes the Debian package (cpack) and checks what it holds, checks that nothing
# installed names the build or source tree, builds tests/consumer/ against the
# package with find_package(Phasor) three times and runs each: the library
# alone (it must link no CUDA backend, CUDA, MPI or NCCL library), every
# component, and the application from the build tree (-DPhasor_DIR=BUILD_DIR),
# which without Phasor::cuda and Phasor::mpi must link no CUDA backend, MPI or NCCL; checks that a package
# folder lacking PhasorOpenBLAS.cmake is reported as such;
# runs the installed CLI and Python module.
#   run.sh BUILD_DIR WORK_DIR VERSION [PYTHON]
set -euo pipefail
build=$1 work=$2 version=$3 python=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
start=$(date +%s%N)
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
installed=$(date +%s%N)
# The Debian package holds the same tree under /usr.
(cd "$build" && cpack -G DEB -B "$work/deb" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; exit 1; }
deb=$(ls "$work"/deb/phasor_"$version"_*.deb)
contents=$(dpkg-deb -c "$deb")
for f in 'usr/bin/phasor' 'usr/lib/cmake/Phasor/PhasorConfig\.cmake' 'usr/lib/libphasor\.(a|so)' 'usr/include/phasor/phasor\.h'; do
  grep -qE " \./$f\$" <<< "$contents" || { echo "package_consumer: $deb lacks /$f" >&2; exit 1; }
done
packaged=$(date +%s%N)
# The package must work from anywhere: no path of the build or the sources in its CMake files.
if grep -rlF -e "$(cd "$build" && pwd)" -e "$source_dir" "$work/prefix/lib/cmake"; then
  echo "package_consumer: the installed CMake files above name the build or source tree" >&2
  exit 1
fi
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# build_consumer NAME COMPONENTS CMAKE_ARGS...: configures, builds and runs the consumer in $work/NAME.
build_consumer() {
  local name=$1 components=$2
  shift 2
  cmake -S "$here" -B "$work/$name" "$@" -DPHASOR_COMPONENTS="$components" -DPHASOR_EXPECTED_VERSION="$version" "${launcher[@]}" \
    > "$work/$name.configure.log" 2>&1 || { cat "$work/$name.configure.log" >&2; exit 1; }
  cmake --build "$work/$name" -j2 > "$work/$name.build.log" 2>&1 || { cat "$work/$name.build.log" >&2; exit 1; }
  "$work/$name/consumer"
}
# The library alone: a CPU-only program. Neither its link line nor the
# executable names a CUDA backend, CUDA, MPI or NCCL library, and it holds no
# CUDA backend code.
build_consumer cpu_only "phasor" -DCMAKE_PREFIX_PATH="$work/prefix"
unwanted='phasor_cuda|cublas|cudart|libcuda|mpi|nccl'
if grep -Eo "[^ ]*($unwanted)[^ ]*" "$work/cpu_only/CMakeFiles/consumer.dir/link.txt"; then
  echo "package_consumer: a consumer of Phasor::phasor alone links the libraries above" >&2
  exit 1
fi
if readelf -d "$work/cpu_only/consumer" | grep NEEDED | grep -E "$unwanted"; then
  echo "package_consumer: a consumer of Phasor::phasor alone needs the libraries above" >&2
  exit 1
fi
if nm -C --defined-only "$work/cpu_only/consumer" | grep -F 'phasor::gpu::'; then
  echo "package_consumer: a consumer of Phasor::phasor alone holds the CUDA backend's code above" >&2
  exit 1
fi
# No COMPONENTS: every component built (the CUDA backend, device cuda, and MPI where they were built).
build_consumer all "" -DCMAKE_PREFIX_PATH="$work/prefix"
# The build tree as a package, as export() writes it; the application without
# Phasor::cuda and Phasor::mpi links no CUDA backend, CUDA, MPI or NCCL (it
# trains on the CPU; --cuda-graph reaches CUDA Graphs through the backend a
# program links), and device cuda is refused in it (tests/consumer/main.cpp).
build_consumer build_tree "phasor;app" -DPhasor_DIR="$(cd "$build" && pwd)"
if grep -Eo "[^ ]*($unwanted)[^ ]*" "$work/build_tree/CMakeFiles/consumer.dir/link.txt"; then
  echo "package_consumer: a consumer of Phasor::app alone links the libraries above" >&2
  exit 1
fi
# A package folder that lacks a file says so, rather than blaming OpenBLAS.
mkdir -p "$work/partial"
cp "$work/prefix/lib/cmake/Phasor/PhasorConfig"*.cmake "$work/partial/"
if cmake -S "$here" -B "$work/partial_build" -DPhasor_DIR="$work/partial" -DPHASOR_EXPECTED_VERSION="$version" \
     > "$work/partial.configure.log" 2>&1 ||
   ! tr -s ' \n' ' ' < "$work/partial.configure.log" | grep -q "lacks PhasorOpenBLAS.cmake"; then  # CMake wraps the message
  cat "$work/partial.configure.log" >&2
  echo "package_consumer: a package folder without PhasorOpenBLAS.cmake was not reported as such" >&2
  exit 1
fi
built=$(date +%s%N)
[ "$("$work/prefix/bin/phasor" --version)" = "phasor $version" ]
if [ -n "$python" ]; then
  PYTHONPATH="$work/prefix/lib/python3/dist-packages" "$python" -c \
    "import phasor; assert phasor.__version__ == '$version', phasor.__version__; print('installed module: phasor', phasor.__version__, phasor.__file__)"
fi
echo "package_consumer: installed in $(((installed - start) / 1000000)) ms, Debian package in $(((packaged - installed) / 1000000)) ms, three consumers configured, built and run in $(((built - packaged) / 1000000)) ms"
