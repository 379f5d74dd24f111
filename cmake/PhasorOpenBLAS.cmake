# Phasor::OpenBLAS, the CPU GEMMs' library, found the same way by Phasor's own
# build and by the installed package's PhasorConfig.cmake (a static libphasor
# carries it to the program that links it). Sets PHASOR_OPENBLAS_FOUND, and
# PHASOR_OPENBLAS_MISSING (what was not found) when false.
# Debian installs the cblas header under an arch folder.
if(TARGET Phasor::OpenBLAS)
  set(PHASOR_OPENBLAS_FOUND TRUE)
  return()
endif()
find_path(PHASOR_OPENBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread /usr/include/x86_64-linux-gnu/openblas-pthread
        /usr/include/openblas /usr/include)
find_library(PHASOR_OPENBLAS_LIBRARY NAMES openblas)
if(PHASOR_OPENBLAS_INCLUDE_DIR AND PHASOR_OPENBLAS_LIBRARY)
  set(PHASOR_OPENBLAS_FOUND TRUE)
  add_library(Phasor::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(Phasor::OpenBLAS PROPERTIES
    IMPORTED_LOCATION "${PHASOR_OPENBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${PHASOR_OPENBLAS_INCLUDE_DIR}")
else()
  set(PHASOR_OPENBLAS_FOUND FALSE)
  set(PHASOR_OPENBLAS_MISSING "")
  if(NOT PHASOR_OPENBLAS_INCLUDE_DIR)
    list(APPEND PHASOR_OPENBLAS_MISSING "cblas.h")
  endif()
  if(NOT PHASOR_OPENBLAS_LIBRARY)
    list(APPEND PHASOR_OPENBLAS_MISSING "libopenblas")
  endif()
  list(JOIN PHASOR_OPENBLAS_MISSING " and " PHASOR_OPENBLAS_MISSING)
endif()
