# Fails, printing the difference and how to refresh it, unless COMMITTED equals GENERATED (the
# docs/traceability.md the build wrote from the tests' tags).
if(NOT EXISTS "${GENERATED}")
  message(FATAL_ERROR "${GENERATED} is missing: build first (cmake --build ${BUILD_DIR})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${COMMITTED}" "${GENERATED}" RESULT_VARIABLE differs)
if(differs)
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND "${DIFF}" -u "${COMMITTED}" "${GENERATED}")
  endif()
  message(FATAL_ERROR "${COMMITTED} differs from the one generated from the tests' tags (${GENERATED}).\n"
                      "Edit verification/traceability/traceability.md.in or enforcement.txt, not the document; "
                      "then refresh it with: cmake --build ${BUILD_DIR} --target pfx_traceability")
endif()
message(STATUS "${COMMITTED} is the generated one")
