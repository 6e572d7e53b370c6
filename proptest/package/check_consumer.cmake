# Builds and runs the tiny consumer against pfx: installed (MODE=find_package), its build tree found
# as a package without an install (MODE=build_tree), or as a subdirectory (MODE=add_subdirectory).
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
# The consumer is built as pfx was (pfx::driver is a compiled library: a sanitized build needs a
# sanitized consumer).
set(flags "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
set(consumer "${CMAKE_CURRENT_LIST_DIR}/consumer")
if(MODE STREQUAL "find_package")
  run("${CMAKE_COMMAND}" --install "${PFX_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${WORK_DIR}/build" -DCMAKE_CXX_COMPILER=${CXX} ${flags}
      -DPFX_CONSUMER_MODE=find_package "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
elseif(MODE STREQUAL "build_tree")
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${WORK_DIR}/build" -DCMAKE_CXX_COMPILER=${CXX} ${flags}
      -DPFX_CONSUMER_MODE=find_package "-Dpfx_DIR=${PFX_BUILD_DIR}")
else()
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${WORK_DIR}/build" -DCMAKE_CXX_COMPILER=${CXX} ${flags}
      -DPFX_CONSUMER_MODE=add_subdirectory "-DPFX_SOURCE_DIR=${PFX_SOURCE_DIR}"
      -DPFX_CUDA=OFF)  # the host driver suffices to show the tree builds as a subdirectory
endif()
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
message(STATUS "the consumer built with ${MODE} and ran")
