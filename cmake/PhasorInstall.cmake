# `cmake --install build --prefix P` installs the package another project
# finds with find_package(Phasor): the headers under P/include/phasor (laid out
# as at the repository root: #include "phasor.h"), the libraries, the `phasor`
# CLI, the Python module, and P/lib/cmake/Phasor/ with one targets file per
# component (find_package(Phasor COMPONENTS ...) loads those asked for):
#   phasor  Phasor::phasor, the library: CPU only, links no CUDA, MPI or NCCL library
#   cuda    Phasor::cuda, the CUDA backend (device `cuda`), where it was built
#   app     Phasor::app (training, evaluation, generation; with CUDA built it
#           needs the backend) and Phasor::cli, the executable
#   mpi     Phasor::mpi, distributed training's MPI (and NCCL) transports, where built
# `cpack -G DEB` in the build folder makes the same tree a Debian package. The
# build folder is a package too (-DPhasor_DIR=build): export() writes the same
# targets files there, naming the build tree's libraries and headers.
include(CMakePackageConfigHelpers)
set(PHASOR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Phasor)

install(FILES phasor.h ${PROJECT_BINARY_DIR}/generated/phasor_version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/phasor)
# app/cli/ is left out: its headers are the `phasor` executable's own (its
# commands' table, the CLI11 wrapper), compiled into no installed library.
install(DIRECTORY tensor autograd nn models app DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/phasor FILES_MATCHING PATTERN "*.h"
        PATTERN "cli" EXCLUDE)

# A shared libphasor is found from the installed CLI and module through the RPATH.
if(BUILD_SHARED_LIBS)
  set_target_properties(phasor_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
# One export set, and targets file, per component: PhasorTargets.cmake (phasor),
# PhasorCudaTargets.cmake, PhasorAppTargets.cmake.
function(phasor_export_component set)
  install(TARGETS ${ARGN} EXPORT ${set}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ${set} NAMESPACE Phasor:: DESTINATION ${PHASOR_CMAKE_DIR})
  export(EXPORT ${set} NAMESPACE Phasor:: FILE ${PROJECT_BINARY_DIR}/${set}.cmake)
endfunction()
phasor_export_component(PhasorTargets phasor)
if(PHASOR_CUDA)
  phasor_export_component(PhasorCudaTargets phasor_cuda)
endif()
phasor_export_component(PhasorAppTargets phasor_app phasor_cli)
if(TARGET phasor_mpi)
  phasor_export_component(PhasorMpiTargets phasor_mpi)
endif()

# What the config must find again: the dependencies in the targets' link
# interfaces (a static library carries even its private ones).
if(TARGET phasor_mpi)
  set(PHASOR_CONFIG_MPI ON)
else()
  set(PHASOR_CONFIG_MPI OFF)
endif()
foreach(flag PHASOR_CONFIG_MPI_NEEDS_CUDA PHASOR_CONFIG_MPI_LINKS_CUDA)
  if(NOT ${flag})
    set(${flag} OFF)
  endif()
endforeach()
configure_package_config_file(cmake/PhasorConfig.cmake.in ${PROJECT_BINARY_DIR}/PhasorConfig.cmake
  INSTALL_DESTINATION ${PHASOR_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PhasorConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/PhasorConfig.cmake ${PROJECT_BINARY_DIR}/PhasorConfigVersion.cmake
              cmake/PhasorOpenBLAS.cmake
        DESTINATION ${PHASOR_CMAKE_DIR})
# The build tree's package: the config beside the exported targets, as installed.
configure_file(cmake/PhasorOpenBLAS.cmake ${PROJECT_BINARY_DIR}/PhasorOpenBLAS.cmake COPYONLY)

# The Debian package: the installed tree under /usr.
set(CPACK_PACKAGE_NAME phasor)
set(CPACK_PACKAGE_VENDOR "Phasor")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "complex-valued tensors with reverse-mode autodiff, and the ComplexFormer language model")
set(CPACK_PACKAGE_CONTACT "Phasor maintainers <phasor@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the CLI's and module's shared libraries, from dpkg-shlibdeps
# What a program built against the headers and the static libraries needs.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas-dev, nlohmann-json3-dev, libgomp1")
if(dnnl_FOUND)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libdnnl-dev, ocl-icd-opencl-dev")  # dnnl's CMake package needs OpenCL
endif()
if(PHASOR_CONFIG_MPI)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
if(phasor_python_found)  # the module is built for this minor version of Python
  math(EXPR next_minor "${Python3_VERSION_MINOR} + 1")
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${next_minor}), python3-numpy")
endif()
include(CPack)
