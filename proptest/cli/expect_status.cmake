# Runs a command and fails unless it exits with exactly the expected status and its output (stdout and
# stderr together) matches a regular expression.
#
#   cmake "-DCOMMAND=program;arg;..." -DSTATUS=2 "-DMATCH=regex" -P expect_status.cmake

foreach(required COMMAND STATUS MATCH)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "expect_status.cmake: -D${required}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JOIN " " shown ${COMMAND})
if(NOT status STREQUAL STATUS)
  message(FATAL_ERROR "${shown}\nexited with ${status}, expected ${STATUS}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "${shown}\nexited with ${status} as expected, but its output does not match\n  ${MATCH}\n"
                      "stdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "${shown}: exit status ${status}, output matches ${MATCH}")
