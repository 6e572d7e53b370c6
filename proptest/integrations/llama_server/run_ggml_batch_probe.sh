#!/bin/sh
# Builds ggml_batch_probe.cpp against the ggml of llama-server's build and runs it: on the paths
# ggml-cpu.patch makes batch invariant (GGML_CPU_USE_REF=1), with one thread and two, no case may differ;
# on ggml's own paths (the control) some must, or the probe could not see a difference.
#
#   run_ggml_batch_probe.sh CXX SERVER_BINARY PROBE_SOURCE WORK_DIR
#
# Exit status: 0 as expected, 1 not, 77 (skipped) where llama-server was not built.
set -u
cxx="$1" server="$2" source="$3" work="$4"
root="$(dirname "$(dirname "$(dirname "$server")")")" # .../server: src/ and build/
if [ ! -x "$server" ] || [ ! -d "$root/src/ggml/include" ]; then
    echo "SKIPPED: llama-server is not built ($server): scripts/llama.sh --server builds it"
    exit 77
fi
if ! grep -q GGML_CPU_USE_REF "$root/src/ggml/src/ggml-cpu/ggml-cpu.cpp"; then
    echo "the llama-server build at $root was made without integrations/llama_server/ggml-cpu.patch: scripts/llama.sh --server builds it again"
    exit 1
fi
mkdir -p "$work"
"$cxx" -std=c++20 -O2 -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror -isystem "$root/src/ggml/include" \
    "$source" -L"$root/build/bin" -Wl,-rpath,"$root/build/bin" -lggml -lggml-base -lggml-cpu -o "$work/ggml_batch_probe" || exit 1
status=0
for threads in 1 2; do
    GGML_CPU_USE_REF=1 "$work/ggml_batch_probe" --threads "$threads" --quiet || status=1
done
GGML_CPU_USE_REF=0 "$work/ggml_batch_probe" --threads 2 --quiet > "$work/control.txt"
control=$?
tail -n 1 "$work/control.txt"
if [ "$control" != 1 ]; then
    cat "$work/control.txt"
    echo "ggml's own paths (GGML_CPU_USE_REF=0) gave every row the bits it has alone: the probe could not fail"
    status=1
fi
exit "$status"
