# Copies core/include alone into WORK_DIR and compiles and runs core_alone/main.cpp against that copy
# with CXX, nothing else on the include path: pfx::core is a header-only library that can be copied
# into another tree. The program prints the version, which the test compares with project(VERSION).
#
#   cmake -DCORE_INCLUDE=... -DWORK_DIR=... -DCXX=... [-DCXX_FLAGS=...] [-DLINKER_FLAGS=...] -P check_core_alone.cmake

file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${CORE_INCLUDE}/" DESTINATION "${WORK_DIR}/include")
separate_arguments(flags UNIX_COMMAND "${CXX_FLAGS} ${LINKER_FLAGS}")
execute_process(
  COMMAND "${CXX}" ${flags} -std=c++20 -Wall -Wextra -Wpedantic -Werror -I "${WORK_DIR}/include"
          "${CMAKE_CURRENT_LIST_DIR}/core_alone/main.cpp" -o "${WORK_DIR}/core_alone"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core/include copied alone does not compile (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/core_alone" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the program built from core/include alone failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "${out}")
