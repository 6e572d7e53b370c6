#!/usr/bin/env bash
# The mutation check (docs/mutation.md): applies each mutant of verification/mutation/mutants.toml to a
# copy of the sources, rebuilds, runs the property tests, and prints which test killed it. Fails when
# a mutant survives without an equivalence argument, or no longer applies.
#
#   scripts/mutate.sh                  every mutant
#   scripts/mutate.sh --reduced        the subset CI runs
#   scripts/mutate.sh --only ID...     some mutants
#   scripts/mutate.sh --help           the other options (--list, --markdown FILE, --sanitize, ...)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/llama.sh --server >/dev/null  # the llama-server suites that some mutants name
exec python3 verification/mutation/run.py --jobs "$(nproc)" "$@"
