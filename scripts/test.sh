#!/usr/bin/env bash
# Runs every pfx test (property tests, proofs, examples, the package check) for a preset: default,
# or sanitize (AddressSanitizer + UndefinedBehaviorSanitizer). Builds what is missing first.
#
#   scripts/test.sh [default|sanitize]
#
# RapidCheck prints the seed of every property; RC_PARAMS="reproduce=..." (printed on a failure)
# replays one, and RC_PARAMS="max_success=N" runs more cases.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"

scripts/install-deps.sh
# llama-server with pfx's rule, for its suites: built into the same tree as the library setup built
# (scripts/llama.sh), once per machine; a second call returns at once.
scripts/llama.sh --server >/dev/null
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
