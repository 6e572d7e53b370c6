# `pfx soak` as a shell sees it (docs/cli.md, "pfx soak"), through pfx_expect_status
# (audit_explain_checks.cmake). The reduced soak runs the full one's path on a smaller model and
# shorter prompts; in the sanitize build LeakSanitizer checks all of it for leaks when the program
# exits. There, unoptimized and with every access checked, a request costs about ten times as much,
# so the run is half as long.

if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=")
  set(pfx_soak_requests 1000)
else()
  set(pfx_soak_requests 2000)
endif()
math(EXPR pfx_soak_warmup "${pfx_soak_requests} / 4")
pfx_expect_status(cli.soak_reduced STATUS 0
                  MATCH "requests: ${pfx_soak_requests} \\([0-9]+ failed: [0-9]+ injected, 0 by a stale-row read\\).*verify: [0-9]+ responses? compared with a cold run, 0 mismatches.*pfx soak: every check passed"
                  COMMAND soak --requests ${pfx_soak_requests} --warmup ${pfx_soak_warmup} --verify-every 10 --faults 0.005
                          --capacity 256 --vocab 256 --no-progress)
pfx_expect_status(cli.soak_bad_tolerance_exits_2 STATUS 2 MATCH "pfx soak: --rss-tolerance: expected KiB"
                  COMMAND soak --rss-tolerance lots)
