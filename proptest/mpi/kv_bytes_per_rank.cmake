# Runs a sharded pfx replay --json (one process over RANKS shards, or one rank per process under
# mpirun) and an unsharded one of the same capacity, and fails unless both pass and each rank holds
# only its own rows: the summary lists RANKS ranks, kv_bytes_per_rank is rank 0's, kv_bytes_total
# their sum, and each rank's bytes are at most 1/RANKS of the unsharded state's plus one block of
# INTERLEAVE rows (ROW_BYTES each). A rank that allocated the whole state fails it.
#
#   cmake "-DSHARDED=program;arg;..." "-DUNSHARDED=program;arg;..." -DRANKS=4 -DINTERLEAVE=3
#         -DROW_BYTES=256 -P kv_bytes_per_rank.cmake

foreach(required SHARDED UNSHARDED RANKS INTERLEAVE ROW_BYTES)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "kv_bytes_per_rank.cmake: -D${required}=... is required")
  endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/json_lines.cmake")

# The summary line of a passing run: sets <prefix>_line.
function(summary command prefix)
  pfx_json_lines("${command}" lines)
  foreach(line IN LISTS lines)
    if(line MATCHES "^{\"type\":\"summary\"")
      set(${prefix}_line "${line}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  string(JOIN " " shown ${command})
  message(FATAL_ERROR "${shown}\nprinted no summary")
endfunction()

summary("${SHARDED}" sharded)
summary("${UNSHARDED}" unsharded)
string(JSON whole GET "${unsharded_line}" kv_bytes_total)
string(JSON per_rank GET "${sharded_line}" kv_bytes_per_rank)
string(JSON total GET "${sharded_line}" kv_bytes_total)
string(JSON ranks LENGTH "${sharded_line}" kv_bytes_by_rank)
if(NOT ranks EQUAL RANKS)
  message(FATAL_ERROR "the summary lists ${ranks} ranks' bytes, not ${RANKS}: ${sharded_line}")
endif()
math(EXPR most "${whole} / ${RANKS} + ${INTERLEAVE} * ${ROW_BYTES}")
set(sum 0)
math(EXPR last "${RANKS} - 1")
foreach(r RANGE 0 ${last})
  string(JSON bytes GET "${sharded_line}" kv_bytes_by_rank ${r})
  if(bytes GREATER most OR bytes EQUAL 0)
    message(FATAL_ERROR "rank ${r} holds ${bytes} bytes of KV rows, not about 1/${RANKS} of the whole state's ${whole} "
                        "(at most ${most})")
  endif()
  math(EXPR sum "${sum} + ${bytes}")
  if(r EQUAL 0 AND NOT bytes EQUAL per_rank)
    message(FATAL_ERROR "kv_bytes_per_rank ${per_rank} is not rank 0's ${bytes}")
  endif()
endforeach()
if(NOT sum EQUAL total)
  message(FATAL_ERROR "kv_bytes_total ${total} is not the ranks' sum ${sum}")
endif()
message(STATUS "each of ${RANKS} ranks holds ${per_rank} bytes of KV rows (the whole state: ${whole}); in all ${total}")
