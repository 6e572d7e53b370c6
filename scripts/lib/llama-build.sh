# Sourced by scripts/llama.sh, which sets $root (the unpacked llama.cpp in $root/src), $prefix,
# $server_root, $server_binary, $jobs and $launcher first, and defines unpack_source.
# build_llama_cpp [server]: llama.cpp's ggml and llama, and with `server` llama-server, from ONE build
# of a copy of the same source with integrations/llama_server/llama-server.patch (pfx's rule under
# --pfx) and ggml-cpu.patch (the batch-invariant CPU paths, off unless GGML_CPU_USE_REF is set)
# applied, installed to $prefix: the libraries pfx::llama and llama-cpp-python load are the files
# llama-server runs on. llama-server (with llama.cpp's common and mtmd libraries, about 40% of the
# compile) is built into the same tree when first asked for, after ggml and llama, which are not
# built again. Two stamps: the libraries' ($prefix/.complete, the hash of the patches and the build
# scripts) and the server's ($server_root/.complete, also integrations/llama_server, pfx's core, the
# llama.cpp headers, integrations/llama/include/pfx/llama/, and the certificate it compiles in). A changed patch starts
# again from a fresh copy, a changed rule or setting builds again; an unchanged one returns at once.
build_llama_cpp() {
    local want_server="${1:-}" here patch library_hash server_hash patches tools
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/integrations/llama_server"
    patch="$here/llama-server.patch"
    library_hash="$(cat "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/../llama.sh" "$patch" \
        "$here"/ggml-cpu.patch | sha256sum | cut -d' ' -f1)"
    server_hash="$( (echo "$library_hash"; cat "$here"/CMakeLists.txt "$here"/pfx_server.h "$here"/pfx_server.cpp \
        "$here"/../../core/include/pfx/*.hpp "$here"/../llama/include/pfx/llama/*.hpp \
        "$here"/../llama/src/certificate.cpp) | sha256sum | cut -d' ' -f1)"
    local library_done=0 server_done=0
    [ -f "$prefix/.complete" ] && [ "$(cat "$prefix/.complete")" = "$library_hash" ] && library_done=1
    [ -f "$server_root/.complete" ] && [ "$(cat "$server_root/.complete")" = "$server_hash" ] &&
        [ -x "$server_binary" ] && server_done=1
    if [ "$library_done" = 1 ] && { [ -z "$want_server" ] || [ "$server_done" = 1 ]; }; then
        return 0
    fi
    rm -f "$prefix/.complete" "$server_root/.complete"
    rm -rf "$root/build" # the library's own build of an older layout, a second build of the same code
    unpack_source
    patches="$(cat "$patch" "$here/ggml-cpu.patch" | sha256sum)"
    if [ -f "$server_root/src/.pfx-patch" ] && [ "$(cat "$server_root/src/.pfx-patch")" != "$patches" ]; then
        rm -rf "$server_root/src" "$server_root/build" # another patch: start again from llama.cpp's own source
    fi
    if [ ! -f "$server_root/src/.pfx-patch" ]; then
        rm -rf "$server_root/src"
        mkdir -p "$server_root/src"
        # The source without its documentation and vocabulary files, which no build step reads.
        tar -C "$root/src" --exclude=./docs --exclude=./models -cf - . | tar -C "$server_root/src" -xf -
        local each
        for each in "$patch" "$here/ggml-cpu.patch"; do
            if ! patch -p1 --fuzz=0 --dry-run -d "$server_root/src" < "$each" > "$root/server-patch.log" 2>&1; then
                cat "$root/server-patch.log" >&2
                echo "scripts/llama.sh: $each does not apply to llama.cpp in $root/src; it was written for the" \
                    "llama.cpp of llama-cpp-python $version" >&2
                exit 1
            fi
        done
        patch -p1 --fuzz=0 --quiet -d "$server_root/src" < "$patch"
        patch -p1 --fuzz=0 --quiet -d "$server_root/src" < "$here/ggml-cpu.patch"
        echo "$patches" > "$server_root/src/.pfx-patch"
    fi
    # The tools (llama-server, and the common and mtmd libraries it needs) only where the server is
    # asked for; switching them on later reconfigures the same tree, whose ggml and llama objects stay.
    tools=OFF
    [ -n "$want_server" ] && tools=ON
    # GGML_NATIVE off: the libraries must run on every machine that restores this folder from a CI
    # cache, not only on the CPU that built it; ggml then compiles for x86-64 with AVX2, FMA and F16C.
    # GGML_OPENMP off: ggml's own thread pool, one thing less to install. LLAMA_TOOLS_INSTALL off: of
    # the tools only llama-server is built, so only its install rule (which llama.cpp does not gate)
    # may run. The web UI's assets are not fetched (no network at build time): the server embeds none,
    # and serves the API alone.
    echo "pfx: building llama.cpp $version with pfx's patches into $root$([ "$tools" = ON ] && echo ", llama-server included")" >&2
    quietly configure cmake -S "$server_root/src" -B "$server_root/build" -G "${CMAKE_GENERATOR:-Unix Makefiles}" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_RPATH="$prefix/lib" \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS="$tools" -DLLAMA_BUILD_SERVER="$tools" \
        -DLLAMA_TOOLS_INSTALL=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON="$tools" -DLLAMA_OPENSSL=OFF \
        -DLLAMA_CURL=OFF -DGGML_CCACHE=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=OFF \
        -DPFX_LLAMA_SERVER_DIR="$here" "${launcher[@]}"
    if [ "$tools" = ON ]; then
        quietly build cmake --build "$server_root/build" --target llama llama-server -j "$jobs"
    else
        quietly build cmake --build "$server_root/build" --target llama -j "$jobs"
    fi
    quietly install cmake --install "$server_root/build"
    echo "$library_hash" > "$prefix/.complete"
    if [ "$tools" = ON ]; then echo "$server_hash" > "$server_root/.complete"; fi
}
