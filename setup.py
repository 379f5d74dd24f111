"""The build step behind pyproject.toml: setuptools runs the project's CMake
and packs the `phasor` module it builds (python/, target phasor_python) with
its type stubs (phasor.pyi, python/stubgen.py).

CMAKE_ARGS (e.g. "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache") passes options to the
configure step, CMAKE_BUILD_PARALLEL_LEVEL the number of compile jobs.
PHASOR_BUILT_DIR=FOLDER packs the module a CMake build folder already holds
(FOLDER/python/phasor*.so) instead of building one: CI installs the wheel of
the build it has just tested, without a second build (tests/python_wheel.sh).
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    """The version CMake is configured with (project(phasor VERSION x.y.z)), so the two never differ."""
    match = re.search(r"project\(phasor VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not match:
        sys.exit("setup.py: no project(phasor VERSION ...) in CMakeLists.txt")
    return match.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        prebuilt = os.environ.get("PHASOR_BUILT_DIR")
        build = pathlib.Path(prebuilt).resolve() if prebuilt else self.cmake_build()
        built = sorted((build / "python").glob("phasor*.so"))
        if not built:
            sys.exit(f"setup.py: no phasor*.so in {build / 'python'} (are python3-dev and python3-pybind11 installed?)")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)
        # Type stubs beside the module, written from the module just built.
        env = dict(os.environ, PYTHONPATH=str(target.parent))
        subprocess.run([sys.executable, str(ROOT / "python" / "stubgen.py"), str(target.parent / "phasor.pyi")], check=True, env=env)

    def cmake_build(self):
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DPHASOR_PYTHON=ON",
                     "-DPHASOR_BUILD_TESTS=OFF",  # the library and the module only
                     "-DPHASOR_MPI=OFF",  # distributed training is the CLI's: the module needs no MPI
                     *shlex.split(os.environ.get("CMAKE_ARGS", ""))]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "phasor_python"], check=True)
        return build


setup(
    version=project_version(),
    packages=[],  # one extension module, no Python package: nothing for setuptools to discover in the tree
    ext_modules=[Extension("phasor", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/pip"}},  # its own folder, apart from a CMake build in build/
)
