# pfx_check_version(header version): stops with FATAL_ERROR unless the PFX_VERSION_* constants of
# `header` (core/include/pfx/version.hpp) equal `version` (MAJOR.MINOR.PATCH). The top-level
# CMakeLists.txt calls it with project(VERSION); as a script it checks HEADER against VERSION:
#
#   cmake -DHEADER=core/include/pfx/version.hpp -DVERSION=0.1.0 -P cmake/check_version.cmake

function(pfx_check_version header version)
  if(NOT version MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "pfx's version \"${version}\" is not MAJOR.MINOR.PATCH")
  endif()
  set(expected_MAJOR "${CMAKE_MATCH_1}")
  set(expected_MINOR "${CMAKE_MATCH_2}")
  set(expected_PATCH "${CMAKE_MATCH_3}")
  set(expected_STRING "\"${version}\"")
  file(READ "${header}" text)
  foreach(part MAJOR MINOR PATCH STRING)
    if(NOT text MATCHES "#define PFX_VERSION_${part} ([^\n]*)\n")
      message(FATAL_ERROR "${header} does not define PFX_VERSION_${part}")
    endif()
    string(STRIP "${CMAKE_MATCH_1}" found)
    if(NOT found STREQUAL expected_${part})
      message(FATAL_ERROR "${header}: PFX_VERSION_${part} is ${found} but project(VERSION) is ${version}; "
                          "change both together")
    endif()
  endforeach()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  pfx_check_version("${HEADER}" "${VERSION}")
  message(STATUS "${HEADER} says ${VERSION}")
endif()
