#!/usr/bin/env bash
# Sets pfx up on a fresh Debian machine and runs its main job: installs the missing packages,
# configures and builds the default preset, then runs `pfx replay --verify`: the embedded workload
# served through a lane, each response compared bit for bit with a cold run (docs/cli.md).
#
#   scripts/setup.sh [--no-run]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"

[ "${1:-}" = "--no-run" ] && exit 0
exec build/default/bin/pfx replay --verify
