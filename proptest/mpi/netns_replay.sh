#!/bin/sh
# Two machines, simulated: two network namespaces joined by a veth pair, with addresses assigned only
# inside them (10.213.0.1 and 10.213.0.2; no route leads anywhere else, so no traffic leaves them).
# mpirun runs in the first, reads a host file naming both, and starts the second's ranks through a
# launch agent that enters that namespace instead of ssh. The ranks talk over TCP only (btl tcp,self:
# no shared memory), and pfx replay --verify must pass on every rank.
#
#   netns_replay.sh MPIEXEC PFX [pfx replay options...]
#
# Exit 77 (skipped), saying why, where namespaces cannot be made here (not root, no `ip`, no
# permission). Everything it makes is removed on exit, whatever happens.
set -u
mpiexec=$1
pfx=$2
shift 2

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "creating network namespaces needs root"
command -v ip > /dev/null 2>&1 || skip "the ip command (iproute2) is not installed"

tag=$$
ns_a=pfx-a-$tag
ns_b=pfx-b-$tag
dir=$(mktemp -d) || exit 1
cleanup() {
  ip netns del "$ns_a" 2> /dev/null
  ip netns del "$ns_b" 2> /dev/null  # the veth pair goes with its namespaces
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

ip netns add "$ns_a" 2> "$dir/err" || skip "cannot create a network namespace here: $(cat "$dir/err")"
ip netns add "$ns_b" || exit 1
ip link add "pfxa$tag" type veth peer name "pfxb$tag" 2> "$dir/err" || skip "cannot create a veth pair here: $(cat "$dir/err")"
ip link set "pfxa$tag" netns "$ns_a" && ip link set "pfxb$tag" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add 10.213.0.1/24 dev "pfxa$tag" && ip -n "$ns_b" addr add 10.213.0.2/24 dev "pfxb$tag" || exit 1
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up || exit 1; done
ip -n "$ns_a" link set "pfxa$tag" up && ip -n "$ns_b" link set "pfxb$tag" up || exit 1

# Open MPI calls the agent as ssh: AGENT HOST COMMAND...; it enters the host's namespace instead.
cat > "$dir/agent" << AGENT
#!/bin/sh
host=\$1
shift
case "\$host" in
  10.213.0.1) ns=$ns_a ;;
  10.213.0.2) ns=$ns_b ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host" >> "$dir/launched"
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$dir/agent"
printf '10.213.0.1 slots=2\n10.213.0.2 slots=2\n' > "$dir/hosts"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ip netns exec "$ns_a" "$mpiexec" -n 4 --hostfile "$dir/hosts" --map-by node \
  --mca plm_rsh_agent "$dir/agent" --mca btl tcp,self \
  --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
  "$pfx" replay --verify --no-progress "$@" > "$dir/out" 2>&1
status=$?
cat "$dir/out"
[ $status = 0 ] || { echo "mpirun across the namespaces exited with $status"; exit 1; }
grep -q "4 ranks" "$dir/out" || { echo "the replay did not run on 4 ranks"; exit 1; }
grep -q "10.213.0.2" "$dir/launched" 2> /dev/null || { echo "no rank was launched in the second namespace"; exit 1; }
echo "4 ranks on 2 namespaces over TCP: every response equals cold"
