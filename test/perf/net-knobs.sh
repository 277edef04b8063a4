#!/usr/bin/env bash
# Choir's net-socket under knob variants, every rank pair forced through the network (p2p and
# shm off, loopback), NVIDIA NCCL's internal Socket transport as the reference, on one GPU host.
# Prints one line per run: "OP LABEL: busbw(GB/s) per size" (out-of-place), for comparing
# defaults. Needs a build in BUILD (default build-dev) and NVIDIA NCCL from PyTorch's wheel.
#   VARIANTS="INLINE:SPIN_US:NTHREADS ..."  (CHOIR_SOCKET_INLINE, CHOIR_SOCKET_SPIN_US,
#                                            NCCL_SOCKET_NTHREADS; default: a few)
#   OPS="all_reduce ..."   SIZES="-b 1M -e 4M -f 2"   REPS="1 2"   NGPUS (default: all)
#   test/perf/net-knobs.sh | sort -s -k1,2
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
export NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo}
build=${BUILD:-build-dev}
ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
if [ "${ngpus:-0}" -lt 2 ]; then
  echo "net-knobs: needs 2 GPUs or more (found ${ngpus:-0})" >&2
  exit 77
fi
nv=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)/lib
[ -f "$nv/libnccl.so.2" ] || { echo "net-knobs: NVIDIA NCCL not found ($nv)" >&2; exit 1; }
# run LIBDIR LABEL OP: busbw per size; a size with wrong elements prints as WRONG.
run() {
  local r
  r=$(LD_LIBRARY_PATH=$1 timeout 120 "$build/test/perf/$3_perf" ${SIZES:--b 1M -e 4M -f 2} \
        -g "$ngpus" -n 20 -w 5 2>&1 |
      awk '$1 ~ /^[0-9]+$/ {printf "%s ", ($9 == "0" || $9 == "N/A") ? $8 : "WRONG"}')
  echo "$3 $2: ${r:-FAILED}"
}
for op in ${OPS:-all_reduce all_gather reduce_scatter}; do
  for rep in ${REPS:-1 2}; do
    NCCL_NET=Socket NCCL_NET_PLUGIN=none run "$nv" nvidia "$op"
    for v in ${VARIANTS:-16384:1000:1 16384:1000:2 16384:100:2 65536:100:2}; do
      IFS=: read -r inl spin nth <<<"$v"
      CHOIR_SOCKET_INLINE=$inl CHOIR_SOCKET_SPIN_US=$spin NCCL_SOCKET_NTHREADS=$nth \
        run "$PWD/$build" "choir-inline$inl-spin$spin-threads$nth" "$op"
    done
  done
done
