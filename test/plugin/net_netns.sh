#!/bin/sh
# The net conformance suite between two network namespaces joined by a veth pair, so that a
# plugin is checked over a real interface pair instead of loopback.
#
#   net_netns.sh NET_CONFORMANCE PLUGIN_SO [net-conformance options...]
#
# Creates namespaces A and B, a veth pair with IPv4 (10.231.<n>.1/.2) and IPv6 (fd00:c401:<n>::1/::2)
# addresses, and runs the suite twice with one side in each namespace (--role listen in A,
# --role connect in B): over IPv4 with the control streams through a unix socket in a shared
# directory, then over IPv6 with the control streams over TCP on the veth itself (--peer-addr).
# For the socket plugin, NCCL_SOCKET_IFNAME names the veth end and NCCL_SOCKET_FAMILY the family;
# for net-ofi FI_TCP_IFACE and for net-ucx UCX_NET_DEVICES name it (so that their tcp transports
# use the veth, not loopback or shared memory); CHOIR_NETNS_IF and CHOIR_NETNS_FAMILY carry both
# for any other plugin. The caller's environment (FI_PROVIDER, UCX_TLS, ...) passes through.
# Everything is torn down on exit. Not root, or no way to create namespaces: exit 77 with a line.
set -u

prog=${1:?usage: net_netns.sh NET_CONFORMANCE PLUGIN_SO [options]}
plugin=${2:?usage: net_netns.sh NET_CONFORMANCE PLUGIN_SO [options]}
shift 2

skip() {
  echo "SKIP netns: $*"
  exit 77
}

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"

# Names unique per run, short enough for interface names (15 characters).
tag=$$
ns_a=choir-nc-a-$tag
ns_b=choir-nc-b-$tag
if_a=ncA$tag
if_b=ncB$tag
net=$((tag % 250))
dir=

cleanup() {
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  ip link del "$if_a" 2>/dev/null
  [ -n "$dir" ] && rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

err=$(ip netns add "$ns_a" 2>&1) || skip "ip netns add failed: $err"
err=$(ip netns add "$ns_b" 2>&1) || skip "ip netns add failed: $err"
err=$(ip link add "$if_a" type veth peer name "$if_b" 2>&1) || skip "no veth pair: $err"
set -e
ip link set "$if_a" netns "$ns_a"
ip link set "$if_b" netns "$ns_b"
ip -n "$ns_a" addr add "10.231.$net.1/24" dev "$if_a"
ip -n "$ns_b" addr add "10.231.$net.2/24" dev "$if_b"
# nodad: the address is usable at once instead of after duplicate address detection.
ip -n "$ns_a" addr add "fd00:c401:$net::1/64" dev "$if_a" nodad
ip -n "$ns_b" addr add "fd00:c401:$net::2/64" dev "$if_b" nodad
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$if_a" up
ip -n "$ns_b" link set "$if_b" up
set +e
dir=$(mktemp -d)

# run FAMILY CONTROL...: both sides at once; the result is the worse of the two.
run() {
  family=$1
  shift
  echo "# netns: $family between $ns_a ($if_a) and $ns_b ($if_b), control: $*"
  ip netns exec "$ns_a" env NCCL_SOCKET_IFNAME="=$if_a" NCCL_SOCKET_FAMILY="$family" \
    FI_TCP_IFACE="$if_a" UCX_NET_DEVICES="$if_a" CHOIR_NETNS_IF="$if_a" \
    CHOIR_NETNS_FAMILY="$family" "$prog" --role listen "$@" "$plugin" > "$dir/a.out" 2>&1 &
  pid_a=$!
  ip netns exec "$ns_b" env NCCL_SOCKET_IFNAME="=$if_b" NCCL_SOCKET_FAMILY="$family" \
    FI_TCP_IFACE="$if_b" UCX_NET_DEVICES="$if_b" CHOIR_NETNS_IF="$if_b" \
    CHOIR_NETNS_FAMILY="$family" "$prog" --role connect "$@" "$plugin" > "$dir/b.out" 2>&1 &
  pid_b=$!
  wait "$pid_a"
  rc_a=$?
  wait "$pid_b"
  rc_b=$?
  sed "s/^/[$family listen] /" "$dir/a.out"
  sed "s/^/[$family connect] /" "$dir/b.out"
  if [ "$rc_a" = 77 ] && [ "$rc_b" = 77 ]; then return 77; fi
  [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && return 0
  [ "$rc_a" = 77 ] && [ "$rc_b" = 0 ] && return 0
  [ "$rc_a" = 0 ] && [ "$rc_b" = 77 ] && return 0
  return 1
}

run AF_INET --rendezvous "$dir" "$@"
rc4=$?
run AF_INET6 --peer-addr "[fd00:c401:$net::1]:41237" "$@"
rc6=$?
echo "# netns: IPv4 exit $rc4, IPv6 exit $rc6"
[ "$rc4" = 1 ] || [ "$rc6" = 1 ] && exit 1
[ "$rc4" = 77 ] && [ "$rc6" = 77 ] && exit 77
exit 0
