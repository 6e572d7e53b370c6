#!/usr/bin/env bash
# The full soak run (docs/performance.md, "A soak run"): 100,000 requests of mixed traffic with
# injected failures through one lane on the host engine, a sample compared bit for bit with cold
# runs, resident memory flat after the warm-up (the default preset's Release build); then a shorter
# soak in the sanitize preset's build, where LeakSanitizer checks the whole path for leaks at exit.
# Builds what is missing first. Exits non-zero when either run fails.
#
#   scripts/soak.sh [REQUESTS [LEAK_CHECK_REQUESTS]]      defaults: 100000 and 2000
#
# Takes about 10 minutes on a 2-core machine; `ctest -R cli.soak_reduced` is the 2,000-request form.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-100000}"
leak_check_requests="${2:-2000}"

scripts/install-deps.sh
for preset in default sanitize; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" --target pfx_program -j "$(nproc)"
done

echo "== pfx soak: $requests requests (build/default, Release)"
status=0
build/default/bin/pfx soak --requests "$requests" || status=$?
echo "== pfx soak exited with $status"

echo "== leak check: pfx soak --requests $leak_check_requests under AddressSanitizer and LeakSanitizer (build/sanitize)"
leak_status=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  build/sanitize/bin/pfx soak --requests "$leak_check_requests" --warmup 500 --verify-every 20 --capacity 512 --vocab 1024 --no-progress ||
  leak_status=$?
if [ "$leak_status" -eq 0 ]; then
  echo "== leak check: no leak, no sanitizer error (exit status 0)"
else
  echo "== leak check FAILED: exit status $leak_status"
fi

echo "== soak: $([ "$status" -eq 0 ] && echo passed || echo "FAILED ($status)"); leak check: $([ "$leak_status" -eq 0 ] && echo passed || echo "FAILED ($leak_status)")"
[ "$status" -eq 0 ] && [ "$leak_status" -eq 0 ]
