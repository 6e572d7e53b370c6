# The exit statuses of `pfx replay` and `pfx workload` as a shell sees them (docs/cli.md, "Exit
# status"), through pfx_expect_status (audit_explain_checks.cmake).

set(pfx_replay_inputs "${CMAKE_CURRENT_BINARY_DIR}/replay_inputs")
file(CONFIGURE OUTPUT "${pfx_replay_inputs}/bad_line_2.jsonl" CONTENT
"{\"prompt\": [1, 2, 3], \"max_new_tokens\": 2}
{\"prompt\": [1, 2, 3], \"max_new_tokens\": -2}
")
file(CONFIGURE OUTPUT "${pfx_replay_inputs}/good.jsonl" CONTENT
"{\"prompt\": [5, 6, 7, 8, 9, 10, 11, 12, 13], \"max_new_tokens\": 3}
{\"prompt\": [5, 6, 7, 8, 9, 10, 11, 12, 13, 1, 2, 3, 4], \"max_new_tokens\": 3}
{\"op\": \"clear\"}
{\"prompt\": [5, 6, 7, 8, 9, 10, 11, 12, 13, 1, 2, 3, 4, 7], \"max_new_tokens\": 0}
")

pfx_expect_status(cli.replay_verify_of_the_embedded_workload_is_bit_exact STATUS 0
                  MATCH "20 responses compared with a cold run, 0 mismatches"
                  COMMAND replay --verify --requests 20)
pfx_expect_status(cli.replay_json_with_faults_ends_with_a_summary STATUS 0
                  MATCH "\"type\":\"summary\",\"requests\":20,.*\"mismatches\":0"
                  COMMAND replay --json --verify --faults 0.01 --seed 3 --requests 20)
pfx_expect_status(cli.replay_of_a_trace_file STATUS 0
                  MATCH "\n +2 +2 +- +13 +8 reused .*\n3 requests \\(0 failed\\), 1 clear;"
                  COMMAND replay --verify --chunk 4 --keep-min 4 "${pfx_replay_inputs}/good.jsonl")
pfx_expect_status(cli.replay_bad_trace_line_exits_2 STATUS 2
                  MATCH "pfx replay: [^\n]*bad_line_2.jsonl:2: field \"max_new_tokens\": is negative \\(-2\\)\n1 bad line; nothing was replayed"
                  COMMAND replay "${pfx_replay_inputs}/bad_line_2.jsonl")
pfx_expect_status(cli.replay_missing_trace_exits_2 STATUS 2
                  MATCH "pfx replay: no-such-trace.jsonl: cannot read the file \\(No such file or directory\\)"
                  COMMAND replay no-such-trace.jsonl)
pfx_expect_status(cli.replay_bad_option_exits_2 STATUS 2 MATCH "pfx replay: --faults: "
                  COMMAND replay --faults 1.5)
pfx_expect_status(cli.workload_prints_a_trace STATUS 0
                  MATCH "^{\"prompt\":\\[[0-9,]+\\],\"max_new_tokens\":[0-9]+,\"label\":\"new session\"}\n"
                  COMMAND workload --requests 3)

# A negative count is refused, not wrapped round to 2^64 - 1 (which would run for ever).
pfx_expect_status(cli.replay_negative_seed_exits_2 STATUS 2 MATCH "pfx replay: --seed: " COMMAND replay --seed -1)
pfx_expect_status(cli.audit_negative_cases_exits_2 STATUS 2 MATCH "pfx audit: --cases: " COMMAND audit --cases -1)

# A write error on standard output (a full disk: /dev/full) is reported and fails the run, for a
# command that would otherwise succeed.
add_test(NAME cli.replay_write_error_exits_non_zero
         COMMAND sh -c "\"$1\" replay --requests 3 >/dev/full 2>\"$2\"; status=$?; cat \"$2\"; [ $status -eq 74 ] && grep -q 'pfx: cannot write the output' \"$2\""
                 sh $<TARGET_FILE:pfx_program> "${CMAKE_CURRENT_BINARY_DIR}/write_error.err")
set_tests_properties(cli.replay_write_error_exits_non_zero PROPERTIES LABELS cli)

# SIGINT during soak and SIGTERM during replay: the run stops between two requests, prints what ran
# marked interrupted, and exits 128 + the signal.
foreach(check "soak;INT;130;100000000" "replay;TERM;143;20000")
  list(GET check 0 command)
  list(GET check 1 signal)
  list(GET check 2 status)
  list(GET check 3 requests)
  add_test(NAME cli.${command}_interrupted_by_sig${signal}_exits_${status}
           COMMAND sh -c "\"$1\" ${command} --requests ${requests} --no-progress >\"$2\" 2>&1 & pid=$!; sleep 2; kill -${signal} $pid; wait $pid; status=$?; cat \"$2\"; [ $status -eq ${status} ] && grep -q 'INTERRUPTED by SIG${signal} after [0-9]* requests*:' \"$2\""
                   sh $<TARGET_FILE:pfx_program> "${CMAKE_CURRENT_BINARY_DIR}/${command}_interrupted.out")
  set_tests_properties(cli.${command}_interrupted_by_sig${signal}_exits_${status} PROPERTIES LABELS cli TIMEOUT 120)
endforeach()
