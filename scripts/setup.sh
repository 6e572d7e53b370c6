#!/usr/bin/env bash
# Sets pfx up on a fresh Debian machine and runs its main job: installs the missing packages,
# configures and builds the default preset, then serves a multi-turn conversation through a lane on
# the host reference engine, each turn checked bit for bit against a cold run.
#
#   scripts/setup.sh [--no-run]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"

[ "${1:-}" = "--no-run" ] && exit 0
exec build/default/examples/pfx_serve_example
