#!/usr/bin/env bash
# Sets pfx up on a fresh Debian machine and runs its main job: installs the missing packages (apt for
# the C++ side, pip for the Python side), configures the default preset and builds what the main job
# and `import pfx` need: the library, the `pfx` program and the Python module (not the tests or the
# compile-time proofs: scripts/test.sh builds those). It installs the module for the python3 first on
# PATH, so that `import pfx` works anywhere, then runs `pfx replay --verify`: the embedded workload
# served through a lane, each response compared bit for bit with a cold run (docs/cli.md).
# Compiles go through ccache, whose cache lives outside the clone, so a second clone builds in seconds.
#
#   scripts/setup.sh [--no-run]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)" --target pfx_program pfx_python
# The Python module into the site-packages of the python3 it was built for (docs/python.md).
cmake --install build/default --component python

[ "${1:-}" = "--no-run" ] && exit 0
exec build/default/bin/pfx replay --verify
