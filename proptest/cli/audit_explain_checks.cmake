# The exit statuses of `pfx audit` and `pfx explain` as a shell sees them (docs/cli.md, "Exit status"):
# each check runs the real program through expect_status.cmake.

set(pfx_expect_status "${CMAKE_CURRENT_LIST_DIR}/expect_status.cmake")
set(pfx_cli_inputs "${CMAKE_CURRENT_BINARY_DIR}/cli_inputs")

# pfx_expect_status(name STATUS status MATCH regex COMMAND args...): the program with args.
function(pfx_expect_status name)
  cmake_parse_arguments(arg "" "STATUS;MATCH" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:pfx_program>;${arg_COMMAND}"
                   "-DSTATUS=${arg_STATUS}" "-DMATCH=${arg_MATCH}" -P "${pfx_expect_status}")
  # explain's defaults come from the seed's variables; these checks must not depend on the caller's.
  set_tests_properties(${name} PROPERTIES LABELS cli
                       ENVIRONMENT "TF_GLM53_PREFIX_CACHE=1;TF_GLM53_PREFIX_CACHE_MIN=64")
endfunction()

# The audit passes on the table this build traced (verification/traceability/): every invariant holds and
# every ID has a row and a test. 20000 random runs, not the default 100000, keep it to seconds under
# the sanitizers.
pfx_expect_status(cli.audit_passes STATUS 0 MATCH "pfx audit: every check passed"
                  COMMAND audit --seed 1 --cases 20000 --traceability "${PFX_TRACED_FILE}")
pfx_expect_status(cli.audit_json_says_ok STATUS 0 MATCH "\"ok\": true"
                  COMMAND audit --seed 2 --cases 1000 --protocol-length 2 --json --traceability "${PFX_TRACED_FILE}")
pfx_expect_status(cli.audit_bad_option_exits_2 STATUS 2 MATCH "pfx audit: .*--cases"
                  COMMAND audit --cases many)
# Without the table the checks run and pass, and the audit says the table was not checked and how to
# give it, never that every check passed (docs/cli.md, "pfx audit").
pfx_expect_status(cli.audit_without_traceability_says_not_checked STATUS 0
                  MATCH "Traceability: not checked, no table given.*pfx audit: the 5 invariant checks passed; traceability: not checked \\(give --traceability FILE"
                  COMMAND audit --seed 3 --cases 100 --protocol-length 1)

file(CONFIGURE OUTPUT "${pfx_cli_inputs}/record.json" CONTENT "{\"ids\": [1, 2, 3, 4, 5, 6, 7, 8], \"canonical_end\": 8}\n")
file(CONFIGURE OUTPUT "${pfx_cli_inputs}/prompt.json" CONTENT "{\"prompt\": [1, 2, 3, 4, 5, 6, 9], \"max_new_tokens\": 4}\n")
file(CONFIGURE OUTPUT "${pfx_cli_inputs}/negative_canonical_end.json" CONTENT "{\"ids\": [1, 2], \"canonical_end\": -3}\n")
file(CONFIGURE OUTPUT "${pfx_cli_inputs}/canonical_end_past_ids.json" CONTENT "{\"ids\": [1, 2], \"canonical_end\": 3}\n")
file(CONFIGURE OUTPUT "${pfx_cli_inputs}/malformed.json" CONTENT "[1, 2,\n")

pfx_expect_status(cli.explain_prints_the_decision_and_its_bound STATUS 0
                  MATCH "alignment +4  INV-5 .*<- tightest.*offset 4: reused, decided by alignment"
                  COMMAND explain --record "${pfx_cli_inputs}/record.json" --prompt "${pfx_cli_inputs}/prompt.json"
                          --chunk 4 --keep-min 2)
pfx_expect_status(cli.explain_defaults_to_chunk_64_and_keep_min_64 STATUS 0
                  MATCH "keep_min 64, chunk 64.*offset 0: nothing reusable, decided by alignment"
                  COMMAND explain --record "${pfx_cli_inputs}/record.json" --prompt "${pfx_cli_inputs}/prompt.json")
pfx_expect_status(cli.explain_bad_field_exits_2 STATUS 2
                  MATCH "pfx explain: --record [^:]*negative_canonical_end.json: field \"canonical_end\": expected a non-negative integer, got -3"
                  COMMAND explain --record "${pfx_cli_inputs}/negative_canonical_end.json" --prompt "[1]")
pfx_expect_status(cli.explain_refused_record_exits_2 STATUS 2
                  MATCH "pfx explain: --record: canonical_end 3 with 2 ids: canonical_end is past the end of ids"
                  COMMAND explain --record "${pfx_cli_inputs}/canonical_end_past_ids.json" --prompt "[1]")
pfx_expect_status(cli.explain_malformed_json_exits_2 STATUS 2
                  MATCH "pfx explain: --prompt [^:]*malformed.json: malformed JSON"
                  COMMAND explain --record "[1]" --prompt "${pfx_cli_inputs}/malformed.json")
# A table that cannot be read is bad input, named with its problem.
pfx_expect_status(cli.audit_missing_traceability_exits_2 STATUS 2
                  MATCH "pfx audit: --traceability no-such-table.json: cannot read the file"
                  COMMAND audit --cases 10 --traceability no-such-table.json)
pfx_expect_status(cli.audit_malformed_traceability_exits_2 STATUS 2
                  MATCH "pfx audit: --traceability [^:]*malformed.json: malformed JSON"
                  COMMAND audit --cases 10 --traceability "${pfx_cli_inputs}/malformed.json")
pfx_expect_status(cli.audit_foreign_traceability_exits_2 STATUS 2
                  MATCH "pfx audit: --traceability [^:]*record.json: not a traceability table"
                  COMMAND audit --cases 10 --traceability "${pfx_cli_inputs}/record.json")
pfx_expect_status(cli.explain_missing_file_exits_2 STATUS 2
                  MATCH "pfx explain: --record no-such-record.json: cannot read the file"
                  COMMAND explain --record no-such-record.json --prompt "[1]")
