#!/usr/bin/env bash
# Runs the driver's tests under ThreadSanitizer (build/tsan): the lane's concurrency contract
# (docs/driver.md, "Concurrent use") is checked there, where any unsynchronized access to the record
# or the KV state fails the run. Only the driver's tests, to keep CI's time in check.
#
#   scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=build/tsan
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DPFX_WARNINGS_AS_ERRORS=ON -DPFX_BUILD_CLI=OFF -DPFX_BUILD_PYTHON=OFF -DPFX_BUILD_BENCHMARKS=OFF \
  -DPFX_BUILD_EXAMPLES=OFF -DPFX_COMPILE_TIME_PROOFS=OFF -DPFX_CUDA=OFF -DPFX_INSTALL=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target pfx_driver_tests
tests=$(cat "$build/proptest/driver_tests.txt")
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
for test in $tests; do
  "$build/proptest/$test" --gtest_brief=1
done
echo "pfx tsan: the driver's tests passed under ThreadSanitizer:" $tests
