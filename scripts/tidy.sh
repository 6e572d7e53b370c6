#!/usr/bin/env bash
# Runs clang-tidy, with the checks in .clang-tidy, over every C++ source file of pfx's own (driver/,
# engines/, conform/, tools/, proptest/, python/, bench/, examples/; core/ and spec/ through the files that include them).
# Exits non-zero on any finding.
#
#   scripts/tidy.sh [PATH_REGEX]      e.g. scripts/tidy.sh 'driver/src/lane\.cpp'
#
# clang-tidy reads the compile commands of build/tidy: a configuration compiled by clang, so that
# every flag is one clang understands, that is configured but never built. The CUDA sources (.cu) are
# not checked: clang-tidy 14 does not know CUDA 13.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
files="${1:-^${root}/(driver|engines|conform|tools|proptest|python|bench|examples)/.*\.cpp$}"

scripts/install-deps.sh
cmake -S . -B build/tidy -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPFX_COMPILE_TIME_PROOFS=OFF -DPFX_CUDA=OFF >/dev/null

log=build/tidy/findings.log
start=$SECONDS
status=0
run-clang-tidy -p build/tidy -j "$(nproc)" -quiet "$files" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" \
  || status=$?
checked=$(grep -c "^clang-tidy-14 \|^clang-tidy " "$log" || true)
findings=$(grep -cE "(warning|error): " "$log" || true)
if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
  grep -E -A3 "(warning|error): " "$log" >&2 || tail -40 "$log" >&2
  echo "clang-tidy: $findings finding(s) in $checked files ($((SECONDS - start)) s); full output in $log" >&2
  exit 1
fi
echo "clang-tidy: $checked files clean ($((SECONDS - start)) s)"
