#!/usr/bin/env bash
# The CUDA checks, for a machine with a GPU: builds the `device` preset, runs the CUDA tests and the
# DCP engine's on the device (which must run, not skip) and the whole suite, `pfx replay --engine
# cuda --verify` and `pfx conform --engine cuda` (on which grid a resume on the device equals its
# cold run), each also with `--dcp 4 --interleave 4`, then the driver benchmarks. Prints what it measured.
#
#   scripts/cuda-check.sh              builds the device preset here, then checks
#   scripts/cuda-check.sh --prebuilt   checks the programs already in build/device (built on a machine
#                                      with the packages, for a GPU machine that has none): the CUDA
#                                      tests, the DCP engine's on the device, the sharded lane on
#                                      devices, replay, conform, benchmarks;
#                                      not the whole suite, which needs the build tree
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
[ "${1:-}" = "--prebuilt" ] && prebuilt=1

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ $prebuilt -eq 0 ]; then
  scripts/install-deps.sh
  cmake --preset device >/dev/null
  cmake --build --preset device -j "$(nproc)"
fi

# The backend must see the device; a skipped CUDA test here is a failure.
build/device/proptest/driver_cuda_test --gtest_brief=0 2>&1 | tee build/device/cuda-tests.log
if grep -q "SKIPPED \]" build/device/cuda-tests.log; then
  echo "cuda-check: CUDA tests were skipped on a machine that should have a device" >&2
  exit 1
fi
# The DCP reference engine on the device (SHARD-4 SHARD-5 THM-1): ranks as threads and the single
# controller, resumes against cold runs bit for bit, and its logits and rows against the unsharded
# engine on the device within the fp32 tolerance. A skip here is a failure too.
build/device/proptest/driver_dcp_cuda_test --gtest_brief=0 2>&1 | tee build/device/dcp-cuda-tests.log
if grep -q "SKIPPED \]" build/device/dcp-cuda-tests.log || ! grep -q "PASSED .* 5 tests" build/device/dcp-cuda-tests.log; then
  echo "cuda-check: the DCP engine's tests on the device did not all run and pass" >&2
  exit 1
fi
if [ $prebuilt -eq 0 ]; then
  ctest --preset device -j "$(nproc)"
else
  # The sharded lane over KV states on the device (SHARD-1 DRV-6), which the whole suite would run.
  build/device/proptest/driver_sharded_test --gtest_filter='*OnDevices*' --gtest_brief=0 2>&1 |
    tee build/device/sharded-tests.log
  if grep -q "SKIPPED \]" build/device/sharded-tests.log || ! grep -q "PASSED .* 1 test" build/device/sharded-tests.log; then
    echo "cuda-check: the sharded test on devices did not run and pass" >&2
    exit 1
  fi
fi

# The main job on the device: the embedded workload, each response checked against a cold run.
build/device/bin/pfx replay --engine cuda --verify --no-progress | tail -3

# The same with the DCP engine on the device, 4 ranks of interleave 4 in this process.
build/device/bin/pfx replay --engine cuda --dcp 4 --interleave 4 --verify --no-progress | tail -3

# The conformance check on the CUDA reference engine (docs/conform.md): deterministic, exact on the
# multiples of its chunk, and the configured chunk safe (exit status 0), or this script fails; then
# on its DCP form, whose grid is its chunk's whatever the layout.
build/device/bin/pfx conform --engine cuda --no-progress
build/device/bin/pfx conform --engine cuda --dcp 4 --interleave 4 --no-progress

# The NCCL collective across every visible device (built when NCCL was found).

if [ -x build/device/driver/nccl/pfx_nccl_check ]; then
  build/device/driver/nccl/pfx_nccl_check
else
  echo "cuda-check: the NCCL collective was not built (NCCL not found: set NCCL_ROOT), not checked"
fi

if [ -x build/device/bench/pfx_driver_bench ]; then
  build/device/bench/pfx_driver_bench --benchmark_min_time=0.2
fi
