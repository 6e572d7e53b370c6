#!/usr/bin/env bash
# Runs clang-tidy, with the checks in .clang-tidy, over every C++ source file of pfx's own (driver/,
# engines/, conform/, replay/, integrations/, tools/, proptest/, verification/, python/, bench/, examples/; core/ and spec/ through the files that include them).
# Exits non-zero on any finding. Files found clean are remembered outside the clone, keyed on what
# clang-tidy sees of them (scripts/tidy_files.py), so a run after a small change checks only what it
# touched; PFX_TIDY_CACHE=off checks every file.
#
#   scripts/tidy.sh [PATH_REGEX]      e.g. scripts/tidy.sh 'driver/src/lane\.cpp'
#
# clang-tidy reads the compile commands of build/tidy: a configuration compiled by clang, so that
# every flag is one clang understands, that is configured but never built. The CUDA sources (.cu) are
# not checked: clang-tidy 14 does not know CUDA 13.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
files="${1:-^${root}/(driver|engines|conform|replay|integrations|tools|proptest|verification|python|bench|examples)/.*\.cpp$}"

scripts/install-deps.sh
cmake -S . -B build/tidy -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPFX_COMPILE_TIME_PROOFS=OFF -DPFX_CUDA=OFF -DPFX_CCACHE=OFF >/dev/null

start=$SECONDS
python3 scripts/tidy_files.py build/tidy "$files" build/tidy/findings.log
echo "clang-tidy: clean ($((SECONDS - start)) s); each file's output in build/tidy/findings.log"
