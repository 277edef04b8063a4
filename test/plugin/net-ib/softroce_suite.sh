#!/bin/sh
# Runs inside the SoftRoCE guest (softroce.sh): the net conformance suite on net-ib over rxe0,
# between two processes, with the GID of each address family, then with two queue pairs per
# connection. Arguments: NET_CONFORMANCE PLUGIN_SO [MAX_BYTES]. Prints the device first, so that
# a failure shows what the guest had. Exits 1 when any run fails, no device included (never 77).
set -eu
conf=$1
lib=$2
max=${3:-16M}
echo "softroce-suite: $(uname -r), devices:"
ls /sys/class/infiniband 2>/dev/null || true
for g in /sys/class/infiniband/*/ports/1/gids/*; do
  [ -r "$g" ] || continue
  v=$(cat "$g" 2>/dev/null) || continue
  [ "$v" = "0000:0000:0000:0000:0000:0000:0000:0000" ] && continue
  i=${g##*/}
  t=$(cat "${g%/gids/*}/gid_attrs/types/$i" 2>/dev/null || echo "?")
  echo "  gid $i $v ($t)"
done
status=0
run() {
  echo "softroce-suite: $*"
  rc=0
  env "$@" || rc=$?
  if [ "$rc" = 77 ]; then
    echo "softroce-suite: FAIL: net-ib saw no device in the guest, where rxe0 is (not a skip)"
  fi
  [ "$rc" = 0 ] || status=1
}
# Everything, IPv4 RoCE v2 GID (the default).
run NCCL_DEBUG=WARN "$conf" --max-bytes "$max" "$lib"
# The IPv6 GID: connection, order, multi-receive, peer death.
run NCCL_DEBUG=WARN NCCL_IB_ADDR_FAMILY=AF_INET6 "$conf" --max-bytes "$max" \
  --case props,connect-first,order,multirecv,sizes,kill-sender,peer-close-pending "$lib"
# Two queue pairs per connection: messages alternate between them.
run NCCL_DEBUG=WARN NCCL_IB_QPS_PER_CONNECTION=2 "$conf" --max-bytes "$max" \
  --case order,multirecv,outstanding,max-request,sizes "$lib"
exit $status
