# What the pfx program's runs checked by a script share: run a command that must exit 0 and print
# JSON Lines, and take its lines.
#
#   include(json_lines.cmake)
#   pfx_json_lines("${command}" lines)   # fails, showing the output, unless the command exits 0

function(pfx_json_lines command out_var)
  execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(JOIN " " shown ${command})
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${shown}\nexited with ${status}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(${out_var} "${lines}" PARENT_SCOPE)
endfunction()
