# The configure-time version check (cmake/check_version.cmake) can fail: for each of the four
# constants of core/include/pfx/version.hpp, a copy of the header with only that constant changed
# must be refused with a message that names it; the header itself must pass for VERSION.
#
#   cmake -DCHECK=cmake/check_version.cmake -DHEADER=core/include/pfx/version.hpp -DVERSION=...
#         -DWORK_DIR=... -P check_version_refused.cmake

function(check_with header expect_rc expect_text)
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DHEADER=${header}" "-DVERSION=${VERSION}"
                          -P "${CHECK}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " said "${out}${err}")  # CMake wraps its messages
  if((expect_rc EQUAL 0 AND NOT rc EQUAL 0) OR (NOT expect_rc EQUAL 0 AND rc EQUAL 0))
    message(FATAL_ERROR "the version check of ${header} exited ${rc}:\n${said}")
  endif()
  string(FIND "${said}" "${expect_text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the version check of ${header} did not say \"${expect_text}\":\n${said}")
  endif()
endfunction()

check_with("${HEADER}" 0 "says ${VERSION}")

file(READ "${HEADER}" text)
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$" ok "${VERSION}")
set(value_MAJOR "${CMAKE_MATCH_1}")
set(value_MINOR "${CMAKE_MATCH_2}")
set(value_PATCH "${CMAKE_MATCH_3}")
set(value_STRING "\"${VERSION}\"")
set(wrong_MAJOR "${value_MAJOR}1")
set(wrong_MINOR "${value_MINOR}1")
set(wrong_PATCH "${value_PATCH}1")
set(wrong_STRING "\"${VERSION}-other\"")
file(REMOVE_RECURSE "${WORK_DIR}")
foreach(part MAJOR MINOR PATCH STRING)
  string(REPLACE "#define PFX_VERSION_${part} ${value_${part}}\n" "#define PFX_VERSION_${part} ${wrong_${part}}\n"
         changed "${text}")
  if(changed STREQUAL text)
    message(FATAL_ERROR "${HEADER} does not hold #define PFX_VERSION_${part} ${value_${part}}")
  endif()
  file(WRITE "${WORK_DIR}/${part}/version.hpp" "${changed}")
  check_with("${WORK_DIR}/${part}/version.hpp" 1
             "PFX_VERSION_${part} is ${wrong_${part}} but project(VERSION) is ${VERSION}")
endforeach()
message(STATUS "the version check refuses each constant that differs from ${VERSION}")
