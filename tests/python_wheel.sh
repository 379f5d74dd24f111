#!/usr/bin/env bash
# ctest python_wheel_tests: the wheel of the module this build already holds
# (setup.py with PHASOR_BUILT_DIR: no second build), made by `python3 -m build
# --wheel --no-isolation`, installed offline with pip into a
# fresh venv that sees the system's NumPy, torch and pytest; then python/tests
# run against the installed package, not build/python.
#   python_wheel.sh SOURCE BUILD WORK PYTHON
set -euo pipefail
src=$1 build=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work/src/python"
# What the wheel is made from, copied so that pip's build folder and egg-info land here, not in the source tree.
cp "$src/setup.py" "$src/pyproject.toml" "$src/README.md" "$src/CMakeLists.txt" "$work/src/"
cp "$src/python/stubgen.py" "$work/src/python/"
# The wheel by PyPA's front end (`python3 -m build`, Debian's python3-build), then installed by pip.
(cd "$work/src" && PHASOR_BUILT_DIR="$build" "$python" -m build --wheel --no-isolation --outdir "$work/dist" > "$work/build.log" 2>&1) ||
  { tail -20 "$work/build.log" >&2; exit 1; }
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-index --no-deps "$work"/dist/phasor-*.whl
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" -c \
  'import phasor, sys; assert phasor.__file__.startswith(sys.prefix), "not the installed module: " + phasor.__file__; print("installed:", phasor.__file__)'
exec env -u PYTHONPATH "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
