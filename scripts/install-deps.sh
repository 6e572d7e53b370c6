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
          libssl-dev # OpenSSL's libcrypto: the SHA-256 that seals a llama.cpp certificate
          clang libclang-rt-14-dev clang-tidy libopenmpi-dev openmpi-bin
          patch) # patch: scripts/llama.sh applies integrations/llama_server/llama-server.patch

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

# install_extras "IMPORTS" EXTRA...: pyproject.toml's extras (read from there: one list), for the
# python3 on PATH, unless the modules IMPORTS names import already (then the index is asked nothing).
install_extras() {
  local imports=$1
  shift
  python3 -c "import $imports" 2>/dev/null && return 0
  mapfile -t requirements < <(python3 - "$@" <<'PY'
import sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(sorted({r for name in sys.argv[1:] for r in extras[name]})))
PY
)
  echo "pfx: installing for $(command -v python3): ${requirements[*]}" >&2
  python3 -m pip install -q --disable-pip-version-check "${requirements[@]}"
}

# The two long steps share nothing with the rest and run beside it: llama.cpp's build (the compiler's
# minutes) and vLLM's environment (mostly downloads), while pip fetches the suites' packages. Each
# writes its output to a log; a step that failed shows its log's end and stops the script, and the
# other is stopped with it. A second call finds both stamps and returns at once.
declare -A pids logs
background() { # background NAME COMMAND...
  local name=$1
  shift
  logs[$name]="$(mktemp -t "pfx-$name.XXXXXX")"
  "$@" > /dev/null 2> "${logs[$name]}" &
  pids[$name]=$!
}
finish() { # finish NAME: waits for it; its messages, or its failure
  local name=$1 status=0
  wait "${pids[$name]}" || status=$?
  unset "pids[$name]"
  cat "${logs[$name]}" >&2
  rm -f "${logs[$name]}"
  if [ $status -ne 0 ]; then
    echo "scripts/install-deps.sh: $name failed (exit $status)" >&2
    exit $status
  fi
}
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT

# vLLM's CPU build for pfx.integrations.vllm's suites, in an environment of its own (its pins), once
# per machine, outside the clone (scripts/vllm.sh).
background vllm scripts/vllm.sh
# llama.cpp, built once per machine outside the clone (scripts/llama.sh): the libraries pfx::llama and
# llama-cpp-python load; scripts/test.sh adds llama-server with pfx's rule to the same build.
background llama.cpp scripts/llama.sh

# The Python suites' packages: the extras test, transformers and llama.
install_extras "numpy, hypothesis, jsonschema, torch, transformers, gguf" test transformers llama

# llama-cpp-python for pfx.integrations.llama_cpp, with the libraries built above.
finish llama.cpp
scripts/llama.sh --python >/dev/null
# Then llama-cpp-python's server dependencies and the openai client (the extra llama-cpp-python-server): after
# llama.sh, so that pip finds llama-cpp-python installed and does not build it again from source.
install_extras "fastapi, uvicorn, sse_starlette, starlette_context, pydantic_settings, yaml, openai" llama-cpp-python-server

finish vllm
