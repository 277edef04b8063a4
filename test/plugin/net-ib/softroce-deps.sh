#!/usr/bin/env bash
# Install what test/plugin/net-ib/softroce.sh needs on a Debian or Ubuntu machine, where it is
# missing: QEMU (the guest), busybox-static and cpio (its initramfs), rdma-core with the verbs
# providers and tools (libibverbs, the rxe provider, ibv_devinfo, ibv_rc_pingpong, the rdma
# command), libibverbs-dev (to build the net-ib plugin against), iproute2 and kmod. perftest
# (ib_write_bw and friends) is installed when the distribution has it, and is not required.
#
#   test/plugin/net-ib/softroce-deps.sh
#
# Also runs apt-get update when the package lists do not know linux-image-amd64 (softroce.sh
# fetches the guest kernel with apt-get download). Idempotent and quiet: nothing is installed,
# and nothing printed, when all is there already. Runs apt-get through sudo only when not root.
set -euo pipefail

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

pkgs=(qemu-system-x86 busybox-static cpio rdma-core ibverbs-providers ibverbs-utils libibverbs-dev
  iproute2 kmod)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

need=()
for pkg in "${pkgs[@]}"; do
  installed "$pkg" || need+=("$pkg")
done
optional=()
installed perftest || optional+=(perftest)

# softroce.sh asks apt which kernel linux-image-amd64 depends on: the package lists must know it.
lists_ok=1
apt-cache show linux-image-amd64 >/dev/null 2>&1 || lists_ok=0

if [ ${#need[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && [ "$lists_ok" = 1 ]; then
  exit 0
fi

all=("${need[@]}" "${optional[@]}")
if [ ${#all[@]} -gt 0 ]; then
  echo "softroce-deps: installing ${all[*]}"
else
  echo "softroce-deps: apt-get update (no package lists for linux-image-amd64)"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# apt's output goes to a log, shown only when a step fails.
run_apt() {
  if ! $sudo env DEBIAN_FRONTEND=noninteractive "$@" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    return 1
  fi
}
run_apt apt-get update -qq || { echo "softroce-deps: apt-get update failed" >&2; exit 1; }
if [ ${#need[@]} -gt 0 ]; then
  run_apt apt-get install -y -qq "${need[@]}" || { echo "softroce-deps: apt-get install ${need[*]} failed" >&2; exit 1; }
fi
if [ ${#optional[@]} -gt 0 ]; then
  run_apt apt-get install -y -qq "${optional[@]}" ||
    echo "softroce-deps: optional ${optional[*]} not installed (not required)"
fi
