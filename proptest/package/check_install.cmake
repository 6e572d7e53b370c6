# What `cmake --install` lays down (docs/integration.md, "What is installed"): the headers of core,
# spec, spec/refinement and driver, the driver's library, the CMake package and the LICENSE (component `pfx`);
# the headers, library and export of pfx::engines (component `engines`); the pfx program (component
# `program`); the headers, library and export of pfx::conform (component `conform`), and of
# pfx::llama when it was built (component `llama`). Nothing else: no test code, no proptest/ header, no Markdown, no build-only header. The package states
# its license (pfx_LICENSE, an SPDX identifier). A folder's headers are those of its include/: the
# private ones of its src/ (engines/src/dcp_sharding.hpp, reference_forward.hpp) are never expected.
#
# Installs the build tree PFX_BUILD_DIR into WORK_DIR, once whole and once per component, and fails
# unless each holds exactly the files expected from the source tree PFX_SOURCE_DIR; every installed
# header includes only standard, Boost or installed pfx headers; and the installed package is found
# with pfx::engines when the component is there, and without it (COMPONENTS engines failing) when not.
#
#   cmake -DPFX_BUILD_DIR=... -DPFX_SOURCE_DIR=... -DWORK_DIR=... -DINCLUDEDIR=include -DLIBDIR=lib
#         -DBINDIR=bin -DDATADIR=share -DCMAKEDIR=share/pfx/cmake -DCONFIG=release -DDRIVER=ON -DPROGRAM=ON
#         -P check_install.cmake

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

# The headers a folder of the source tree contributes, as installed paths.
function(headers_of out folder)
  file(GLOB_RECURSE found RELATIVE "${PFX_SOURCE_DIR}/${folder}/include" "${PFX_SOURCE_DIR}/${folder}/include/*")
  list(TRANSFORM found PREPEND "${INCLUDEDIR}/")
  set(${out} ${found} PARENT_SCOPE)
endfunction()

headers_of(expected_pfx core)
headers_of(spec spec)
headers_of(refinement spec/refinement)
list(APPEND expected_pfx ${spec} ${refinement}
     "${CMAKEDIR}/pfxConfig.cmake" "${CMAKEDIR}/pfxConfigVersion.cmake"
     "${CMAKEDIR}/pfxTargets.cmake" "${CMAKEDIR}/pfxTargets-${CONFIG}.cmake" "${DATADIR}/doc/pfx/LICENSE")
set(expected_engines)
set(expected_conform)
set(expected_program)
set(expected_llama)
if(DRIVER)
  headers_of(driver driver)
  headers_of(expected_engines engines)
  list(APPEND expected_pfx ${driver} "${LIBDIR}/libpfx_driver.a")
  list(APPEND expected_engines "${LIBDIR}/libpfx_engines.a"
       "${CMAKEDIR}/pfxEnginesTargets.cmake" "${CMAKEDIR}/pfxEnginesTargets-${CONFIG}.cmake")
  headers_of(expected_conform conform)
  list(APPEND expected_conform "${LIBDIR}/libpfx_conform.a"
       "${CMAKEDIR}/pfxConformTargets.cmake" "${CMAKEDIR}/pfxConformTargets-${CONFIG}.cmake")
  if(PROGRAM)
    set(expected_program "${BINDIR}/pfx")
  endif()
  if(LLAMA)
    headers_of(expected_llama integrations/llama)
    list(APPEND expected_llama "${LIBDIR}/libpfx_llama.a"
         "${CMAKEDIR}/pfxLlamaTargets.cmake" "${CMAKEDIR}/pfxLlamaTargets-${CONFIG}.cmake")
  endif()
endif()
set(expected_all ${expected_pfx} ${expected_engines} ${expected_conform} ${expected_program} ${expected_llama})

# Fails unless `prefix` holds exactly the files of `${expected_var}`.
function(expect_exactly prefix expected_var what)
  file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE "${prefix}" "${prefix}/*")
  set(expected ${${expected_var}})
  set(extra ${installed})
  set(missing ${expected})
  if(expected)
    list(REMOVE_ITEM extra ${expected})
  endif()
  if(installed)
    list(REMOVE_ITEM missing ${installed})
  endif()
  if(extra OR missing)
    list(JOIN extra "\n  " extra)
    list(JOIN missing "\n  " missing)
    message(FATAL_ERROR "${what} is not what it should be.\nInstalled but not expected:\n  ${extra}\n"
                        "Expected but not installed:\n  ${missing}")
  endif()
  list(LENGTH installed count)
  message(STATUS "${what}: the ${count} files expected, nothing else")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
run("${CMAKE_COMMAND}" --install "${PFX_BUILD_DIR}" --prefix "${WORK_DIR}/all")
expect_exactly("${WORK_DIR}/all" expected_all "the whole install")
foreach(component pfx engines conform program llama)
  run("${CMAKE_COMMAND}" --install "${PFX_BUILD_DIR}" --component ${component} --prefix "${WORK_DIR}/${component}")
  expect_exactly("${WORK_DIR}/${component}" expected_${component} "the component ${component}")
endforeach()

# Never test code, proptest/ or Markdown, whatever the globs above matched.
foreach(file ${expected_all})
  if(file MATCHES "(^|/)(proptest|support|test|tests)/|_test\\.|\\.md$|\\.cuh$|\\.in$")
    message(FATAL_ERROR "the install holds ${file}, which is test code, documentation or build-only")
  endif()
endforeach()

# Every installed header includes only the standard library, Boost, CUDA-free pfx headers that are
# installed too: no GoogleTest, RapidCheck, proptest support or header left behind in the source tree.
file(GLOB_RECURSE headers RELATIVE "${WORK_DIR}/all/${INCLUDEDIR}" "${WORK_DIR}/all/${INCLUDEDIR}/*")
foreach(header ${headers})
  file(STRINGS "${WORK_DIR}/all/${INCLUDEDIR}/${header}" includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "#[ \t]*include[ \t]*<(pfx/[^>]+)>")
      if(NOT EXISTS "${WORK_DIR}/all/${INCLUDEDIR}/${CMAKE_MATCH_1}")
        message(FATAL_ERROR "the installed ${header} includes <${CMAKE_MATCH_1}>, which is not installed")
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*\"" OR line MATCHES "gtest|gmock|rapidcheck|cuda_runtime")
      message(FATAL_ERROR "the installed ${header} has `${line}`: a header outside the package")
    endif()
  endforeach()
endforeach()
list(LENGTH headers count)
message(STATUS "${count} installed headers include nothing outside the package but the standard library and Boost")

# The package is found with pfx::engines when the component is installed, and without it otherwise.
function(probe prefix expect_engines)
  run("${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/probe" -B "${WORK_DIR}/probe-${expect_engines}"
      "-DCMAKE_PREFIX_PATH=${prefix}")
  set(said "${run_output}")
  if(expect_engines)  # a boolean: ON, TRUE or 1
    set(want "probe: pfx::engines defined" "probe: COMPONENTS engines found=1" "probe: pfx::conform defined"
             "probe: COMPONENTS conform found=1")
    set(unwanted)
  else()
    set(want "probe: COMPONENTS engines found=0" "probe: COMPONENTS conform found=0")
    set(unwanted "probe: pfx::engines defined" "probe: pfx::conform defined")
  endif()
  list(APPEND want "probe: license Apache-2.0")  # LICENSE's SPDX identifier, as pyproject.toml's
  foreach(target core spec refinement)
    list(APPEND want "probe: pfx::${target} defined")
  endforeach()
  if(DRIVER)
    list(APPEND want "probe: pfx::driver defined")
  endif()
  if(LLAMA AND expect_engines)  # the whole install: pfx::llama and llama.cpp's package are found
    list(APPEND want "probe: pfx::llama defined" "probe: COMPONENTS llama found=1")
  endif()
  foreach(text ${want})
    string(FIND "${said}" "${text}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "find_package(pfx) in ${prefix} did not say \"${text}\":\n${said}")
    endif()
  endforeach()
  foreach(text ${unwanted})
    string(FIND "${said}" "${text}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "find_package(pfx) in ${prefix} said \"${text}\" without the engines component:\n${said}")
    endif()
  endforeach()
endfunction()
probe("${WORK_DIR}/all" ${DRIVER})
if(DRIVER)
  probe("${WORK_DIR}/pfx" FALSE)
endif()
message(STATUS "find_package(pfx) finds pfx::engines exactly when the component is installed")
