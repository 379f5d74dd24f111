# What the Python module (python/) needs: Python's development files and
# pybind11; and what its tests import (pytest, NumPy, PyTorch for the gradient
# convention). Sets phasor_python_found / phasor_python_missing and
# phasor_python_test_modules_found / phasor_python_test_missing.
#
# Debian's python3-numpy, -pytest and -torch belong to /usr/bin/python3: prefer
# it over another python3 earlier on PATH (pyenv, conda), unless
# -DPython3_EXECUTABLE names one.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
set(phasor_python_found FALSE)
set(phasor_python_test_modules_found FALSE)
if(NOT Python3_Development.Module_FOUND)
  set(phasor_python_missing "Python's development files (python3-dev)")
  return()
endif()
find_package(pybind11 CONFIG QUIET)
if(NOT pybind11_FOUND)
  set(phasor_python_missing "pybind11 (python3-pybind11)")
  return()
endif()
set(phasor_python_found TRUE)
message(STATUS "Python ${Python3_VERSION} (${Python3_EXECUTABLE}) and pybind11 ${pybind11_VERSION}: the Python module is built")

execute_process(COMMAND ${Python3_EXECUTABLE} -c
  "import importlib.util as u; print(' '.join(m for m in ('pytest', 'numpy', 'torch') if u.find_spec(m) is None))"
  OUTPUT_VARIABLE absent OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(rc EQUAL 0 AND absent STREQUAL "")
  set(phasor_python_test_modules_found TRUE)
else()
  set(phasor_python_test_missing "the Python modules ${absent} for ${Python3_EXECUTABLE} (python3-pytest, python3-numpy, python3-torch)")
endif()
