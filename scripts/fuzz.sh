#!/usr/bin/env bash
# Builds the libFuzzer targets of proptest/fuzz/ with clang under ASan and UBSan (build/fuzz), and runs each
# for a bounded time on a scratch copy of its seed corpus (docs/fuzzing.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 seconds, every target
#
# PFX_FUZZ_JOBS=N runs N fuzzing processes per target (libFuzzer's -jobs and -workers); default 1.
# New inputs go to build/fuzz/corpus/<target>/, crashes to build/fuzz/artifacts/<target>/; the
# repository's proptest/fuzz/corpus/ is only read. Exits non-zero when any target finds something.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
all_targets=(fuzz_machine fuzz_trace_line fuzz_environment fuzz_explain_input)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
jobs="${PFX_FUZZ_JOBS:-1}"
build=build/fuzz

scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPFX_BUILD_FUZZERS=ON -DPFX_BUILD_TESTS=OFF -DPFX_BUILD_BENCHMARKS=OFF -DPFX_BUILD_EXAMPLES=OFF \
  -DPFX_BUILD_PYTHON=OFF -DPFX_COMPILE_TIME_PROOFS=OFF -DPFX_CUDA=OFF -DPFX_INSTALL=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

found=()
for target in "${targets[@]}"; do
  scratch="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  mkdir -p "$scratch" "$artifacts"
  options=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "proptest/fuzz/dictionaries/$target.dict" ] && options+=(-dict="proptest/fuzz/dictionaries/$target.dict")
  [ "$jobs" -gt 1 ] && options+=(-jobs="$jobs" -workers="$jobs")
  echo "== $target: ${seconds}s" >&2
  # The first directory receives new inputs; the repository's corpus is read only.
  if ! "$build/proptest/fuzz/$target" "${options[@]}" "$scratch" "proptest/fuzz/corpus/$target"; then
    found+=("$target")
  fi
done

if [ ${#found[@]} -gt 0 ]; then
  cat >&2 <<MESSAGE
pfx fuzz: findings in ${found[*]}; the inputs are in $build/artifacts/<target>/.
  replay one:             $build/proptest/fuzz/<target> <file>
  keep it as a regression: cp <file> proptest/fuzz/regressions/<target>/<what-it-caught>
                           (ctest then replays it as fuzz.<target>.corpus), and fix the code.
MESSAGE
  exit 1
fi
echo "pfx fuzz: no findings in ${targets[*]}" >&2
