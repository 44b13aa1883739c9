# pip install from an existing korch build tree (included by the top-level CMakeLists.txt when
# KORCH_PYTHON_FROM_BUILD is set, e.g. `pip install -C cmake.define.KORCH_PYTHON_FROM_BUILD=build .`).
#
# Guarantees: nothing of korch is compiled in this project. Target korch_python brings the tree's
# _korch module and korch CLI up to date (`cmake --build TREE --target _korch korch`), and the install
# (component python) copies exactly those two files into the wheel's korch/ package. Configuring fails
# when TREE is not a configured korch build of this source tree with the Python module enabled;
# installing fails when the tree's module was built for another Python ABI than the one pip runs.

get_filename_component(_korch_tree "${KORCH_PYTHON_FROM_BUILD}" ABSOLUTE BASE_DIR "${CMAKE_SOURCE_DIR}")
if(NOT EXISTS "${_korch_tree}/CMakeCache.txt")
  message(FATAL_ERROR "KORCH_PYTHON_FROM_BUILD=${KORCH_PYTHON_FROM_BUILD}: ${_korch_tree} is not a configured "
    "CMake build tree (configure it first: cmake -S . -B build -G Ninja)")
endif()
load_cache("${_korch_tree}" READ_WITH_PREFIX _korch_tree_ CMAKE_HOME_DIRECTORY KORCH_BUILD_PYTHON)
file(REAL_PATH "${_korch_tree_CMAKE_HOME_DIRECTORY}" _korch_tree_source)
file(REAL_PATH "${CMAKE_SOURCE_DIR}" _korch_this_source)
if(NOT _korch_tree_source STREQUAL _korch_this_source)
  message(FATAL_ERROR "KORCH_PYTHON_FROM_BUILD: ${_korch_tree} is a build of ${_korch_tree_source}, "
    "not of ${_korch_this_source}")
endif()
if(DEFINED _korch_tree_KORCH_BUILD_PYTHON AND NOT _korch_tree_KORCH_BUILD_PYTHON)
  message(FATAL_ERROR "KORCH_PYTHON_FROM_BUILD: ${_korch_tree} was configured with KORCH_BUILD_PYTHON=OFF")
endif()
if(NOT SKBUILD_SOABI)
  message(FATAL_ERROR "KORCH_PYTHON_FROM_BUILD is for pip (scikit-build-core), which sets SKBUILD_SOABI")
endif()

add_custom_target(korch_python ALL
  COMMAND ${CMAKE_COMMAND} --build "${_korch_tree}" --target _korch korch
  COMMENT "Bringing _korch and korch up to date in ${_korch_tree}"
  USES_TERMINAL)

set(_korch_module "${_korch_tree}/python/korch/_korch.${SKBUILD_SOABI}.so")
install(CODE "
  if(NOT EXISTS \"${_korch_module}\")
    file(GLOB _built \"${_korch_tree}/python/korch/_korch*.so\")
    message(FATAL_ERROR \"KORCH_PYTHON_FROM_BUILD: ${_korch_tree} has no module for this Python \"
      \"(${SKBUILD_SOABI}), only: \${_built}. Configure that tree with -DPython_EXECUTABLE=<this python>, \"
      \"or pip install without KORCH_PYTHON_FROM_BUILD to compile korch for it.\")
  endif()" COMPONENT python)
install(FILES "${_korch_module}" DESTINATION korch COMPONENT python)
install(PROGRAMS "${_korch_tree}/korch" DESTINATION korch/bin COMPONENT python)
