#!/usr/bin/env bash
# Sets pfx up on a fresh Debian machine and runs its main job: installs the missing packages,
# configures and builds the default preset, then runs `pfx replay --verify`: the embedded workload
# served through a lane, each response compared bit for bit with a cold run (docs/cli.md). It also
# installs the Python module for the python3 first on PATH, so that `import pfx` works anywhere.
#
#   scripts/setup.sh [--no-run]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
# The Python module into the site-packages of the python3 it was built for (docs/python.md).
cmake --install build/default --component python

[ "${1:-}" = "--no-run" ] && exit 0
exec build/default/bin/pfx replay --verify
