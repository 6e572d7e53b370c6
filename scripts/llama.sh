#!/usr/bin/env bash
# Makes llama.cpp available to pfx::llama (integrations/llama) once per machine, outside the clone:
# the llama.cpp that PyPI's llama-cpp-python source distribution vendors (headers included), built
# CPU only, Release, shared libraries, through ccache, and installed to a prefix that
# `find_package(llama CONFIG)` finds. pfx's top-level CMakeLists.txt looks in this prefix by itself,
# so a plain `cmake --preset default` afterwards builds the component (docs/integration.md).
#
#   scripts/llama.sh [--python] [--server] [--print-prefix] [--print-server]
#
#   --python        also installs llama-cpp-python itself (for pfx.integrations.llama_cpp), from the
#                   same sdist, without building llama.cpp again: the libraries built here are linked
#                   into its lib/ folder, where `import llama_cpp` looks for them
#   --server        also builds llama.cpp's llama-server with pfx's rule (`--pfx`): the same source,
#                   copied, with integrations/llama_server/llama-server.patch applied (checked first
#                   with --dry-run), built once per machine and again whenever that folder changes
#   --print-prefix  prints the install prefix and exits (nothing is built)
#   --print-server  prints the path of that llama-server and exits (nothing is built)
#
# The prefix is ${PFX_LLAMA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/llama.cpp-<version>/install.
# A second call finds the stamp of a finished install and returns in well under a second.
set -euo pipefail

version=0.3.36 # llama-cpp-python; its vendor/llama.cpp is what gets built
root="${PFX_LLAMA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pfx}/llama.cpp-$version"
prefix="$root/install"
python=0
server=0
server_root="$root/server" # the patched copy (src), its build, and the stamp of the patch it holds
server_binary="$server_root/build/bin/llama-server"
for arg in "$@"; do
    case "$arg" in
        --python) python=1 ;;
        --server) server=1 ;;
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

if [ ! -f "$prefix/.complete" ]; then
    unpack_source
    # GGML_NATIVE off: the library must run on every machine that restores this folder from a CI
    # cache, not only on the CPU that built it; ggml then compiles for x86-64 with AVX2, FMA and F16C.
    # GGML_OPENMP off: ggml's own thread pool, one thing less to install.
    quietly configure cmake -S "$root/src" -B "$root/build" -G "${CMAKE_GENERATOR:-Unix Makefiles}" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_RPATH="$prefix/lib" \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_CCACHE=OFF \
        -DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=OFF \
        "${launcher[@]}"
    quietly build cmake --build "$root/build" -j "$jobs"
    quietly install cmake --install "$root/build"
    touch "$prefix/.complete"
fi

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

if [ "$server" = 1 ]; then
    source "$(dirname "$0")/lib/llama-server.sh"
    build_llama_server
fi

echo "$prefix"
