#!/usr/bin/env bash
# Installs whatever pfx needs to build and test that is not there yet: the C++ side from Debian's
# packages (apt), the Python side from the package index (pip), for the python3 first on PATH, the
# interpreter the module is built for.
#
#   scripts/install-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ ccache librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev libboost-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev pybind11-dev python3-dev
          clang libclang-rt-14-dev clang-tidy libopenmpi-dev openmpi-bin)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pfx: installing ${missing[*]}" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python suites' packages: pyproject.toml's extras test, transformers and llama, read from there
# (one list). Checked by importing them first, so that a machine that has them asks the index nothing.
if ! python3 -c "import numpy, hypothesis, jsonschema, torch, transformers, gguf" 2>/dev/null; then
  mapfile -t requirements < <(python3 -c '
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(sorted({r for name in ("test", "transformers", "llama") for r in extras[name]})))')
  echo "pfx: installing for $(command -v python3): ${requirements[*]}" >&2
  python3 -m pip install -q --disable-pip-version-check "${requirements[@]}"
fi

# llama.cpp for pfx::llama and llama-cpp-python for pfx.integrations.llama_cpp: built once per machine,
# outside the clone (scripts/llama.sh); a second call returns at once.
scripts/llama.sh --python >/dev/null

# vLLM's CPU build for pfx.integrations.vllm's suites, in an environment of its own (its pins), once
# per machine, outside the clone (scripts/vllm.sh); a second call returns at once.
scripts/vllm.sh >/dev/null
