#!/usr/bin/env bash
# The ctest test package_consumer: installs the build into a temporary prefix,
# makes the Debian package (cpack) and checks what it holds, checks that nothing
# installed names the build or source tree, builds
# tests/consumer/ against the package with find_package(Phasor), runs it, and
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
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DPHASOR_EXPECTED_VERSION="$version" "${launcher[@]}" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j2 > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
built=$(date +%s%N)
"$work/build/consumer"
[ "$("$work/prefix/bin/phasor" --version)" = "phasor $version" ]
if [ -n "$python" ]; then
  PYTHONPATH="$work/prefix/lib/python3/dist-packages" "$python" -c \
    "import phasor; assert phasor.__version__ == '$version', phasor.__version__; print('installed module: phasor', phasor.__version__, phasor.__file__)"
fi
echo "package_consumer: installed in $(((installed - start) / 1000000)) ms, Debian package in $(((packaged - installed) / 1000000)) ms, consumer configured and built in $(((built - packaged) / 1000000)) ms"
