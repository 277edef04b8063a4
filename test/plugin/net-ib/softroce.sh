#!/usr/bin/env bash
# softroce.sh: run a command inside a small QEMU guest that has a real SoftRoCE (rdma_rxe)
# device, so that an InfiniBand verbs net plugin can be tested on real verbs on a machine
# without RDMA hardware and without rdma_rxe in its own kernel (CI, containers, VMs).
#
#   test/plugin/net-ib/softroce.sh [--mem MB] [--timeout S] -- COMMAND [ARGS...]
#   test/plugin/net-ib/softroce.sh [--mem MB] [--timeout S] --selftest
#
# What the guest is:
#   - Debian's own kernel (the one linux-image-amd64 depends on now, fetched with
#     `apt-get download`), booted by qemu-system-x86_64 with KVM where KVM really works (tried by
#     booting once; the answer is kept in the cache) and with TCG otherwise; -smp 2, -m 1024.
#   - A small busybox-static initramfs that loads the modules (virtio, 9p, overlay, virtio_net,
#     rdma_rxe and everything modules.dep says they need), mounts the host's `/` read-only over
#     virtio-9p and puts a tmpfs-backed overlay on top of it, so that every host path (binaries,
#     libraries, the build folder, rdma-core's libibverbs and its rxe provider) is seen at the
#     same path and is writable in the guest (writes stay in guest memory and are thrown away).
#     /proc, /sys, /dev, /dev/pts, /dev/shm and /run are the guest's own.
#   - lo up; eth0 up with 10.0.2.15/24 and fd00:c401::15/64 on QEMU user networking restricted
#     to the guest (nothing leaves it); `rdma link add rxe0 type rxe netdev eth0`; then it waits
#     until port 1 of rxe0 is ACTIVE and has its GIDs. The GID table (all RoCE v2, netdev eth0;
#     --selftest prints it): 0 fe80::5054:ff:fe12:3456 (link-local, from the MAC), 1
#     ::ffff:10.0.2.15 (IPv4), 2 fd00:c401::15 (IPv6).
#   - COMMAND runs under the host's bash in the caller's working directory, with the caller's
#     PATH, LD_LIBRARY_PATH, LD_PRELOAD, HOME, LANG, TMPDIR and every NCCL_*, CHOIR_*, UCX_*,
#     FI_*, RDMAV_*, IBV_*, ASAN_*, UBSAN_*, LSAN_*, TSAN_*, MSAN_*, MESON_* variable (plus the
#     names in CHOIR_SOFTROCE_ENV, space separated), stdin from /dev/null. Its stdout and stderr
#     go to files in a per-run folder that the guest mounts read-write over 9p, and are
#     streamed from there to this script's stdout and stderr while it runs. The guest then
#     powers off.
#
# Exit status: COMMAND's own status; 125 when the guest side failed (no kernel, no boot, rxe0
# did not come up, timeout, ...), always with a line "softroce: ..." on stderr saying what, and
# the last 40 lines of the guest's console. It never skips (no 77).
#
# Options:
#   --mem MB       guest memory (default 1024; the overlay's writes live in it too)
#   --timeout S    overall limit from starting QEMU to the end of COMMAND (default 600); QEMU is
#                  killed past it. Booting up to rxe0 ACTIVE must also fit in
#                  CHOIR_SOFTROCE_BOOT_TIMEOUT (default 300).
#   --selftest     run ibv_devinfo -d rxe0, print the GID table, and run ibv_rc_pingpong server
#                  and client over rxe0 on the RoCE v2 IPv4 GID and on the IPv6 GID; prints
#                  "softroce selftest: PASS" when all of it worked.
#
# Environment:
#   CHOIR_SOFTROCE_CACHE   cache folder (default $HOME/.cache/choir-softroce): the kernel and
#                          its needed modules (a few MB; the .deb is not kept), the initramfs,
#                          the KVM probe's answer and last-console.log (the last guest console).
#   CHOIR_SOFTROCE_KERNEL  a Debian kernel package to use instead (e.g. linux-image-6.1.0-56-amd64)
#   CHOIR_SOFTROCE_ACCEL   kvm or tcg, to skip the KVM probe
#   CHOIR_SOFTROCE_ENV     more variable names to pass into the guest
#
# Needs: qemu-system-x86, busybox-static, cpio, kmod (depmod), apt (apt-get download, so the
# package lists must be there: apt-get update), rdma-core and ibverbs-providers/-utils on the
# host (softroce-deps.sh installs them). Root is not needed, except by softroce-deps.sh.
# The cache is prepared under a lock, so that runs in parallel share it.
set -euo pipefail

# The rest is one compound command, which bash reads in full before running it: editing this
# file while a run is under way does not change what that run does.
{
caller_path=$PATH
PATH=$PATH:/usr/sbin:/sbin
me=softroce
script_path=$(readlink -f "${BASH_SOURCE[0]}")

mem=1024
timeout_s=600
boot_timeout_s=${CHOIR_SOFTROCE_BOOT_TIMEOUT:-300}
selftest=0
cache=${CHOIR_SOFTROCE_CACHE:-${HOME:-/root}/.cache/choir-softroce}
run_dir=""
console_log=""
qemu_pid=""
tail_pids=()

# Guest network addresses (only the guest itself ever talks to them).
guest_ip4=10.0.2.15
guest_ip6=fd00:c401::15
# How they show in the GID table: the IPv4 one as ::ffff:a.b.c.d, the IPv6 one by its prefix.
IFS=. read -r o1 o2 o3 o4 <<<"$guest_ip4"
guest_gid4=$(printf 'ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
guest_gid6=fd00:c401:

usage() {
  sed -n '2,/^set -euo/p' "$script_path" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# Print the guest console's last 40 lines (when there is one) and fail with status 125.
die() {
  echo "$me: $*" >&2
  if [ -n "$console_log" ] && [ -s "$console_log" ]; then
    echo "$me: last 40 lines of the guest console (kept in $cache/last-console.log):" >&2
    # without the firmware's terminal escapes
    { tail -n 40 "$console_log"; echo; } | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' \
      -e 's/\r//g' -e '/^$/d' -e 's/^/  | /' >&2
  fi
  if [ -n "$run_dir" ] && [ -s "$run_dir/qemu.out" ]; then
    echo "$me: qemu said:" >&2
    sed 's/^/  | /' "$run_dir/qemu.out" >&2
  fi
  exit 125
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  local p
  for p in "${tail_pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  if [ -n "$console_log" ] && [ -f "$console_log" ] && [ -d "$cache" ]; then
    cp -f "$console_log" "$cache/last-console.log" 2>/dev/null || true
  fi
  if [ -n "$run_dir" ]; then
    rm -rf "$run_dir"
  fi
}
trap cleanup EXIT
trap 'die "interrupted"' INT TERM HUP

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# ---------------------------------------------------------------------------------------------
# Arguments
cmd=()
while [ $# -gt 0 ]; do
  case $1 in
    --mem)
      if [ $# -lt 2 ] || ! is_uint "$2"; then die "--mem needs a size in MB"; fi
      mem=$2; shift 2 ;;
    --mem=*)
      mem=${1#*=}; is_uint "$mem" || die "--mem needs a size in MB"; shift ;;
    --timeout)
      if [ $# -lt 2 ] || ! is_uint "$2"; then die "--timeout needs seconds"; fi
      timeout_s=$2; shift 2 ;;
    --timeout=*)
      timeout_s=${1#*=}; is_uint "$timeout_s" || die "--timeout needs seconds"; shift ;;
    --selftest) selftest=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; cmd=("$@"); break ;;
    *) die "unknown argument '$1' (usage: softroce.sh [--mem MB] [--timeout S] -- COMMAND [ARGS...] | --selftest)" ;;
  esac
done
if [ "$selftest" = 1 ] && [ ${#cmd[@]} -gt 0 ]; then
  die "--selftest takes no command"
fi
if [ "$selftest" = 0 ] && [ ${#cmd[@]} -eq 0 ]; then
  die "no command given (usage: softroce.sh [--mem MB] [--timeout S] -- COMMAND [ARGS...] | --selftest)"
fi
is_uint "$boot_timeout_s" || die "CHOIR_SOFTROCE_BOOT_TIMEOUT must be seconds"
[ "$timeout_s" -ge 1 ] || die "--timeout must be at least 1 s"
[ "$boot_timeout_s" -le "$timeout_s" ] || boot_timeout_s=$timeout_s

# ---------------------------------------------------------------------------------------------
# Host tools
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
  die "qemu-system-x86_64 not found; install qemu-system-x86 (test/plugin/net-ib/softroce-deps.sh)"
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
  if [ -x "$b" ]; then busybox=$b; break; fi
done
[ -n "$busybox" ] || die "busybox not found; install busybox-static (test/plugin/net-ib/softroce-deps.sh)"
if ldd "$busybox" >/dev/null 2>&1; then
  die "$busybox is not statically linked; install busybox-static"
fi
for t in cpio depmod dpkg-deb apt-get apt-cache gzip flock sha256sum; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found (test/plugin/net-ib/softroce-deps.sh installs what is needed)"
done
command -v rdma >/dev/null 2>&1 || die "rdma (iproute2) not found; install iproute2"
command -v ibv_devinfo >/dev/null 2>&1 || die "ibv_devinfo not found; install ibverbs-utils"
compgen -G '/usr/lib/*/libibverbs/librxe-*.so' >/dev/null || compgen -G '/usr/lib*/libibverbs/librxe-*.so' >/dev/null ||
  die "the rxe verbs provider (librxe-*.so) not found; install ibverbs-providers"

if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  die "cannot create or write the cache folder $cache"
fi
cache=$(cd "$cache" && pwd -P)

# ---------------------------------------------------------------------------------------------
# Cache preparation, under a lock shared by parallel runs.
exec {lock_fd}>"$cache/.lock" || die "cannot open $cache/.lock"
flock -w 1200 "$lock_fd" || die "waited 20 min for the lock on $cache/.lock"

# The modules the guest loads, in the order given (each after what modules.dep says it needs).
wanted_modules=(virtio_pci 9pnet_virtio 9p overlay virtio_net crc32_generic rdma_rxe rdma_ucm ib_umad)

# Which kernel: the package linux-image-amd64 depends on now, or CHOIR_SOFTROCE_KERNEL.
kpkg=${CHOIR_SOFTROCE_KERNEL:-}
if [ -z "$kpkg" ]; then
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1) || true
fi
if [ -z "$kpkg" ]; then
  # No package lists (offline?): use the newest kernel already in the cache, if any.
  newest=$(find "$cache" -maxdepth 2 -name .complete -path '*/kernel-*' -printf '%h\n' 2>/dev/null |
    sort -V | tail -n 1)
  [ -n "$newest" ] ||
    die "cannot tell which kernel linux-image-amd64 depends on (apt-cache depends linux-image-amd64 found nothing: run apt-get update)"
  kpkg=linux-image-${newest##*/kernel-}
fi
kver=${kpkg#linux-image-}
[[ $kver =~ ^[0-9][A-Za-z0-9.+_-]*$ ]] || die "odd kernel package name '$kpkg'"
kdir=$cache/kernel-$kver

# Decompress a module file (.ko, .ko.xz, .ko.zst, .ko.gz) to a plain .ko.
copy_module() {
  case $1 in
    *.ko) cp "$1" "$2" ;;
    *.ko.xz) xz -dc "$1" >"$2" ;;
    *.ko.zst) zstd -qdc "$1" >"$2" ;;
    *.ko.gz) gzip -dc "$1" >"$2" ;;
    *) return 1 ;;
  esac
}

prepare_kernel() {
  [ -f "$kdir/.complete" ] && return 0
  echo "$me: preparing kernel $kver in $kdir" >&2
  rm -rf "$kdir"
  local tmp
  tmp=$(mktemp -d "$cache/tmp.XXXXXX")
  # apt-get download warns when its sandbox user cannot write here; the folder is ours.
  chmod 755 "$tmp"
  if ! (cd "$tmp" && apt-get download -q "$kpkg") >"$tmp/apt.log" 2>&1; then
    local why
    why=$(grep -E '^(E|W):' "$tmp/apt.log" | tail -n 1)
    rm -rf "$tmp"
    die "apt-get download $kpkg failed: ${why:-no error line from apt-get} (try apt-get update)"
  fi
  local deb
  deb=$(find "$tmp" -maxdepth 1 -name '*.deb' | head -n 1)
  [ -n "$deb" ] || { rm -rf "$tmp"; die "apt-get download $kpkg failed: no .deb came"; }
  dpkg-deb -x "$deb" "$tmp/x" || { rm -rf "$tmp"; die "dpkg-deb -x $deb failed"; }
  rm -f "$deb"
  local mroot=$tmp/x/lib/modules/$kver
  [ -d "$mroot" ] || mroot=$tmp/x/usr/lib/modules/$kver
  [ -d "$mroot" ] || { rm -rf "$tmp"; die "$kpkg has no modules folder for $kver"; }
  [ -f "$tmp/x/boot/vmlinuz-$kver" ] || { rm -rf "$tmp"; die "$kpkg has no /boot/vmlinuz-$kver"; }
  local xroot=${mroot%/lib/modules/"$kver"}
  depmod -b "$xroot" "$kver" || { rm -rf "$tmp"; die "depmod for $kver failed"; }

  # Resolve each wanted module's dependencies (modules.dep lists them so that the last one is
  # loaded first) and keep them in load order, each once.
  local out=$tmp/out order=() m line deps d rel
  declare -A seen=()
  mkdir -p "$out/lib/modules/$kver"
  for m in "${wanted_modules[@]}"; do
    line=$(grep -E "(^|/)${m//_/[_-]}\.ko(\.xz|\.zst|\.gz)?:" "$mroot/modules.dep" | head -n 1) || true
    if [ -z "$line" ]; then
      # Built into this kernel: nothing to load.
      grep -qE "/${m//_/[_-]}\.ko$" "$mroot/modules.builtin" 2>/dev/null && continue
      rm -rf "$tmp"
      die "module $m is neither in modules.dep nor built into $kver"
    fi
    read -r -a deps <<<"${line#*:}"
    for ((d = ${#deps[@]} - 1; d >= 0; d--)); do
      rel=${deps[d]}
      [ -n "${seen[$rel]:-}" ] || { seen[$rel]=1; order+=("$m $rel"); }
    done
    rel=${line%%:*}
    [ -n "${seen[$rel]:-}" ] || { seen[$rel]=1; order+=("$m $rel"); }
  done
  : >"$out/load.list"
  local want plain
  for line in "${order[@]}"; do
    want=${line%% *}
    rel=${line#* }
    plain=${rel%.xz}; plain=${plain%.zst}; plain=${plain%.gz}
    mkdir -p "$out/lib/modules/$kver/$(dirname "$plain")"
    copy_module "$mroot/$rel" "$out/lib/modules/$kver/$plain" ||
      { rm -rf "$tmp"; die "cannot unpack module $rel"; }
    echo "$want $plain" >>"$out/load.list"
  done
  cp "$mroot/modules.builtin" "$mroot/modules.order" "$out/lib/modules/$kver/" 2>/dev/null || true
  [ -f "$mroot/modules.builtin.modinfo" ] && cp "$mroot/modules.builtin.modinfo" "$out/lib/modules/$kver/"
  depmod -b "$out" "$kver" || { rm -rf "$tmp"; die "depmod for the module subset failed"; }
  cp "$tmp/x/boot/vmlinuz-$kver" "$out/vmlinuz"
  touch "$out/.complete"
  rm -rf "$kdir"
  mv "$out" "$kdir"
  rm -rf "$tmp"
  # Older kernels' folders go once no run can still be about to boot one.
  find "$cache" -mindepth 1 -maxdepth 1 -name 'kernel-*' ! -name "kernel-$kver" -mmin +60 \
    -exec rm -rf {} + 2>/dev/null || true
}

# The guest's /init (busybox ash). Markers on the console ("softroce-guest: ...") tell the host
# how far it got; errors also go to the shared folder's file "error".
guest_init() {
  cat <<'INIT'
#!/bin/busybox sh
# Choir softroce guest init: see test/plugin/net-ib/softroce.sh.
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t devtmpfs devtmpfs /dev
exec </dev/null >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

R=/newroot
S=$R/run/softroce
say() { echo "softroce-guest: $*"; }
off() { sync; poweroff -f; sleep 10; }
fail() {
  say "error: $*"
  if mountpoint -q "$S"; then echo "$*" >"$S/error"; fi
  off
}

mode=run
# shellcheck disable=SC2013  # words, not lines
for a in $(cat /proc/cmdline); do
  case $a in softroce.mode=*) mode=${a#*=} ;; esac
done
say "init $(uname -r)"
if [ "$mode" = probe ]; then
  say probe-ok
  off
fi

K=/lib/modules/$(uname -r)
# Load one group of modules: the lines of load.list whose first word is in $1.
load() {
  while read -r want rel; do
    case " $1 " in *" $want "*) ;; *) continue ;; esac
    name=${rel##*/}
    name=${name%.ko}
    grep -q "^$(echo "$name" | tr - _) " /proc/modules && continue
    err=$(insmod "$K/$rel" 2>&1) || fail "$want did not load: insmod $name: $err"
  done <"$K/load.list"
}

load "virtio_pci 9pnet_virtio 9p overlay"
say modules-fs
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
  fail "cannot mount the host's / over 9p (tag hostroot)"
mount -t tmpfs -o mode=0755 upper /upper
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay $R ||
  fail "cannot mount the overlay over the host's /"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 shm $R/dev/shm
mount -t tmpfs -o mode=0755 run $R/run
mkdir -p $S
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 softroce $S ||
  fail "cannot mount the shared run folder over 9p (tag softroce)"
mkdir -p "$R$K"
mount --bind "$K" "$R$K"
say root-mounted

load "virtio_net crc32_generic"
load "rdma_rxe rdma_ucm ib_umad"
say modules-rdma

ip link set lo up || fail "ip link set lo up failed"
[ -d /sys/class/net/eth0 ] || fail "no eth0 (virtio_net loaded, but no interface)"
# Only the addresses set here (no DAD delay, no router advertisements).
echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad
echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_ra
echo 0 >/proc/sys/net/ipv6/conf/eth0/autoconf
ip link set eth0 up || fail "ip link set eth0 up failed"
ip addr add @IP4@/24 dev eth0 || fail "ip addr add @IP4@/24 dev eth0 failed"
ip -6 addr add @IP6@/64 dev eth0 || fail "ip -6 addr add @IP6@/64 dev eth0 failed"
err=$(chroot $R rdma link add rxe0 type rxe netdev eth0 2>&1) ||
  fail "rdma link add rxe0 type rxe netdev eth0 failed: $err"
i=0
state=none
while [ $i -lt 300 ]; do
  state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null || echo none)
  case $state in *ACTIVE*) break ;; esac
  sleep 0.1
  i=$((i + 1))
done
case $state in *ACTIVE*) ;; *) fail "rxe0 port 1 did not become ACTIVE within 30 s (state: $state)" ;; esac
# Wait for the IPv4 and IPv6 RoCE v2 GIDs too (they follow the addresses a moment later).
i=0
while [ $i -lt 100 ]; do
  gids=$(cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null)
  case $gids in *@GID4@*) case $gids in *@GID6@*) break ;; esac ;; esac
  sleep 0.1
  i=$((i + 1))
done
[ -e /dev/infiniband/uverbs0 ] || fail "rxe0 is up but /dev/infiniband/uverbs0 is missing"
say ready

if [ -f $S/cmd.sh ]; then
  chroot $R @BASH@ /run/softroce/cmd.sh >>$S/stdout 2>>$S/stderr </dev/null
  rc=$?
  if [ ! -f $S/error ]; then
    if [ -f $S/started ]; then
      echo $rc >$S/status.tmp && mv $S/status.tmp $S/status
    else
      echo "the guest could not start @BASH@ for the command (status $rc)" >$S/error
    fi
  fi
  say "command exited $rc"
fi
off
INIT
}

# A one-entry newc cpio archive holding the character device dev/console (5,1), so that the
# kernel gives /init a console without root on the host to mknod one.
console_cpio() {
  local name=dev/console
  printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
    1 $((0x2180)) 0 0 1 0 0 0 0 5 1 $((${#name} + 1)) 0
  printf '%s\0' "$name"
  # 110 header bytes + name + NUL, padded to a multiple of 4
  local pad=$(((4 - (110 + ${#name} + 1) % 4) % 4))
  head -c "$pad" /dev/zero
  name=TRAILER!!!
  printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
    0 0 0 0 1 0 0 0 0 0 0 $((${#name} + 1)) 0
  printf '%s\0' "$name"
  pad=$(((4 - (110 + ${#name} + 1) % 4) % 4))
  head -c "$pad" /dev/zero
}

prepare_initramfs() {
  local key
  key=$({ sha256sum <"$script_path"; sha256sum <"$busybox"; cat "$kdir/load.list"; } | sha256sum | cut -c1-16)
  initramfs=$cache/initramfs-$kver-$key.cpio.gz
  [ -f "$initramfs" ] && return 0
  local tmp
  tmp=$(mktemp -d "$cache/tmp.XXXXXX")
  local st=$tmp/root
  mkdir -p "$st"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,lib/modules,newroot,lower,upper,tmp}
  cp "$busybox" "$st/bin/busybox"
  cp -r "$kdir/lib/modules/$kver" "$st/lib/modules/"
  cp "$kdir/load.list" "$st/lib/modules/$kver/load.list"
  guest_init | sed -e "s|@IP4@|$guest_ip4|g" -e "s|@IP6@|$guest_ip6|g" -e "s|@BASH@|$BASH|g" \
    -e "s|@GID4@|$guest_gid4|g" -e "s|@GID6@|$guest_gid6|g" >"$st/init"
  chmod 755 "$st/init"
  {
    (cd "$st" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet)
    console_cpio
  } | gzip -n -6 >"$tmp/initramfs.cpio.gz" || { rm -rf "$tmp"; die "building the initramfs failed"; }
  # Drop initramfs files of other script versions, once no run can still be about to boot one.
  find "$cache" -maxdepth 1 -name 'initramfs-*.cpio.gz' -mmin +60 -delete 2>/dev/null || true
  mv "$tmp/initramfs.cpio.gz" "$initramfs"
  rm -rf "$tmp"
}

# KVM where it works: boot the initramfs once in probe mode; the answer is kept per host kernel
# and QEMU version.
choose_accel() {
  accel=${CHOIR_SOFTROCE_ACCEL:-}
  if [ -n "$accel" ]; then
    [ "$accel" = kvm ] || [ "$accel" = tcg ] || die "CHOIR_SOFTROCE_ACCEL must be kvm or tcg"
    return 0
  fi
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    accel=tcg
    return 0
  fi
  local key
  key=$({ uname -r; qemu-system-x86_64 --version | head -n 1; echo "$kver"; } | sha256sum | cut -c1-16)
  if [ -f "$cache/accel-$key" ]; then
    accel=$(cat "$cache/accel-$key")
    return 0
  fi
  local plog=$cache/kvm-probe.log
  rm -f "$plog"
  # In a subshell whose stderr is a file: a QEMU that aborts is not worth a line from bash.
  (timeout -k 5 30 qemu-system-x86_64 -nodefaults -no-user-config -nographic -monitor none \
    -serial "file:$plog" -machine q35,accel=kvm -cpu host -smp 2 -m 256 -no-reboot \
    -kernel "$kdir/vmlinuz" -initrd "$initramfs" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 softroce.mode=probe" \
    </dev/null >"$cache/kvm-probe.qemu.out" 2>&1 || true) 2>>"$cache/kvm-probe.qemu.out"
  if grep -q 'softroce-guest: probe-ok' "$plog" 2>/dev/null; then
    accel=kvm
  else
    accel=tcg
  fi
  echo "$accel" >"$cache/accel-$key"
  echo "$me: /dev/kvm $([ "$accel" = kvm ] && echo works || echo does not boot a guest here): using $accel" >&2
}

prepare_kernel
prepare_initramfs
choose_accel
exec {lock_fd}>&-

# ---------------------------------------------------------------------------------------------
# The run folder: share/ is the guest's /run/softroce (read-write).
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/choir-softroce.XXXXXX")
share=$run_dir/share
mkdir -p "$share"
chmod 777 "$share"
console_log=$run_dir/console.log
: >"$share/stdout"
: >"$share/stderr"

if [ "$selftest" = 1 ]; then
  cat >"$share/selftest.sh" <<'SELFTEST'
# softroce selftest, run in the guest by softroce.sh --selftest.
set -u
ok=1
dev=rxe0
port=/sys/class/infiniband/$dev/ports/1
echo "== ibv_devices"
ibv_devices || ok=0
echo "== ibv_devinfo -d $dev"
ibv_devinfo -d $dev >/tmp/devinfo.txt 2>&1 || ok=0
cat /tmp/devinfo.txt
if ! grep -q PORT_ACTIVE /tmp/devinfo.txt; then
  echo "selftest: ibv_devinfo -d $dev does not show PORT_ACTIVE"
  ok=0
fi
echo "== GID table of $dev port 1 (index, GID, type, netdev)"
v4=""
v6=""
# The table has hundreds of slots and a process costs a lot under TCG: read with bash's read.
for f in "$port"/gids/*; do
  i=${f##*/}
  read -r gid <"$f" 2>/dev/null || continue
  [ "$gid" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
  read -r type <"$port/gid_attrs/types/$i" 2>/dev/null || type="?"
  read -r ndev <"$port/gid_attrs/ndevs/$i" 2>/dev/null || ndev="?"
  kind=IPv6
  case $gid in 0000:0000:0000:0000:0000:ffff:*) kind=IPv4 ;; fe80:*) kind=IPv6-link-local ;; esac
  printf '  %s  %s  %s  %s  (%s)\n' "$i" "$gid" "$type" "$ndev" "$kind"
  if [ "$type" = "RoCE v2" ]; then
    [ "$kind" = IPv4 ] && [ -z "$v4" ] && v4=$i
    [ "$kind" = IPv6 ] && [ -z "$v6" ] && v6=$i
  fi
done
echo "RoCE v2 IPv4 GID index: ${v4:-none}; RoCE v2 IPv6 GID index: ${v6:-none}"

# ibv_rc_pingpong server in the background, client against it (the client is retried while
# the server is not listening yet).
pingpong() {
  local label=$1 gid=$2 port_no=$3 peer=$4 i rc
  echo "== ibv_rc_pingpong over $dev, GID index $gid ($label)"
  timeout 120 ibv_rc_pingpong -d $dev -g "$gid" -p "$port_no" -n 500 >/tmp/pp-server.txt 2>&1 &
  local srv=$!
  rc=1
  for i in $(seq 1 40); do
    sleep 0.25
    if timeout 120 ibv_rc_pingpong -d $dev -g "$gid" -p "$port_no" -n 500 "$peer" >/tmp/pp-client.txt 2>&1; then
      rc=0
      break
    fi
    grep -q "Couldn't connect" /tmp/pp-client.txt || break
  done
  wait $srv
  local src=$?
  echo "-- server (status $src):"; sed 's/^/   /' /tmp/pp-server.txt
  echo "-- client (status $rc):"; sed 's/^/   /' /tmp/pp-client.txt
  [ $rc = 0 ] && [ $src = 0 ]
}
if [ -z "$v4" ]; then
  echo "selftest: no RoCE v2 IPv4 GID on $dev"
  ok=0
else
  pingpong "RoCE v2 IPv4" "$v4" 18515 127.0.0.1 || ok=0
fi
if [ -z "$v6" ]; then
  echo "selftest: no RoCE v2 IPv6 GID on $dev"
  ok=0
else
  pingpong "RoCE v2 IPv6" "$v6" 18516 127.0.0.1 || ok=0
fi
if [ $ok = 1 ]; then
  echo "softroce selftest: PASS"
  exit 0
fi
echo "softroce selftest: FAIL"
exit 1
SELFTEST
  cmd=("$BASH" /run/softroce/selftest.sh)
fi

# The guest-side runner: the environment, the working directory, then COMMAND; every value is
# quoted with printf %q and read back by the same bash.
pass_var() {
  case $1 in
    PATH | LD_LIBRARY_PATH | LD_PRELOAD | HOME | USER | LOGNAME | LANG | LC_* | TZ | TMPDIR | TERM) return 0 ;;
    NCCL_* | CHOIR_* | UCX_* | FI_* | RDMAV_* | IBV_* | ASAN_* | UBSAN_* | LSAN_* | TSAN_* | MSAN_* | MESON_*) return 0 ;;
  esac
  local extra
  for extra in ${CHOIR_SOFTROCE_ENV:-}; do
    [ "$1" = "$extra" ] && return 0
  done
  return 1
}
{
  echo "# written by softroce.sh"
  echo ': >/run/softroce/started'
  while IFS= read -r v; do
    [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    pass_var "$v" || continue
    if [ "$v" = PATH ]; then
      printf 'export PATH=%q\n' "$caller_path"
    else
      printf 'export %s=%q\n' "$v" "${!v}"
    fi
  done < <(compgen -e)
  printf 'cd -- %q 2>/dev/null || { echo %q >/run/softroce/error; exit 125; }\n' \
    "$PWD" "cannot enter the working directory $PWD in the guest"
  printf 'exec'
  printf ' %q' "${cmd[@]}"
  printf '\n'
} >"$share/cmd.sh"

# ---------------------------------------------------------------------------------------------
# Boot.
if [ "$accel" = kvm ]; then cpu=host; else cpu=max; fi
start=$SECONDS
qemu-system-x86_64 -nodefaults -no-user-config -nographic -monitor none \
  -serial "file:$console_log" \
  -machine q35 -accel "$accel" -cpu "$cpu" -smp 2 -m "$mem" -no-reboot \
  -kernel "$kdir/vmlinuz" -initrd "$initramfs" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off softroce.mode=run" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$share,mount_tag=softroce,security_model=none" \
  -netdev user,id=n0,restrict=on,ipv6=off -device virtio-net-pci,netdev=n0,romfile= \
  </dev/null >"$run_dir/qemu.out" 2>&1 &
qemu_pid=$!

# Stream COMMAND's output while the guest runs; tail ends by itself once QEMU is gone.
tail -n +1 -F -s 0.2 --pid="$qemu_pid" "$share/stdout" 2>/dev/null &
tail_pids+=($!)
tail -n +1 -F -s 0.2 --pid="$qemu_pid" "$share/stderr" >&2 2>/dev/null &
tail_pids+=($!)

stage() {
  [ -f "$console_log" ] || return 0
  sed -n 's/^.*softroce-guest: \([a-z-]*\).*$/\1/p' "$console_log" 2>/dev/null | tail -n 1 || true
}
guest_error() {
  if [ -s "$share/error" ]; then
    head -n 1 "$share/error"
  elif [ -f "$console_log" ]; then
    sed -n 's/^.*softroce-guest: error: //p' "$console_log" 2>/dev/null | tail -n 1 || true
  fi
}

# Kill QEMU and let the output streams drain (tail ends once QEMU is gone).
stop_guest() {
  kill "$qemu_pid" 2>/dev/null || true
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=""
  local p
  for p in "${tail_pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  tail_pids=()
}

ready=0
boot_s=""
while kill -0 "$qemu_pid" 2>/dev/null; do
  elapsed=$((SECONDS - start))
  if [ "$ready" = 0 ] && grep -q 'softroce-guest: ready' "$console_log" 2>/dev/null; then
    ready=1
    boot_s=$elapsed
  fi
  if [ "$ready" = 0 ] && [ "$elapsed" -ge "$boot_timeout_s" ]; then
    stop_guest
    st=$(stage)
    die "the guest did not boot within $boot_timeout_s s (rxe0 not ready; last stage: ${st:-none}, accel $accel)"
  fi
  if [ "$elapsed" -ge "$timeout_s" ]; then
    stop_guest
    die "timed out after $timeout_s s (the command was still running; the guest was killed)"
  fi
  sleep 0.2
done
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=""
for p in "${tail_pids[@]}"; do
  wait "$p" 2>/dev/null || true
done
tail_pids=()

if [ -f "$share/status" ]; then
  rc=$(cat "$share/status")
  is_uint "$rc" || die "the guest wrote an odd status '$rc'"
  [ -z "${CHOIR_SOFTROCE_VERBOSE:-}" ] ||
    echo "$me: ready after ${boot_s:-?} s, done after $((SECONDS - start)) s (accel $accel)" >&2
  exit "$rc"
fi
err=$(guest_error)
if [ -n "$err" ]; then
  die "$err"
fi
st=$(stage)
if [ -z "$st" ]; then
  die "QEMU stopped (status $qemu_rc) before the guest's init started (accel $accel)"
fi
die "the guest stopped (QEMU status $qemu_rc, last stage: ${st:-none}) without running the command"
}
