#!/usr/bin/env bash
# Installs everything Phasor's build, tests and benchmarks need on a fresh
# Debian machine. Idempotent: when all packages are present it only checks.
set -euo pipefail

packages=(
  build-essential cmake                  # compiler and build (dpkg-dev's dpkg-shlibdeps: the .deb's dependencies)
  file                                   # CPack's DEB generator inspects the binaries with it (ctest package_consumer)
  jq                                     # bench/compare_libtorch reads its JSON lines with it (ctest compare_libtorch_refuses)
  libopenblas-dev libopenblas0-pthread   # CPU GEMM (LibTorch uses it too: without it, a slow reference BLAS)
  libdnnl-dev ocl-icd-opencl-dev         # oneDNN: float32 GEMMs (tensor/cpu/onednn_gemm.h); its CMake package needs OpenCL's
  doctest-dev libbenchmark-dev           # tests and micro-benchmarks
  libcli11-dev nlohmann-json3-dev        # command line and JSON
  bible-kjv                              # the built-in `kjv` corpus
  libtorch-dev                           # the LibTorch reference (parity tests, comparisons)
  clang libclang-rt-14-dev libomp-dev    # the sanitizer build and libFuzzer targets (clang, its OpenMP)
  openmpi-bin libopenmpi-dev             # multi-process training (mpirun; docs/distributed.md)
  python3-dev python3-pybind11           # the Python module (python/)
  python3-pytest python3-numpy python3-torch  # its tests: pytest, NumPy, PyTorch for the gradient convention
  python3-venv python3-setuptools python3-wheel python3-build  # the module's wheel, built and installed offline (ctest python_wheel_tests)
)

# The programs the build and the test suite run, beyond the compilers: a
# package above that stops providing one fails here, by name, instead of as one
# test failing in CI (a missing `file` once failed ctest package_consumer only
# on fresh machines).
commands=(cmake cpack ctest g++ clang++ file dpkg-deb dpkg-shlibdeps mpirun bible python3 jq)

check_commands() {
  local absent=()
  for c in "${commands[@]}"; do command -v "$c" >/dev/null || absent+=("$c"); done
  [ ${#absent[@]} -eq 0 ] || { echo "setup: commands the suite runs are missing after the install: ${absent[*]}" >&2; exit 1; }
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  check_commands
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
check_commands
