#!/usr/bin/env bash
# Makes llama.cpp available to pfx once per machine, outside the clone, from ONE build: the llama.cpp
# that PyPI's llama-cpp-python source distribution vendors, copied, with pfx's two patches applied
# (integrations/llama_server: llama-server.patch, pfx's rule in llama-server under --pfx; ggml-cpu.patch,
# ggml's batch-invariant CPU paths, which stay off unless GGML_CPU_USE_REF is set, so that every other
# program computes as stock llama.cpp does), each checked first with --dry-run. It is built CPU only,
# Release, shared libraries, through ccache: ggml and llama, and llama-server into the same tree when
# asked for (--server), which links the same ggml and llama. The libraries and headers are installed
# to a prefix that `find_package(llama CONFIG)` finds: pfx's top-level CMakeLists.txt looks in it by
# itself, so a plain `cmake --preset default` afterwards builds pfx::llama (docs/integration.md).
#
#   scripts/llama.sh [--python] [--server] [--print-prefix] [--print-server]
#
#   --python        also installs llama-cpp-python itself (for pfx.integrations.llama_cpp), from the
#                   same sdist, without building llama.cpp again: the libraries built here are linked
#                   into its lib/ folder, where `import llama_cpp` looks for them
#   --server        also builds llama.cpp's llama-server with pfx's rule (`--pfx`), in the same build
#                   (setup leaves it to scripts/test.sh, the first to need it)
#   --print-prefix  prints the install prefix and exits (nothing is built)
#   --print-server  prints the path of llama-server and exits (nothing is built)
#
# The prefix is ${PFX_LLAMA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/llama.cpp-<version>/install;
# llama.cpp's own source, unpatched, is in src/ beside it (llama_server.patch_applies_to_the_pinned_
# llama_cpp checks the patches against it), the patched copy and its build in server/
# (scripts/lib/llama-build.sh says when it builds again). A second call that finds its stamps returns
# in well under a second.
set -euo pipefail

version=0.3.36 # llama-cpp-python; its vendor/llama.cpp is what gets built
root="${PFX_LLAMA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/llama.cpp-$version"
prefix="$root/install"
python=0
server=""
server_root="$root/server" # the patched copy (src) and its build: the one build of llama.cpp
server_binary="$server_root/build/bin/llama-server"
for arg in "$@"; do
    case "$arg" in
        --python) python=1 ;;
        --server) server=server ;;
        --print-prefix) echo "$prefix"; exit 0 ;;
        --print-server) echo "$server_binary"; exit 0 ;;
        *) echo "scripts/llama.sh: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done

launcher=()
if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
jobs="${PFX_LLAMA_JOBS:-$(nproc)}"

# quietly NAME COMMAND...: a step with its output in a log under $root.
source "$(dirname "$0")/lib/quietly.sh"

sdist="$root/llama_cpp_python-$version.tar.gz"
fetch_sdist() {
    [ -f "$sdist" ] && return 0
    mkdir -p "$root"
    local tmp
    tmp="$(mktemp -d)"
    # pip prepares the sdist's metadata, which needs scikit-build-core: without isolation when it
    # is installed already (no second download), with it otherwise.
    python3 -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
        -d "$tmp" "llama-cpp-python==$version" 2> /dev/null ||
        python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$version"
    mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"
    rm -rf "$tmp"
}

unpack_source() { # llama.cpp's source, from the sdist, in $root/src
    [ -f "$root/src/CMakeLists.txt" ] && return 0
    fetch_sdist
    rm -rf "$root/src" "$root/unpack"
    mkdir -p "$root/unpack"
    tar xzf "$sdist" -C "$root/unpack"
    mv "$root/unpack/llama_cpp_python-$version/vendor/llama.cpp" "$root/src"
    rm -rf "$root/unpack" "$root/src/.git" # a submodule's pointer to a repository not shipped
}

# build_llama_cpp: the patched copy built and installed to $prefix, unless the stamps say it is.
source "$(dirname "$0")/lib/llama-build.sh"
build_llama_cpp "$server"

installed_python() { # whether llama-cpp-python of this version is installed
    python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('llama-cpp-python') != '$version')" 2> /dev/null
}
if [ "$python" = 1 ]; then
    if ! installed_python; then
        fetch_sdist
        # The Python package alone (LLAMA_BUILD=OFF: no second build of llama.cpp, seconds instead of
        # minutes); it gets the library built above, of the same version, just below.
        CMAKE_ARGS="-DLLAMA_BUILD=OFF" quietly python-install python3 -m pip install "$sdist"
    fi
    # llama_cpp loads its libraries from its own lib/ folder: link the ones built above there, so that
    # `import llama_cpp` works in any shell with no variable set (their RPATH finds their neighbours in
    # the prefix). Checked on every call: also a package an earlier run installed without them.
    package="$(python3 -c "import importlib.util as u; print(u.find_spec('llama_cpp').submodule_search_locations[0])")"
    if [ "$(readlink -f "$package/lib/libllama.so")" != "$(readlink -f "$prefix/lib/libllama.so")" ]; then
        mkdir -p "$package/lib"
        for library in "$prefix"/lib/lib*.so*; do
            ln -sfn "$library" "$package/lib/$(basename "$library")"
        done
        if ! (unset LLAMA_CPP_LIB_PATH; python3 -c "import llama_cpp") > "$root/python-import.log" 2>&1; then
            tail -n 30 "$root/python-import.log" >&2
            echo "scripts/llama.sh: llama_cpp does not import with the libraries linked into $package/lib" >&2
            exit 1
        fi
    fi
fi

echo "$prefix"
