# Sourced by the install scripts (llama.sh, vllm.sh), which set $root first.
# quietly NAME COMMAND...: runs COMMAND with its output in $root/NAME.log; on failure, shows the log's
# end, says which script and command failed and where the whole log is, and exits 1.
quietly() {
    local log="$root/$1.log"
    shift
    if ! "$@" > "$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "scripts/$(basename "$0"): '$*' failed; the whole log is $log" >&2
        exit 1
    fi
}
