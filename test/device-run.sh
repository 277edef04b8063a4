#!/usr/bin/env bash
# The one command for a GPU machine: build (unless a carried build is there), run the GPU suites
# and the side-by-side benchmarks, and print a short table last. Steps, in order, any subset:
#   build      meson setup (-Dkernel_split=op) + ninja (reuses BUILD if it exists)
#   gpu[:T,U]  meson test --suite gpu --suite multigpu (or only the tests named)
#   init       ncclCommInitRank time and GPU memory, Choir vs NVIDIA NCCL, 2 and NGPUS ranks
#   ref:OPS    perf binaries on NVIDIA NCCL only (validates the tools): OPS = all or a,b,c
#   compare:OPS  test/perf/compare, Choir vs NVIDIA NCCL
#   compare-net:OPS  the same with every rank pair through the network (p2p and shm off):
#              Choir's net-socket vs NVIDIA's internal Socket transport, over NET_IFNAME (lo);
#              then one line on issue 7's bar: the cells from 1 MB where Choir's busbw is lower
#   compare-netplugin:NAME:OPS  Choir through its net plugin NAME (ofi, ucx, ib, socket; from
#              NETPLUGIN_DIR) against NVIDIA's internal Socket transport, p2p and shm off; with
#              one GPU, 2 processes share it (MPS), each posing as its own host
#   netplugin  NVIDIA's NCCL loads Choir's net plugins (NCCL_NET_PLUGIN; NETPLUGINS, default
#              socket), all_reduce checked
#   plugins    Choir's tuner and profiler plugins loaded into NVIDIA's NCCL, all_reduce on NGPUS
#   sanitize   compute-sanitizer memcheck and racecheck on the kernel checker
#   check[:ARGS]  the correctness suite (test/multigpu/coll_check) over the bar's configurations.
#              With NGPUS >= 2: 2 and NGPUS GPUs (NGPUS >= 4: also 4), one process (threads)
#              and one process per GPU (procs), p2p, NCCL_P2P_DISABLE=1 (shm) and both off (net
#              through net-socket over NET_IFNAME, default lo), CUDA-graph replays, the semantic
#              cases, and (4 GPUs or more) procs posing as 2 hosts (hosts: CHOIR_TEST_HOSTS=2,
#              NCCL_HOSTID per process: p2p within a "host", the network between, rings from
#              the per-host topology searches), and net1
#              (the network with NCCL_NCHANNELS_PER_NET_PEER=1, 2 GPUs); tree and treeH only
#              when named in CHECK_CONFIGS: AllReduce forced onto the tree (NCCL_ALGO=
#              allreduce:tree, --ops=allreduce added to ARGS), treeH with procs posing as H hosts
#              (e.g. "4:procs:tree2:rpg4 8:procs:tree4:rpg8 4:threads:tree:rpg4"); gdr only when named in
#              CHECK_CONFIGS (the network through test/plugin's GPUDirect shim, CHOIR_NET_GDR=1:
#              buffers in GPU memory, flushes; it stalled on 2 x H200, see README).
#              With NGPUS = 1: 2, 4 and 8 ranks sharing the GPU, threads and procs, over p2p, shm
#              and net, then graph and semantics with 2 and 4 ranks, threads and procs.
#              ARGS replace the default --quick of the matrix runs, '+' for a space
#              (check:--full, check:--ops=allreduce,sendrecv+--sizes=1,1MB).
#              LIB=choir (default: BUILD) or LIB=nvidia picks the library (NVIDIA's NCCL refuses
#              ranks sharing a GPU: those configs are reported as refused, not run); a table
#              (ranks, GPUs, mode, transport, rc, cases, failed, seconds) goes into the summary.
#              TRANSPORT plugin-NAME: every rank pair through Choir's net plugin NAME (ofi,
#              ucx, ib, socket: libnccl-net-NAME.so in NETPLUGIN_DIR, default BUILD/plugins);
#              xhost-NAME: the same with every process posing as its own host (procs only),
#              which lets NVIDIA's NCCL (LIB=nvidia) run ranks sharing a GPU, e.g.
#              LIB=nvidia CHECK_CONFIGS="2:procs:xhost-ofi:rpg2 2:procs:xhost-ib:rpg2".
#              A config is RANKS:MODE:TRANSPORT[:rpgR]: RANKS ranks, R of them per GPU (default
#              1: RANKS GPUs), e.g. "2:threads:p2p 4:procs:shm 8:threads:net:rpg8
#              4:procs:semantics:rpg2"; CHECK_CONFIGS picks them. Procs sharing a GPU run under a
#              private MPS daemon (test/gpu-mps.sh), started for them only (threads need none);
#              where it cannot start, they are reported "skipped: no MPS (...)", never run
#              without it.
#   perf-shared[:R]  every perf binary with R ranks (default 4) sharing GPU 0: -g R
#              --ranks-per-gpu R (one thread), then -p R --ranks-per-gpu R (processes, under MPS);
#              PERF_SHARED_ARGS (default -b 8 -e 64M -f 2 -c 1 -n 5); the summary has the #wrong
#              total of each binary and layout (0 expected)
#   proto-sweep[:R]  all_reduce_perf with R ranks (default "2 4") sharing GPU 0 in one process
#              (-g R --ranks-per-gpu R), once per NCCL_PROTO forced (LL, LL128, Simple) and once
#              with the plan's own choice, normal launches and CUDA-graph replays (-G 20);
#              PROTO_SWEEP_REPEAT times (default 3), the runs alternating, each cell the median;
#              PROTO_SWEEP_SIZES (default "-b 8 -e 1G -f 4"); PROTO_SWEEP_MODES (default "0 20":
#              normal launches and -G 20; "20": graphs only); a table per R and mode: each
#              protocol's time per size, LL's speedup over Simple, the default's ratio to the best
#              forced protocol; the lines the issue's bar reads: LL faster than Simple at 8 B..64
#              KB, >= 1.5x at 8 B..4 KB with -G, default within 10% of the best at every size
#   algo-sweep[:R]  all_reduce with R ranks (default "2 4") sharing GPU 0 in one process: OneShot
#              and TwoShot forced (NCCL_ALGO=allreduce:oneshot, :twoshot), the ring with LL, the plan's
#              choice, normal launches and -G 20, ALGO_SWEEP_REPEAT runs (default 3) alternating,
#              ALGO_SWEEP_SIZES (default "-b 8 -e 1M -f 4"); then a group of AGG (default 64)
#              all-reduces against one (-m AGG, -m 1, 8 B..64 KB): the lines issue 27's bar reads;
#              ALGO_SWEEP_OPS="all_reduce all_gather reduce_scatter" adds OneShot AllGather and
#              ReduceScatter against the ring with LL and the plan's choice; and first the
#              floor under these graphs (test/perf/graph_floor: R streams of empty kernels, and
#              of kernels that only meet each other)
#   sym-sweep[:R]  all_reduce on symmetric windows (all_reduce_perf -R 2), R ranks (default 4)
#              sharing GPU 0: CHOIR_SYM_KERNELS 0 (the usual plan), 2 (SymTwoShot) and 1 (the
#              plan's rule), graphs and normal launches, SYM_SWEEP_REPEAT runs (default 3)
#              alternating, SYM_SWEEP_SIZES (default "-b 8 -e 64M -f 4"), every element checked
#   group-sweep[:R]  all_reduce, groups of AGG (default 64) against one call, R ranks (default
#              "2 4") sharing GPU 0: the plan's own, the ring with LL forced with works side by
#              side and one after the other (CHOIR_RING_SPREAD=0), and each planned alone
#              (CHOIR_GROUP_PLAN=0); GROUP_SWEEP_MODES (default "20": graphs), GROUP_SWEEP_REPEAT
#              (default 3); the group's time over one call's per size (the bar: at most 3x)
#   prof       Choir's trace plugin under Choir's core: traces of all_reduce, alltoall and
#              sendrecv (2 ranks sharing GPU 0, p2p and net) checked by test/tools/trace_check.py,
#              and the overhead of the loaded plugin with every event masked off on small
#              all-reduces (PROF_REPEAT alternating runs, default 7; the bar: within 2%), then
#              the same inside one process (test/perf/prof_overhead, PROF_ROUNDS rounds of
#              PROF_ITERS calls); each trace's KernelCh events carry the kernels' GPU start and
#              stop times
#   one-rank   all_reduce_perf with one rank, 8 B .. 1 GB, -c 1, Choir and NVIDIA alternated
#              ONE_RANK_REPEAT times (default 3) through test/perf/compare --ngpus 1
#              (ONE_RANK_SIZES replaces "-b 8 -e 1G -f 2"); a table
#              per size: out-of-place time and algbw ratio, in-place time of both; the bar: out of
#              place at most 5% slower than NVIDIA, in place under 2 us, at every size
#   torch      test/torch/run.sh TORCH_SIZES (default "1 2 4") when that file exists, with this
#              script's MPS daemon when a world size exceeds NGPUS; its lines go into the summary
#   sanitize-check  compute-sanitizer memcheck and racecheck on a 2-rank quick subset of
#              coll_check (2 GPUs; with one GPU, 2 ranks sharing it); SANITIZE_ARGS replaces
#              the subset's coll_check options, SANITIZE_TOOLS the tools (default "memcheck
#              racecheck"), SANITIZE_TIMEOUT each tool's seconds (default 580)
#   faults[:N] test/multigpu/fault_check (FAULT_ONLY=REGEX picks cases by name, e.g. 'net$';
#              FAULT_TIMEOUT: seconds per case, default 590): 3 ranks (sharing the GPUs under MPS
#              when fewer), the last killed in the middle of an all-reduce and of a send/recv
#              ring, N repetitions
#              (default 20) each over p2p, shm and the network: every survivor reports the error
#              within 3 s, naming the rank, and aborts within 5 s; no hang. Then over p2p: the
#              victim stopped (SIGSTOP: within CHOIR_PEER_TIMEOUT 5 s + 3 s), and killed or
#              stopped during ncclCommInitRank (CHOIR_BOOTSTRAP_TIMEOUT 10 s + 3 s)
#   net-repeat[:N]  coll_check --quick over the network (p2p and shm off) N times (default 20),
#              procs and threads in turn, 2 ranks on 2 GPUs (one GPU: sharing it, procs under MPS,
#              threads only without it), 20 s each: catches intermittent stalls; on a stall it
#              prints every thread's kernel wait channel and the proxies' stall reports
# Environment: NGPUS (default: all), BUILD (default build-dev), PERF_ARGS (perf options),
# PERF_SHARED_ARGS, ONE_RANK_REPEAT, TORCH_SIZES,
# REF_TOPO (ranks of ref runs, default "-g NGPUS"; e.g. "-p 4"), REF_TAG (log name suffix),
# NETPLUGIN_DIR and NETLIB_DIR (carried net plugins and the libraries they need, e.g. libfabric
# and UCX on a machine without them: test/tools/carry-netlibs.sh), LIB (check steps: choir or
# nvidia), CHECK_CONFIGS, CHECK_TIMEOUT (seconds per run, default 900),
# NCCL_DEBUG for check runs (default WARN, so that a launch stalled 60 s on the network logs its
# proxy's connection counters; a failed run's first stall report goes into the summary),
# CHECK_STACKS_AT (seconds: a check run still going then gets its threads' stacks: gdb, or
# without it coll_check's own SIGUSR2 dump, CHOIR_TEST_STACKS=1, resolved with addr2line),
# LOGS=keep (leave every log in OUT; default: only logs.tgz and summary.txt stay),
# OUT (where logs and tables go; the device tool provides it).
#   test/device-run.sh build gpu init
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/choir-device-out}
mkdir -p "$out"
build=${BUILD:-build-dev}
ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# A private MPS daemon for the steps whose processes share a GPU; stopped on exit.
# shellcheck source=gpu-mps.sh
. test/gpu-mps.sh
trap 'mps_stop >/dev/null' EXIT
# need_mps: start it (or keep the running one); 1 with the reason in mps_why when it cannot.
need_mps() {
  mps_why=""
  mps_start >"$out/mps-start.txt" 2>&1 && return 0
  mps_why=$(tail -1 "$out/mps-start.txt")
  mps_why=${mps_why#mps: }
  return 1
}
# perf_wrong LOG: "W wrong in N rows": the #wrong columns of a perf binary's table, summed.
perf_wrong() {
  awk '!/^#/ && NF == 13 { rows++; if ($9 ~ /^[0-9]+$/) w += $9; if ($13 ~ /^[0-9]+$/) w += $13 }
       END { if (rows) printf "%d wrong in %d rows", w, rows; else printf "no rows" }' "$1"
}
# plugin_env NAME: into the array penv, what Choir's net plugin NAME needs to run here (its
# provider or transport over TCP on NET_IFNAME), as VAR=VALUE words.
plugin_env() {
  case "$1" in
    ofi) penv=(FI_PROVIDER=tcp FI_TCP_IFACE="${NET_IFNAME:-lo}") ;;
    ucx) penv=(UCX_TLS=tcp UCX_NET_DEVICES="${NET_IFNAME:-lo}") ;;
    *) penv=() ;;
  esac
}
# compare_run OPS OUTDIR LOG: test/perf/compare, Choir against NVIDIA's NCCL, on NGPUS.
compare_run() {
  test/perf/compare --lib-a "$PWD/$build" --name-a choir --lib-b "$ref_lib" --name-b nccl \
    --bin-dir "$build/test/perf" --ops "$1" --ngpus "$ngpus" --out "$2" ${PERF_ARGS:-} >"$3" 2>&1
}

# stack_dump LOG PID...: each process's threads by wait channel into LOG.stacks, then their
# stacks: gdb's, or without a debugger coll_check's own (CHOIR_TEST_STACKS=1: SIGUSR2 makes a
# thread write its frames to LOG; one thread at a time; stack_resolve reads them after the run).
stack_dump() {
  local log=$1 p tk
  shift
  for p in "$@"; do
    echo "== pid $p; threads by wait channel:" >>"$log.stacks"
    for tk in /proc/"$p"/task/*; do
      echo "  $(cat "$tk/comm" 2>/dev/null) $(cat "$tk/wchan" 2>/dev/null)"
    done | sort | uniq -c >>"$log.stacks"
    if command -v gdb >/dev/null; then
      timeout 60 gdb -p "$p" -batch -ex "thread apply all bt 15" >>"$log.stacks" 2>&1
    else
      python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
    libc.syscall(234, pid, tid, 12)  # tgkill(pid, tid, SIGUSR2)
    time.sleep(0.2)' "$p" 2>>"$log.stacks"
    fi
  done
}

# stack_resolve LOG: the "== stack of thread" blocks coll_check wrote to LOG, each frame
# "object(+0xOFF)[addr]" resolved to function and line with addr2line.
stack_resolve() {
  python3 - "$1" <<'PYEOF'
import re, subprocess, sys
frame = re.compile(r"^(/[^(]+)\(([^)]*)\)\[(0x[0-9a-f]+)\]$")
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("== stack of thread"):
        print(line)
        continue
    m = frame.match(line)
    if not m:
        continue
    obj, sym, _ = m.groups()
    where = sym
    if sym.startswith("+0x"):
        try:
            r = subprocess.run(["addr2line", "-f", "-C", "-e", obj, sym[1:]], capture_output=True,
                               text=True, timeout=20).stdout.split("\n")
            where = "%s %s" % (r[0], r[1].rsplit("/", 1)[-1]) if len(r) > 1 else sym
        except Exception:
            pass
    print("    %-40s %s" % (where, obj.rsplit("/", 1)[-1]))
PYEOF
}

# NVIDIA's NCCL, as shipped with PyTorch: the reference.
ref_dir=${REF_NCCL_DIR:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)}
ref_lib="$ref_dir/lib"
ref_inc="$ref_dir/include"
if [ ! -f "$ref_lib/libnccl.so.2" ]; then
  echo "reference NCCL not found (looked in '$ref_dir'); set REF_NCCL_DIR" >&2
  exit 1
fi
note "device: $(nvidia-smi -L 2>/dev/null | head -1 | cut -c1-60) x$ngpus; reference NCCL: ${ref_lib:-none}"

for step in "$@"; do
  case "$step" in
    build)
      t0=$(date +%s)
      if [ ! -f "$build/build.ninja" ]; then
        # One kernel source per (type, op): six times the compiler jobs, each a sixth of the work,
        # for a GPU machine's many cores (CI's two cores keep one per type).
        meson setup "$build" ${ref_inc:+-Dnccl_ref_include=$ref_inc} -Dkernel_split=op \
          >"$out/setup.log" 2>&1 ||
          { tail -20 "$out/setup.log"; note "build: meson setup FAILED"; exit 1; }
      fi
      ninja -C "$build" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; note "build: FAILED"; exit 1; }
      note "build: ok in $(( $(date +%s) - t0 )) s"
      ;;
    gpu | gpu:*)
      names=""
      [ "$step" != gpu ] && names=${step#gpu:} && names=${names//,/ }
      if [ -n "$names" ]; then
        meson test -C "$build" $names --print-errorlogs --num-processes 1 >"$out/gpu-tests.log" 2>&1
      else
        meson test -C "$build" --suite gpu --suite multigpu --print-errorlogs \
          --num-processes 1 >"$out/gpu-tests.log" 2>&1
      fi
      rc=$?
      grep -E "^ *[0-9]+/[0-9]+ " "$out/gpu-tests.log" | sed 's/^/  /' | tee -a "$summary"
      note "gpu suites: rc=$rc"
      ;;
    init)
      for lib in choir:"$PWD/$build" nccl:"$ref_lib"; do
        name=${lib%%:*} dir=${lib#*:}
        for n in 2 "$ngpus"; do
          if [ "$n" -gt "$ngpus" ]; then
            note "init $name: $n ranks need $n GPUs: skipped"
            continue
          fi
          for mode in "" "-p"; do
            LD_LIBRARY_PATH="$dir" "$build/test/perf/init_perf" -g "$n" $mode -n 5 \
              >"$out/init-$name-$n$mode.log" 2>&1
            line=$(grep '^init_perf ranks' "$out/init-$name-$n$mode.log" || tail -1 "$out/init-$name-$n$mode.log")
            note "init $name: $line"
          done
        done
      done
      ;;
    ref:*)
      ops=${step#ref:}
      [ "$ops" = all ] && ops=all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,alltoall,gather,scatter
      for op in ${ops//,/ }; do
        log="$out/ref${REF_TAG:+-$REF_TAG}-$op.log"
        LD_LIBRARY_PATH="$ref_lib" timeout ${OP_TIMEOUT:-300} "$build/test/perf/${op}_perf" \
          ${REF_TOPO:--g $ngpus} ${PERF_ARGS:--b 8 -e 8G -f 2 -c 1} >"$log" 2>&1
        rc=$?
        note "ref${REF_TAG:+ $REF_TAG} $op: rc=$rc $(grep -E 'Avg bus bandwidth|Out of bounds' "$log" | tr -s ' ' | tr '\n' ' ')"
      done
      ;;
    compare:*)
      ops=${step#compare:}
      compare_run "$ops" "$out" "$out/compare.log"
      note "compare: rc=$? (table in compare.log)"
      ;;
    compare-net:*)
      # Every rank pair through the network: p2p and shm off on both sides, loopback sockets.
      # Choir uses its net-socket plugin; NVIDIA its internal Socket transport (no plugin).
      ops=${step#compare-net:}
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_NET_PLUGIN=none \
        NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} compare_run "$ops" "$out/net" "$out/compare-net.log"
      note "compare-net ($ngpus GPUs, NET/Socket over ${NET_IFNAME:-lo}): rc=$? (table in compare-net.log)"
      # Issue 7's bar: busbw at least NVIDIA's at every size from 1 MB (ratio of the medians;
      # with --repeat, also the worst repeat).
      python3 - "$out/net/compare.csv" <<'PY' | tee -a "$summary"
import csv, sys
# compare.csv starts with '#' comment lines (which library is A, which B) before its header.
lines = [l for l in open(sys.argv[1], newline="") if not l.startswith("#")]
rows = [r for r in csv.DictReader(lines) if r["metric"] == "busbw" and int(r["size"]) >= 1 << 20]
below = ["%s@%s %.3f" % (r["op"], r["size"], float(r["ratio"])) for r in rows if float(r["ratio"]) < 1]
worst = ["%s@%s %s" % (r["op"], r["size"], r["ratio_min"]) for r in rows if float(r["ratio_min"]) < 1]
print("net bar (busbw >= NVIDIA from 1 MB): %d cells, %d below: %s; worst repeat below 1 in %d" %
      (len(rows), len(below), ", ".join(below) or "none", len(worst)))
PY
      ;;
    compare-netplugin:*)
      # Choir through its net plugin NAME against NVIDIA's internal Socket transport, every rank
      # pair through the network over NET_IFNAME (lo): compare-netplugin:NAME:OPS.
      rest=${step#compare-netplugin:}
      pname=${rest%%:*} ops=${rest#*:}
      plugin_env "$pname"
      aenv=(--env-a "NCCL_NET_PLUGIN=${NETPLUGIN_DIR:-$PWD/$build/plugins}/libnccl-net-$pname.so")
      for kv in ${penv[@]+"${penv[@]}"}; do aenv+=(--env-a "$kv"); done
      # One GPU: 2 processes share it (under MPS), each posing as its own host
      # (CHOIR_TEST_HOSTS=2), which NVIDIA's NCCL accepts for ranks sharing a GPU.
      lay=(--ngpus "$ngpus")
      if [ "$ngpus" -eq 1 ]; then
        lay=(--ngpus 1 --procs 2 --ranks-per-gpu 2 --env-a CHOIR_TEST_HOSTS=2
          --env-b CHOIR_TEST_HOSTS=2)
        if ! need_mps; then
          note "compare-netplugin $pname (2 processes sharing GPU 0): skipped: no MPS ($mps_why)"
          continue
        fi
      fi
      # shellcheck disable=SC2086 # PERF_ARGS is a list of options
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} \
        LD_LIBRARY_PATH="${NETLIB_DIR:-}" \
        test/perf/compare --lib-a "$PWD/$build" --name-a "choir-$pname" --lib-b "$ref_lib" \
        --name-b nccl-socket --bin-dir "$build/test/perf" --ops "$ops" "${lay[@]}" \
        --out "$out/net-$pname" "${aenv[@]}" --env-b NCCL_NET=Socket --env-b NCCL_NET_PLUGIN=none \
        ${PERF_ARGS:-} >"$out/compare-net-$pname.log" 2>&1
      note "compare-netplugin $pname ($ngpus GPUs${lay[2]:+, 2 processes posing as 2 hosts}, over ${NET_IFNAME:-lo}): rc=$? (table in compare-net-$pname.log)"
      grep -E "geometric mean" "$out/compare-net-$pname.log" | sed 's/^/    /' | tee -a "$summary"
      ;;
    netplugin)
      # NVIDIA's NCCL loads each of Choir's net plugins (NETPLUGINS, default "socket"; from
      # NETPLUGIN_DIR, default the build's plugins/) and runs an all_reduce through it (checked).
      perf="$build/test/perf/all_reduce_perf"
      for pname in ${NETPLUGINS:-socket}; do
        plugin_env "$pname"
        log="$out/netplugin-$pname.log"
        env ${penv[@]+"${penv[@]}"} LD_LIBRARY_PATH="$ref_lib${NETLIB_DIR:+:$NETLIB_DIR}" \
          NCCL_NET_PLUGIN="${NETPLUGIN_DIR:-$PWD/$build/plugins}/libnccl-net-$pname.so" \
          NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} \
          NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV \
          timeout 300 "$perf" -b 1M -e 256M -f 4 -g "$ngpus" -c 1 -w 1 -n 3 >"$log" 2>&1
        rc=$?
        note "net-$pname in NVIDIA NCCL: rc=$rc; $(grep -m1 -oE 'NET/Plugin: Loaded net plugin [^ ]+ \(v[0-9]+\)|Loaded net plugin.*' "$log" | head -1); $(grep -m1 -oE 'Using network [A-Za-z]+' "$log"); $(grep -cE 'via NET/[A-Za-z]+' "$log") connections via NET; $(grep -oE 'Out of bounds values : [0-9]+ [A-Z]+' "$log")"
      done
      ;;
    plugins)
      perf="$build/test/perf/all_reduce_perf"
      printf 'allreduce,0,65536,ring,ll,2,-1,-1\n' >"$out/tuner.conf"
      LD_LIBRARY_PATH="$ref_lib" NCCL_TUNER_PLUGIN="$PWD/$build/plugins/libnccl-tuner-default.so" \
        NCCL_TUNER_CONFIG_FILE="$out/tuner.conf" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
        timeout 120 "$perf" -b 8 -e 1M -f 4 -g "$ngpus" -c 1 >"$out/tuner.log" 2>&1
        note "tuner in NVIDIA NCCL: rc=$? loaded=$(grep -c 'TUNER/Choir-default: comm' "$out/tuner.log") applied=$(grep -c 'applied to allreduce' "$out/tuner.log") $(grep -o 'Out of bounds values : [0-9]* [A-Z]*' "$out/tuner.log")"
      rm -f "$out"/choir-trace-*.json
      LD_LIBRARY_PATH="$ref_lib" NCCL_PROFILER_PLUGIN="$PWD/$build/plugins/libnccl-profiler-trace.so" \
        CHOIR_PROFILER_FILE="$out/choir-trace-%h-%p.json" \
        timeout 120 "$perf" -b 8 -e 64M -f 8 -g "$ngpus" -w 2 -n 5 -c 1 >"$out/profiler.log" 2>&1
        rc=$?
      note "profiler in NVIDIA NCCL: rc=$rc $(python3 -c 'import json,glob,sys,collections
ev=[e for f in glob.glob(sys.argv[1]) for e in json.load(open(f))["traceEvents"]]
c=collections.Counter(e["name"] for e in ev if e.get("ph") in ("X","i"))
print(len(ev), "records;", ", ".join("%s=%d" % kv for kv in sorted(c.items())))' "$out/choir-trace-*.json" 2>&1 | tail -1)"
      ;;
    net-repeat | net-repeat:*)
      reps=20
      [ "$step" != net-repeat ] && reps=${step#net-repeat:}
      exe="$PWD/$build/test/multigpu/coll_check" # absolute: pkill below spares other trees
      log="$out/net-repeat.log"
      stalled=0 failed=0 i=0
      # One GPU: the 2 ranks share it (procs under MPS, or threads only without it).
      rpg=1 procs_ok=1
      if [ "$ngpus" -lt 2 ]; then
        rpg=2
        need_mps || { procs_ok=0; note "net-repeat: no MPS ($mps_why): threads only"; }
      fi
      for i in $(seq 1 "$reps"); do
        mode=procs
        { [ $((i % 3)) = 0 ] || [ "$procs_ok" = 0 ]; } && mode=threads
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} \
          NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET LD_LIBRARY_PATH="$PWD/$build" \
          CHOIR_TEST_NDEV=2 CHOIR_TEST_RPG=$rpg "$exe" --mode "$mode" --quick >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 1 80); do sleep 0.25; kill -0 "$pid" 2>/dev/null || break; done
        if kill -0 "$pid" 2>/dev/null; then
          stalled=1
          note "net-repeat: run $i ($mode) still running after 20 s; threads by wait channel:"
          for p in $(pgrep -f "$exe --mode"); do
            for t in /proc/"$p"/task/*; do echo "$p $(cat "$t"/comm) $(cat "$t"/wchan)"; done
          done | sort | uniq -c | sed 's/^/    /' | tee -a "$summary"
          grep -E "no network progress|proxy: rank .* end " "$log" | head -40 | cut -c1-200 |
            sed 's/^/    /' | tee -a "$summary"
          pkill -9 -f "$exe --mode"
          wait "$pid" 2>/dev/null
          break
        fi
        wait "$pid" || { failed=1; note "net-repeat: run $i ($mode) failed:"; tail -5 "$log" | sed 's/^/    /' | tee -a "$summary"; break; }
      done
      note "net-repeat: $i run(s), stalled=$stalled failed=$failed (ranks per GPU: $rpg)"
      mps_stop >/dev/null
      ;;
    faults | faults:*)
      reps=20
      [ "$step" != faults ] && reps=${step#faults:}
      # 3 ranks (the last one the victim), sharing the GPUs when there are fewer (processes
      # under MPS): killed in an all-reduce and in a send/recv ring over p2p, shm and the
      # network (N repetitions each), then over p2p stopped in an all-reduce and killed or
      # stopped during creation (fewer repetitions: each waits for a timeout).
      if [ "$ngpus" -lt 3 ] && ! need_mps; then
        note "faults: skipped: 3 ranks on $ngpus GPU(s) need MPS ($mps_why)"
      else
        fault_run() { # NAME REPS ENV... -- ARGS...
          local name=$1 n=$2
          [[ "$name" =~ ${FAULT_ONLY:-.} ]] || return 0
          shift 2
          local envs=()
          while [ "$1" != -- ]; do envs+=("$1"); shift; done
          shift
          env "${envs[@]}" NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} LD_LIBRARY_PATH="$PWD/$build" \
            timeout "${FAULT_TIMEOUT:-590}" "$build/test/multigpu/fault_check" -n 3 --reps "$n" "$@" >"$out/faults-$name.log" 2>&1
          note "faults $name: rc=$? $(tail -1 "$out/faults-$name.log")"
          grep -E "FAILED|hung|STUCK|did not" "$out/faults-$name.log" | head -3 | cut -c1-240 |
            sed 's/^/    /' | tee -a "$summary"
        }
        for op in allreduce sendrecv; do
          fault_run "kill-$op-p2p" "$reps" -- --op $op
          fault_run "kill-$op-shm" "$reps" NCCL_P2P_DISABLE=1 -- --op $op
          fault_run "kill-$op-net" "$reps" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- --op $op
        done
        fault_run stop-allreduce-p2p 5 -- --how stop
        fault_run kill-init-p2p 5 -- --when init
        fault_run stop-init-p2p 3 -- --when init --how stop
        # Under MPS, its server's log says which client met a GPU fault (by pid).
        if [ -n "${CUDA_MPS_LOG_DIRECTORY:-}" ] && [ -f "$CUDA_MPS_LOG_DIRECTORY/server.log" ]; then
          cp "$CUDA_MPS_LOG_DIRECTORY/server.log" "$out/faults-mps-server.log"
          note "faults: MPS server log: $(grep -ciE 'fault|exception|error' "$out/faults-mps-server.log") lines about faults or errors"
        fi
        mps_stop >/dev/null
      fi
      ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 280 compute-sanitizer --tool "$tool" --error-exitcode 9 \
          "$build/test/gpu/test-kern-reduce-copy" --quick >"$out/sanitize-$tool.log" 2>&1
        note "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool.log" | tail -1) $(tail -1 "$out/sanitize-$tool.log" | cut -c1-80)"
      done
      ;;
    check | check:*)
      args="--quick"
      [ "$step" != check ] && args=${step#check:} && args=${args//+/ }
      case "${LIB:-choir}" in
        nvidia) libdir="$ref_lib" ;;
        choir) libdir="$PWD/$build" ;;
        *) note "check: LIB must be choir or nvidia, not '$LIB'"; continue ;;
      esac
      exe="$build/test/multigpu/coll_check"
      configs=${CHECK_CONFIGS:-}
      if [ -z "$configs" ] && [ "$ngpus" -eq 1 ]; then
        # One GPU: every layout with all its ranks on it.
        for n in 2 4 8; do
          for mode in threads procs; do
            for tr in p2p shm net; do configs="$configs $n:$mode:$tr:rpg$n"; done
          done
        done
        for n in 2 4; do
          for mode in threads procs; do
            configs="$configs $n:$mode:graph:rpg$n $n:$mode:semantics:rpg$n"
          done
        done
      elif [ -z "$configs" ]; then
        sizes="2"
        [ "$ngpus" -ge 4 ] && sizes="$sizes 4"
        [ "$ngpus" -gt 4 ] && sizes="$sizes $ngpus"
        for n in $sizes; do
          for mode in threads procs; do
            for tr in p2p shm net; do configs="$configs $n:$mode:$tr"; done
          done
          configs="$configs $n:threads:graph $n:threads:semantics $n:procs:semantics"
          [ "$n" -ge 4 ] && configs="$configs $n:procs:hosts"
        done
        configs="$configs 2:procs:net1"
      fi
      # Every rank pair through the network: p2p and shm off, net-socket over NET_IFNAME.
      net_env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME="${NET_IFNAME:-lo}")
      row() { # row RANKS GPUS MODE TRANSPORT RC CASES FAILED SECS
        note "$(printf '  %5s %4s %-8s %-10s %-8s %8s %8s %7s' "$@")"
      }
      note "check (${LIB:-choir}, $args):"
      row ranks gpus mode transport rc cases failed secs
      for cfg in $configs; do
        IFS=: read -r n mode tr rpgf <<<"$cfg"
        rpg=1
        case "$rpgf" in
          "") ;;
          rpg[1-9] | rpg[1-9][0-9]) rpg=${rpgf#rpg} ;;
          *) note "  check: bad config '$cfg' (RANKS:MODE:TRANSPORT[:rpgR])"; continue ;;
        esac
        need=$(( (n + rpg - 1) / rpg ))
        [ "$need" -gt "$ngpus" ] && continue
        # xhost-NAME: every process poses as its own host (NCCL_HOSTID), so NVIDIA's NCCL runs
        # ranks that share a GPU too, all of them through the network plugin NAME.
        if [ "$rpg" -gt 1 ] && [ "${LIB:-choir}" = nvidia ] &&
          ! { [ "$mode" = procs ] && [ "${tr#xhost-}" != "$tr" ]; }; then
          row "$n" "$need" "$mode" "$tr" refused - - 0
          note "      refused: NVIDIA's NCCL does not run ranks that share a GPU (not run)"
          continue
        fi
        # Processes sharing a GPU run under MPS, and never without it; the others without.
        if [ "$mode" = procs ] && [ "$rpg" -gt 1 ]; then
          if ! need_mps; then
            row "$n" "$need" "$mode" "$tr" skipped - - 0
            note "      skipped: no MPS ($mps_why)"
            continue
          fi
        else
          mps_stop >/dev/null
        fi
        extra=() envs=()
        # shellcheck disable=SC2054 # commas inside NCCL_DEBUG_SUBSYS values
        case "$tr" in
          shm) envs=(NCCL_P2P_DISABLE=1) ;;
          net) envs=("${net_env[@]}") ;;
          hosts) envs=(CHOIR_TEST_HOSTS=2 NCCL_SOCKET_IFNAME="${NET_IFNAME:-lo}" NCCL_DEBUG=INFO
                       NCCL_DEBUG_SUBSYS=INIT,GRAPH) ;;
          net1) envs=("${net_env[@]}" NCCL_NCHANNELS_PER_NET_PEER=1 NCCL_DEBUG=INFO
                      NCCL_DEBUG_SUBSYS=P2P) ;;
          gdr) envs=("${net_env[@]}"
                     NCCL_NET_PLUGIN="$PWD/$build/test/plugin/libnccl-net-gdrshim.so"
                     CHOIR_GDRSHIM_INNER="$PWD/$build/plugins/libnccl-net-socket.so"
                     NCCL_NET_GDR_LEVEL=SYS CHOIR_NET_GDR=1 CHOIR_GDRSHIM_REPORT=1 NCCL_DEBUG=INFO
                     NCCL_DEBUG_SUBSYS=INIT,NET) ;;
          plugin-* | xhost-*)
            # Choir's net plugin NAME (libnccl-net-NAME.so from NETPLUGIN_DIR, default the
            # build's plugins/: a machine without the plugin's headers runs carried builds),
            # every rank pair through it; xhost- also poses every process as its own host.
            pname=${tr#*-}
            envs=("${net_env[@]}" NCCL_NET_PLUGIN="${NETPLUGIN_DIR:-$PWD/$build/plugins}/libnccl-net-$pname.so"
                  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
            plugin_env "$pname"
            envs+=(${penv[@]+"${penv[@]}"})
            [ "${tr%%-*}" = xhost ] && envs+=(CHOIR_TEST_HOSTS="$n") ;;
          tree | tree[1-9]*)
            # AllReduce on the tree (NCCL_ALGO=allreduce:tree); treeH: procs posing as H hosts
            # (CHOIR_TEST_HOSTS, the chain inside a host, the network between).
            envs=(NCCL_ALGO=allreduce:tree NCCL_SOCKET_IFNAME="${NET_IFNAME:-lo}" NCCL_DEBUG=INFO
                  NCCL_DEBUG_SUBSYS=INIT)
            [ "$tr" != tree ] && envs+=(CHOIR_TEST_HOSTS="${tr#tree}")
            extra=(--ops=allreduce) ;;
          graph) extra=(--graph 3) ;;
          semantics) extra=(--case all) ;;
        esac
        # shellcheck disable=SC2206 # ARGS is a list of options
        if [ "$tr" = semantics ]; then runargs=("${extra[@]}"); else runargs=($args ${extra[@]+"${extra[@]}"}); fi
        log="$out/check-${LIB:-choir}-$n-$mode-$tr${rpgf:+-$rpgf}.log"
        t0=$(date +%s)
        [ -n "${CHECK_STACKS_AT:-}" ] && envs+=(CHOIR_TEST_STACKS=1)
        # A launch stalled on the network logs its proxy's connection counters at WARN after
        # 60 s (core/proxy): WARN stays on unless the caller or the layout chose a level.
        case " ${envs[*]-} " in
          *" NCCL_DEBUG="*) ;;
          *) envs=(NCCL_DEBUG="${NCCL_DEBUG:-WARN}" ${envs[@]+"${envs[@]}"}) ;;
        esac
        env ${envs[@]+"${envs[@]}"} LD_LIBRARY_PATH="$libdir${NETLIB_DIR:+:$NETLIB_DIR}" CHOIR_TEST_NDEV="$n" \
          CHOIR_TEST_RPG="$rpg" \
          timeout "${CHECK_TIMEOUT:-900}" "$exe" --mode "$mode" "${runargs[@]}" >"$log" 2>&1 &
        run_pid=$!
        # CHECK_STACKS_AT=S: a run still going after S seconds gets its threads' stacks written
        # to $log.stacks, then runs on to its timeout.
        [ -n "${CHECK_STACKS_AT:-}" ] &&
          { sleep "$CHECK_STACKS_AT"; stack_dump "$log" $(pgrep -f "^$exe --mode $mode"); } &
        stacks_pid=$!
        wait "$run_pid"
        rc=$?
        if [ -n "${CHECK_STACKS_AT:-}" ]; then
          kill "$stacks_pid" 2>/dev/null
          wait "$stacks_pid" 2>/dev/null
          stack_resolve "$log" >>"$log.stacks"
        fi
        # A run that failed or was cut: the proxies' stall reports, if any, into the summary.
        if [ "$rc" != 0 ] && grep -q "proxy: rank .*no network progress" "$log"; then
          note "      proxy stall reports ($(grep -c "no network progress" "$log")), the first:"
          grep -m1 -A8 "proxy: rank .*no network progress" "$log" | cut -c1-200 | sed 's/^/        /' |
            tee -a "$summary"
        fi
        # What the configuration must show in its log besides a clean run.
        case "$tr" in
          net1) # every network peer with 1 send/recv channel, none with more
            if ! grep -q " 1 send/recv channels with rank" "$log" ||
              grep -qE " ([2-9]|[1-9][0-9]+) send/recv channels with rank .* via (NET|net)" "$log"; then
              note "  net1: NCCL_NCHANNELS_PER_NET_PEER=1 did not give 1 channel per network peer"
              rc=1
            fi ;;
          plugin-* | xhost-*) # which plugin and network the library says it used
            note "      $tr: $(grep -m1 -oE "(NET/Plugin: )?[Ll]oaded (net plugin|ncclNetPlugin_v[0-9]+)[^(]*" "$log" | head -1); $(grep -m1 -oE "net-(ib|ofi|ucx|socket): [^;]*" "$log" | head -1 | cut -c1-100); $(grep -m1 -oE "Using network [A-Za-z]+" "$log")" ;;
          tree | tree[1-9]*) # every communicator made tree channels; hosts: the network between
            if ! grep -qE ", [1-9][0-9]* tree channels" "$log"; then
              note "  $tr: no communicator reported tree channels (INFO line '... N tree channels')"
              rc=1
            fi
            if [ "$tr" != tree ] && ! grep -q "via NET" "$log"; then
              note "  $tr: no connection went through the network between the hosts"
              rc=1
            fi ;;
          hosts) # p2p inside a "host", the network between, rings from the per-host searches
            if ! grep -q "via NET" "$log" || ! grep -q "via P2P" "$log"; then
              note "  hosts: the connections were not both P2P (within a host) and NET (between hosts)"
              rc=1
            fi
            # Ranks sharing a GPU search no topology (rings in rank order, an INFO line says so).
            if [ "$rpg" -gt 1 ]; then
              if ! grep -q "ranks share GPUs: no topology search, rings in rank order" "$log"; then
                note "  hosts: ranks share GPUs, but no rank said its rings are in rank order"
                rc=1
              fi
            elif ! grep -q "rings from the searches of 2 hosts" "$log" ||
              grep -q "rings in rank order" "$log"; then
              note "  hosts: the rings did not come from the searches of the 2 hosts"
              rc=1
            fi
            # What each communicator held (INFO INIT), the largest seen on any rank.
            mem=$(grep -oE "memory after [a-z/ ]+: [0-9.]+ MiB of GPU memory, [0-9.]+ MiB" "$log" |
              sort -t: -k2 -g | tail -1)
            if [ -z "$mem" ]; then
              note "  hosts: no communicator reported its memory (INFO line 'memory after ...')"
              rc=1
            else
              note "      hosts: largest $mem"
            fi ;;
          gdr) # every rank on GPUDirect; the shim saw GPU memory registered, sent, received, flushed
            ng=$(grep -c "GPU Direct RDMA with network device .*: receives and sends" "$log")
            shim=$(grep "^gdrshim: " "$log" | tail -1)
            if [ "$ng" -lt "$n" ] || ! echo "$shim" | grep -qE "\(device [1-9][0-9]*\), device sends [1-9]" ||
              ! echo "$shim" | grep -qE "device recvs [1-9][0-9]* .*flushes [1-9]"; then
              note "  gdr: $ng of $n ranks on GPUDirect; shim: ${shim:-no report}"
              rc=1
            fi ;;
        esac
        res=$(grep -E '^coll-check: [0-9]+ cases' "$log" | tail -1)
        c=$(echo "$res" | awk '{print $2}') f=$(echo "$res" | awk '{print $4}')
        row "$n" "$need" "$mode" "$tr" "$rc" "${c:--}" "${f:--}" $(( $(date +%s) - t0 ))
        if [ "$rc" != 0 ]; then
          grep -m3 -E 'FAIL|skipped' "$log" | cut -c1-200 | sed 's/^/      /' | tee -a "$summary"
        fi
      done
      mps_stop >/dev/null
      ;;
    sanitize-check)
      exe="$build/test/multigpu/coll_check"
      case "${LIB:-choir}" in nvidia) libdir="$ref_lib" ;; *) libdir="$PWD/$build" ;; esac
      # SANITIZE_ARGS replaces the case subset, SANITIZE_TOOLS the tools, SANITIZE_TIMEOUT each
      # tool's limit (racecheck of the default subset takes minutes with 2 ranks sharing a GPU).
      read -r -a sargs <<<"${SANITIZE_ARGS:---sizes 1,1023,65539 --types float,int8,bfloat16 --redops sum,premul-dev}"
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        # One GPU: its 2 ranks share it (threads: no MPS needed).
        LD_LIBRARY_PATH="$libdir" CHOIR_TEST_NDEV=2 CHOIR_TEST_RPG=$(( ngpus < 2 ? 2 : 1 )) \
          timeout "${SANITIZE_TIMEOUT:-580}" compute-sanitizer --tool "$tool" \
          --error-exitcode 9 --target-processes all "$exe" --mode threads "${sargs[@]}" \
          >"$out/sanitize-check-$tool.log" 2>&1
        note "compute-sanitizer $tool on coll_check (${LIB:-choir}): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-check-$tool.log" | tail -1) $(grep -E '^coll-check: [0-9]+ cases' "$out/sanitize-check-$tool.log" | tail -1)"
      done
      ;;
    perf-shared | perf-shared:*)
      r=4
      [ "$step" != perf-shared ] && r=${step#perf-shared:}
      pargs=${PERF_SHARED_ARGS:--b 8 -e 64M -f 2 -c 1 -n 5}
      ops="all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall gather scatter"
      declare -A cell=()
      # One process (no MPS), then processes (MPS), so that the daemon starts once.
      for mode in threads procs; do
        if [ "$mode" = procs ] && ! need_mps; then
          for op in $ops; do cell[$op-$mode]="skipped: no MPS"; done
          note "perf-shared: processes skipped: no MPS ($mps_why)"
          continue
        fi
        [ "$mode" = threads ] && mps_stop >/dev/null
        for op in $ops; do
          log="$out/perf-shared-$op-$mode.log"
          lay=(-g "$r")
          [ "$mode" = procs ] && lay=(-p "$r")
          # shellcheck disable=SC2086 # pargs is a list of options
          LD_LIBRARY_PATH="$PWD/$build" timeout "${OP_TIMEOUT:-300}" "$build/test/perf/${op}_perf" \
            "${lay[@]}" --ranks-per-gpu "$r" $pargs -T 120 >"$log" 2>&1
          rc=$?
          cell[$op-$mode]="rc=$rc $(perf_wrong "$log")"
        done
      done
      mps_stop >/dev/null
      note "perf-shared ($r ranks on GPU 0, $pargs):"
      note "$(printf '  %-15s %-34s %-34s' binary "one thread (-g $r)" "processes (-p $r, MPS)")"
      for op in $ops; do
        note "$(printf '  %-15s %-34s %-34s' "$op" "${cell[$op-threads]}" "${cell[$op-procs]}")"
      done
      ;;
    proto-sweep | proto-sweep:*)
      rs="2 4"
      [ "$step" != proto-sweep ] && rs=${step#proto-sweep:}
      psizes=${PROTO_SWEEP_SIZES:--b 8 -e 1G -f 4}
      d="$out/proto-sweep"
      mkdir -p "$d"
      mps_stop >/dev/null
      reps=${PROTO_SWEEP_REPEAT:-3}
      for rep in $(seq 1 "$reps"); do
      for r in $rs; do
        for g in ${PROTO_SWEEP_MODES:-0 20}; do
          for proto in LL LL128 Simple default; do
            log="$d/r$r-g$g-$proto-$rep.log"
            gopt=()
            [ "$g" != 0 ] && gopt=(-G "$g")
            # shellcheck disable=SC2086 # psizes is a list of options
            if [ "$proto" = default ]; then
              env -u NCCL_PROTO LD_LIBRARY_PATH="$PWD/$build" timeout "${OP_TIMEOUT:-300}" \
                "$build/test/perf/all_reduce_perf" -g "$r" --ranks-per-gpu "$r" $psizes -c 1 \
                -n 20 -w 5 "${gopt[@]}" -J "$d/r$r-g$g-$proto-$rep.json" >"$log" 2>&1
            else
              NCCL_PROTO=$proto LD_LIBRARY_PATH="$PWD/$build" timeout "${OP_TIMEOUT:-300}" \
                "$build/test/perf/all_reduce_perf" -g "$r" --ranks-per-gpu "$r" $psizes -c 1 \
                -n 20 -w 5 "${gopt[@]}" -J "$d/r$r-g$g-$proto-$rep.json" >"$log" 2>&1
            fi
            note "proto-sweep r=$r G=$g $proto (run $rep): rc=$? $(perf_wrong "$log")"
          done
        done
      done
      done
      python3 - "$d" "$rs" <<'PY' | tee -a "$summary"
import glob, json, os, statistics, sys
d, rs = sys.argv[1], sys.argv[2].split()
protos = ["LL", "LL128", "Simple", "default"]
for r in rs:
    for g in ("0", "20"):
        paths = sorted(glob.glob(os.path.join(d, "r%s-g%s-*.json" % (r, g))))
        if not paths:
            continue
        runs = {}
        for path in paths:
            p = os.path.basename(path).split("-")[2]
            try:
                doc = json.load(open(path))
            except (OSError, ValueError):
                continue
            for row in doc.get("results", []):
                runs.setdefault(row["size"], {}).setdefault(p, []).append(
                    row["out_of_place"]["time"])
        # Each cell: the median of the runs (the runs alternate the protocols).
        t = {s: {p: statistics.median(v) for p, v in c.items()} for s, c in runs.items()}
        nrun = max((len(v) for c in runs.values() for v in c.values()), default=0)
        if not t:
            print("proto-sweep r=%s G=%s: no results" % (r, g))
            continue
        print("proto-sweep: all_reduce, %s ranks sharing GPU 0, %s (out of place, us; median"
              " of %d alternating runs)" % (
            r, "CUDA graph -G 20" if g != "0" else "normal launches", nrun))
        print("  %12s %9s %9s %9s %9s %8s %8s" % ("size", "LL", "LL128", "Simple", "default",
                                                 "S/LL", "def/best"))
        ll_slow, ll_weak, def_bad = [], [], []
        for s in sorted(t):
            row = t[s]
            forced = [row[p] for p in ("LL", "LL128", "Simple") if p in row and row[p] > 0]
            best = min(forced) if forced else float("nan")
            sl = row["Simple"] / row["LL"] if row.get("LL") and row.get("Simple") else float("nan")
            dr = row["default"] / best if row.get("default") and forced else float("nan")
            if s <= 65536 and not sl > 1.0:
                ll_slow.append(s)
            if g != "0" and s <= 4096 and not sl >= 1.5:
                ll_weak.append(s)
            if not dr <= 1.10:
                def_bad.append(s)
            print("  %12d %9s %9s %9s %9s %8.2f %8.2f" % (
                s, *["%.2f" % row[p] if p in row else "-" for p in protos], sl, dr))
        print("  bar r=%s G=%s: LL faster than Simple at 8 B..64 KB: %s; default within 10%% of "
              "the best forced: %s%s" % (
                  r, g, "yes" if not ll_slow else "NOT at %s" % ll_slow,
                  "yes" if not def_bad else "NOT at %s" % def_bad,
                  ("; LL >= 1.5x Simple at 8 B..4 KB: " + ("yes" if not ll_weak else
                                                           "NOT at %s" % ll_weak))
                  if g != "0" else ""))
PY
      ;;
    algo-sweep | algo-sweep:*)
      # Issue 27's one-GPU speed bars: all_reduce with R ranks sharing GPU 0 (one process),
      # OneShot forced, the ring with LL forced, and the plan's own choice, normal launches and
      # CUDA graphs; ALGO_SWEEP_REPEAT alternating runs (default 3), medians; then a group of
      # AGG (default 64) small all-reduces against one (-m AGG against -m 1, per-call time
      # times AGG over one call's: the bar is at most 3).
      # ALGO_SWEEP_OPS (default all_reduce): also all_gather and reduce_scatter, OneShot
      # against the ring with LL and the plan's choice (no TwoShot, no group).
      rs="2 4"
      [ "$step" != algo-sweep ] && rs=${step#algo-sweep:}
      asizes=${ALGO_SWEEP_SIZES:--b 8 -e 1M -f 4}
      aops=${ALGO_SWEEP_OPS:-all_reduce}
      agg=${AGG:-64}
      d="$out/algo-sweep"
      mkdir -p "$d"
      mps_stop >/dev/null
      reps=${ALGO_SWEEP_REPEAT:-3}
      for rep in $(seq 1 "$reps"); do
        for op in $aops; do
          knob=${op//_/}
          vs="oneshot ringLL default"
          [ "$op" = all_reduce ] && vs="oneshot twoshot ringLL default agg1 agg"
          for r in $rs; do
            for g in 0 20; do
              for v in $vs; do
                envs=()
                extra=()
                case $v in
                  oneshot) envs=(NCCL_ALGO="$knob:oneshot") ;;
                  twoshot) envs=(NCCL_ALGO="$knob:twoshot") ;;
                  ringLL) envs=(NCCL_ALGO="$knob:ring" NCCL_PROTO=LL) ;;
                  agg1) extra=(-m 1) ;;
                  agg) extra=(-m "$agg") ;;
                esac
                sz=$asizes
                [ "$v" = agg1 ] || [ "$v" = agg ] && sz="-b 8 -e 64K -f 8"
                gopt=()
                [ "$g" != 0 ] && gopt=(-G "$g")
                tag="r$r-g$g-$v-$rep"
                [ "$op" = all_reduce ] || tag="$op-$tag"
                log="$d/$tag.log"
                # shellcheck disable=SC2086 # sz is a list of options
                env -u NCCL_ALGO -u NCCL_PROTO ${envs[@]+"${envs[@]}"} LD_LIBRARY_PATH="$PWD/$build" \
                  timeout "${OP_TIMEOUT:-300}" "$build/test/perf/${op}_perf" -g "$r" \
                  --ranks-per-gpu "$r" $sz -c 1 -n 20 -w 5 "${gopt[@]}" ${extra[@]+"${extra[@]}"} \
                  -J "$d/$tag.json" >"$log" 2>&1
                note "algo-sweep $op r=$r G=$g $v (run $rep): rc=$? $(perf_wrong "$log")"
              done
            done
          done
        done
      done
      # The floor under these graphs: empty kernels, and kernels that only meet each other.
      for r in $rs; do
        note "algo-sweep floor, $r ranks: $(timeout 120 "$build/test/perf/graph_floor" "$r" 20 50 2>&1 | tail -1)"
      done
      python3 - "$d" "$rs" "$agg" "$aops" <<'PY' | tee -a "$summary"
import sys
sys.path.insert(0, "test/tools")
from perf_json import medians
d, rs, agg, ops = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()
def load(op, r, g, v):
    pre = "" if op == "all_reduce" else op + "-"
    return medians(d, "%sr%s-g%s-%s-*.json" % (pre, r, g, v))
for op, r, g in ((op, r, g) for op in ops for r in rs for g in ("0", "20")):
        t = {v: load(op, r, g, v)
             for v in ("oneshot", "twoshot", "ringLL", "default", "agg1", "agg")}
        mode = "CUDA graph -G 20" if g != "0" else "normal launches"
        print("algo-sweep: %s, %s ranks sharing GPU 0, %s (out of place, us, medians)"
              % (op, r, mode))
        print("  %10s %9s %9s %9s %9s %10s %8s" % ("size", "OneShot", "TwoShot", "ring LL",
                                                  "default", "LL/direct", "def/best"))
        weak, slower, bad = [], [], []
        for s in sorted(t["oneshot"]):
            o1, o2 = t["oneshot"][s], t["twoshot"].get(s)
            o = min(x for x in (o1, o2) if x)
            l, df = t["ringLL"].get(s), t["default"].get(s)
            sp = l / o if l and o else float("nan")
            best = min(x for x in (o, l) if x)
            dr = df / best if df else float("nan")
            if op == "all_reduce" and s <= 262144 and g != "0" and r == "4" and not sp >= 1.5:
                weak.append(s)
            if op == "all_reduce" and s <= 262144 and g == "0" and not sp >= 1.0:
                slower.append(s)
            if not dr <= 1.10:
                bad.append(s)
            print("  %10d %9.2f %9s %9s %9s %10.2f %8.2f" % (
                s, o1, "%.2f" % o2 if o2 else "-", "%.2f" % l if l else "-",
                "%.2f" % df if df else "-", sp, dr))
        print("  bar r=%s G=%s: default within 10%% of the best forced: %s%s%s" % (
            r, g, "yes" if not bad else "NOT at %s" % bad,
            ("; OneShot or TwoShot >= 1.5x ring LL at 8 B..256 KB: " + ("yes" if not weak else
                                                            "NOT at %s" % weak))
            if g != "0" and r == "4" and op == "all_reduce" else "",
            ("; OneShot or TwoShot never slower than ring LL at 8 B..256 KB: " +
             ("yes" if not slower else "NOT at %s" % slower))
            if g == "0" and op == "all_reduce" else ""))
        rows = []
        for s in sorted(t["agg1"]):
            one, many = t["agg1"][s], t["agg"].get(s)
            if many:
                rows.append((s, one, many * agg, many * agg / one))
        if rows:
            print("  a group of %d all-reduces against one (%s): %s; bar (at most 3x): %s" % (
                agg, mode, ", ".join("%d B %.1f/%.1f us = %.2fx" % x for x in rows),
                "yes" if all(x[3] <= 3.0 for x in rows) else "NO"))
PY
      ;;
    sym-sweep | sym-sweep:*)
      # SymTwoShot (AllReduce on symmetric windows): all_reduce_perf -R 2 (send and receive
      # buffers registered as windows) with R ranks (default 4) sharing GPU 0 in one process,
      # CHOIR_SYM_KERNELS 0 (the plan's usual choice on the same buffers), 2 (SymTwoShot at every
      # size) and 1 (the plan's rule), CUDA graphs (-G 20) and normal launches; SYM_SWEEP_REPEAT
      # alternating runs (default 3), medians; SYM_SWEEP_SIZES (default "-b 8 -e 64M -f 4");
      # every element checked (-c 1).
      rs=4
      [ "$step" != sym-sweep ] && rs=${step#sym-sweep:}
      ssizes=${SYM_SWEEP_SIZES:--b 8 -e 64M -f 4}
      d="$out/sym-sweep"
      mkdir -p "$d"
      mps_stop >/dev/null
      for rep in $(seq 1 "${SYM_SWEEP_REPEAT:-3}"); do
        for r in $rs; do
          for g in 20 0; do
            for v in 0 2 1; do
              gopt=()
              [ "$g" != 0 ] && gopt=(-G "$g")
              tag="r$r-g$g-sym$v-$rep"
              # shellcheck disable=SC2086 # ssizes is a list of options
              env -u NCCL_ALGO -u NCCL_PROTO CHOIR_SYM_KERNELS="$v" LD_LIBRARY_PATH="$PWD/$build" \
                timeout "${OP_TIMEOUT:-300}" "$build/test/perf/all_reduce_perf" -g "$r" \
                --ranks-per-gpu "$r" $ssizes -R 2 -c 1 -n 20 -w 5 "${gopt[@]}" \
                -J "$d/$tag.json" >"$d/$tag.log" 2>&1
              note "sym-sweep r=$r G=$g CHOIR_SYM_KERNELS=$v (run $rep): rc=$? $(perf_wrong "$d/$tag.log")"
            done
          done
        done
      done
      python3 - "$d" "$rs" <<'PY' | tee -a "$summary"
import sys
sys.path.insert(0, "test/tools")
from perf_json import medians
d, rs = sys.argv[1], sys.argv[2].split()
for r in rs:
    for g in ("20", "0"):
        t = {v: medians(d, "r%s-g%s-sym%s-*.json" % (r, g, v)) for v in ("0", "2", "1")}
        print("sym-sweep: all_reduce on windows (-R 2), %s ranks sharing GPU 0, %s (out of place,"
              " us, medians)" % (r, "CUDA graph -G 20" if g != "0" else "normal launches"))
        print("  %10s %10s %10s %10s %9s %9s" % ("size", "usual", "SymTwoShot", "rule",
                                                 "usual/sym", "rule/best"))
        for s in sorted(t["0"]):
            u, y, m = t["0"][s], t["2"].get(s), t["1"].get(s)
            best = min(x for x in (u, y) if x)
            print("  %10d %10.2f %10s %10s %9s %9s" % (
                s, u, "%.2f" % y if y else "-", "%.2f" % m if m else "-",
                "%.2f" % (u / y) if y else "-", "%.2f" % (m / best) if m else "-"))
PY
      ;;
    group-sweep | group-sweep:*)
      # Issue 27's group bar, each way a group can run: R ranks (default "2 4") sharing GPU 0 in
      # one process, all_reduce of one call (-m 1) against groups of AGG (default 64, -m AGG):
      # the plan's own (group), the ring with LL forced (ring: works side by side on channels
      # of their own), the same with CHOIR_RING_SPREAD=0 (ringseq: one after the other), and
      # CHOIR_GROUP_PLAN=0 (alone: each planned by itself). GROUP_SWEEP_MODES (default "20":
      # CUDA graphs; "0 20" adds normal launches), GROUP_SWEEP_REPEAT alternating runs (default
      # 3), medians; the group's time (per-call time x AGG) over one call's: the bar is <= 3.
      rs="2 4"
      [ "$step" != group-sweep ] && rs=${step#group-sweep:}
      agg=${AGG:-64}
      d="$out/group-sweep"
      mkdir -p "$d"
      mps_stop >/dev/null
      for rep in $(seq 1 "${GROUP_SWEEP_REPEAT:-3}"); do
        for r in $rs; do
          for g in ${GROUP_SWEEP_MODES:-20}; do
            for v in one group ring ringseq alone; do
              envs=()
              m=$agg
              case $v in
                one) m=1 ;;
                ring) envs=(NCCL_ALGO=allreduce:ring NCCL_PROTO=LL) ;;
                ringseq) envs=(NCCL_ALGO=allreduce:ring NCCL_PROTO=LL CHOIR_RING_SPREAD=0) ;;
                alone) envs=(CHOIR_GROUP_PLAN=0) ;;
              esac
              gopt=()
              [ "$g" != 0 ] && gopt=(-G "$g")
              tag="r$r-g$g-$v-$rep"
              env -u NCCL_ALGO -u NCCL_PROTO ${envs[@]+"${envs[@]}"} LD_LIBRARY_PATH="$PWD/$build" \
                timeout "${OP_TIMEOUT:-300}" "$build/test/perf/all_reduce_perf" -g "$r" \
                --ranks-per-gpu "$r" -b 8 -e 64K -f 8 -c 1 -n 20 -w 5 -m "$m" "${gopt[@]}" \
                -J "$d/$tag.json" >"$d/$tag.log" 2>&1
              note "group-sweep r=$r G=$g $v (run $rep): rc=$? $(perf_wrong "$d/$tag.log")"
            done
          done
        done
      done
      python3 - "$d" "$rs" "$agg" "${GROUP_SWEEP_MODES:-20}" <<'PY' | tee -a "$summary"
import sys
sys.path.insert(0, "test/tools")
from perf_json import medians
d, rs, agg, modes = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()
def load(r, g, v):
    return medians(d, "r%s-g%s-%s-*.json" % (r, g, v))
vs = ("group", "ring", "ringseq", "alone")
for r in rs:
    for g in modes:
        t = {v: load(r, g, v) for v in ("one",) + vs}
        print("group-sweep: %d all-reduces against one, %s ranks sharing GPU 0, %s (us, medians;"
              " group = per-call time x %d)" % (agg, r, "CUDA graph -G %s" % g if g != "0"
                                                else "normal launches", agg))
        print("  %8s %8s" % ("size", "one") + "".join(" %16s" % v for v in vs))
        bad = []
        for s in sorted(t["one"]):
            one = t["one"][s]
            cells = []
            for v in vs:
                x = t[v].get(s)
                cells.append("%8.1f %6.2fx" % (x * agg, x * agg / one) if x else "%16s" % "-")
            x = t["group"].get(s)
            if not (x and x * agg / one <= 3.0):
                bad.append(s)
            print("  %8d %8.2f" % (s, one) + "".join(" " + c for c in cells))
        print("  bar r=%s G=%s: the plan's group within 3x of one call: %s" % (
            r, g, "yes" if not bad else "NOT at %s" % bad))
PY
      ;;
    prof)
      # Issue 19's GPU bar: Choir's trace plugin under Choir's core, 2 ranks sharing GPU 0 (one
      # thread), all_reduce, alltoall and sendrecv over p2p and over the network (p2p and shm
      # off, net-socket over NET_IFNAME), each trace checked against the Chrome trace rules
      # (test/tools/trace_check.py: what Perfetto and chrome://tracing load); then the cost of
      # a loaded profiler with every event masked off (CHOIR_PROFILER_EVENTS=none) on small
      # all-reduces: PROF_REPEAT (default 7) alternating runs with and without the plugin, the
      # ratio of the medians per size (the bar: within 2%).
      d="$out/prof"
      mkdir -p "$d"
      rm -f "$d"/*.json
      plug="$PWD/$build/plugins/libnccl-profiler-trace.so"
      for tr in p2p net; do
        envs=()
        [ "$tr" = net ] && envs=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME="${NET_IFNAME:-lo}")
        for op in all_reduce alltoall sendrecv; do
          env ${envs[@]+"${envs[@]}"} NCCL_PROFILER_PLUGIN="$plug" CHOIR_PROFILER_EVENTS=all \
            CHOIR_PROFILER_FILE="$d/trace-$tr-$op-%p.json" LD_LIBRARY_PATH="$PWD/$build" \
            timeout 120 "$build/test/perf/${op}_perf" -g 2 --ranks-per-gpu 2 -b 8 -e 1M -f 32 \
            -c 1 -n 3 -w 1 >"$d/$tr-$op.log" 2>&1
          note "prof $tr $op: rc=$? $(perf_wrong "$d/$tr-$op.log"); $(python3 test/tools/trace_check.py "$d"/trace-"$tr"-"$op"-*.json 2>&1 | sed "s|$d/||" | cut -c1-400)"
          # The kernels' own channel timestamps: every KernelCh event with a GPU start and a
          # stop not before it.
          note "  KernelCh $tr $op: $(python3 - "$d"/trace-"$tr"-"$op"-*.json <<'PY'
import json, sys
n = good = 0
for f in sys.argv[1:]:
    for e in json.load(open(f)).get("traceEvents", []):
        if e.get("cat") != "KernelCh" and e.get("name") != "KernelCh":
            continue
        n += 1
        a = e.get("args", {})
        good += a.get("gpuStart", 0) > 0 and a.get("gpuStop", 0) >= a.get("gpuStart", 0)
print("%d events, %d with GPU start <= stop: %s" % (n, good, "OK" if n > 0 and good == n else "NOT"))
PY
)"
        done
      done
      # Pinned to two cores, so that both halves see the same CPU (the per-process spread of
      # host-bound small calls is larger than the bar otherwise).
      reps=${PROF_REPEAT:-7}
      pin=()
      command -v taskset >/dev/null && [ "$(nproc)" -ge 4 ] && pin=(taskset -c 2,3)
      for i in $(seq 1 "$reps"); do
        for mode in off on; do
          pl=()
          [ "$mode" = on ] && pl=(NCCL_PROFILER_PLUGIN="$plug" CHOIR_PROFILER_EVENTS=none)
          env ${pl[@]+"${pl[@]}"} LD_LIBRARY_PATH="$PWD/$build" timeout 120 ${pin[@]+"${pin[@]}"} \
            "$build/test/perf/all_reduce_perf" -g 2 --ranks-per-gpu 2 -b 8 -e 64K -f 8 -c 0 \
            -n 1000 -w 50 -J "$d/overhead-$mode-$i.json" >"$d/overhead-$mode-$i.log" 2>&1
        done
      done
      python3 - "$d" "$reps" <<'PY' | tee -a "$summary"
import json, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
t = {}
for mode in ("off", "on"):
    for i in range(1, reps + 1):
        try:
            doc = json.load(open("%s/overhead-%s-%d.json" % (d, mode, i)))
        except (OSError, ValueError):
            continue
        for row in doc.get("results", []):
            t.setdefault(row["size"], {}).setdefault(mode, []).append(row["out_of_place"]["time"])
print("prof overhead: all_reduce, 2 ranks sharing GPU 0, the trace plugin loaded with every event "
      "masked off against no plugin (us, median of %d alternating runs)" % reps)
worst = 0.0
for s in sorted(t):
    off, on = t[s].get("off"), t[s].get("on")
    if not off or not on:
        continue
    r = statistics.median(on) / statistics.median(off)
    worst = max(worst, r)
    print("  %8d B  no plugin %8.2f (%.2f-%.2f)  plugin, mask 0 %8.2f (%.2f-%.2f)  ratio %.3f" % (
        s, statistics.median(off), min(off), max(off), statistics.median(on), min(on), max(on), r))
print("  bar (within 2%%): %s (worst ratio %.3f)" % ("yes" if 0 < worst <= 1.02 else "NOT", worst))
PY
      # The same inside one process (test/perf/prof_overhead: two communicators, one with the
      # profiler's context and one whose init the mock profiler refused, alternating rounds of
      # PROF_ITERS calls, default 2000; PROF_ROUNDS, default 31): processes differ from each
      # other by more than the 2% the bar asks to resolve.
      LD_LIBRARY_PATH="$PWD/$build" CUDA_DEVICE_MAX_CONNECTIONS=32 \
        NCCL_PROFILER_PLUGIN="$PWD/$build/test/plugin/libnccl-profiler-mock6.so" timeout 300 \
        "$build/test/perf/prof_overhead" -n "${PROF_ITERS:-2000}" -r "${PROF_ROUNDS:-31}" \
        >"$d/overhead.log" 2>&1
      note "prof overhead in one process: rc=$?"
      grep -A7 '^prof_overhead:' "$d/overhead.log" | tee -a "$summary"
      ;;
    one-rank)
      # One rank: out of place is one copy, in place nothing (issue 17). Choir and NVIDIA
      # alternated by compare; both halves read from the JSON of every run.
      d="$out/one-rank"
      # shellcheck disable=SC2086 # ONE_RANK_SIZES is a list of options
      test/perf/compare --lib-a "$PWD/$build" --name-a choir --lib-b "$ref_lib" --name-b nccl \
        --bin-dir "$build/test/perf" --ops all_reduce --ngpus 1 --repeat "${ONE_RANK_REPEAT:-3}" \
        ${ONE_RANK_SIZES:--b 8 -e 1G -f 2} -c 1 --out "$d" >"$out/one-rank.log" 2>&1
      note "one-rank: compare rc=$? (log one-rank.log)"
      python3 - "$d" <<'PY' | tee -a "$summary"
import glob, json, statistics, sys
runs = {"choir": {}, "nccl": {}}
for lib in runs:
    for path in sorted(glob.glob("%s/all_reduce-%s-*.json" % (sys.argv[1], lib))):
        try:
            doc = json.load(open(path))
        except (OSError, ValueError) as e:
            print("  one-rank: %s unreadable (%s)" % (path, e))
            continue
        for r in doc.get("results", []):
            row = runs[lib].setdefault(r["size"], {"oop": [], "bw": [], "ip": [], "wrong": 0})
            row["oop"].append(r["out_of_place"]["time"])
            row["bw"].append(r["out_of_place"]["alg_bw"])  # one rank: busbw is 0
            row["ip"].append(r["in_place"]["time"])
            row["wrong"] += (r["out_of_place"]["nwrong"] or 0) + (r["in_place"]["nwrong"] or 0)
sizes = sorted(set(runs["choir"]) & set(runs["nccl"]))
if not sizes:
    print("  one-rank: no sizes measured by both libraries")
    sys.exit(0)
med = statistics.median
print("  %12s %11s %11s %8s %8s %10s %10s %6s %s" % ("size", "oop us", "nvidia us", "t ratio",
      "algbw r", "ip us", "nvidia ip", "wrong", "bar"))
oop_bad, ip_bad, wrong = [], [], 0
for s in sizes:
    c, n = runs["choir"][s], runs["nccl"][s]
    t = med(c["oop"]) / med(n["oop"]) if med(n["oop"]) > 0 else float("nan")
    bw = med(c["bw"]) / med(n["bw"]) if med(n["bw"]) > 0 else float("nan")
    ok_oop = t <= 1.05
    ok_ip = med(c["ip"]) < 2.0
    wrong += c["wrong"] + n["wrong"]
    if not ok_oop:
        oop_bad.append("%d (%.3f)" % (s, t))
    if not ok_ip:
        ip_bad.append("%d (%.2f us)" % (s, med(c["ip"])))
    print("  %12d %11.2f %11.2f %8.3f %8.3f %10.2f %10.2f %6d %s" % (
        s, med(c["oop"]), med(n["oop"]), t, bw, med(c["ip"]), med(n["ip"]),
        c["wrong"] + n["wrong"], ("ok" if ok_oop and ok_ip else
                                  ("oop" if not ok_oop else "") + (" ip" if not ok_ip else ""))))
print("one-rank bar (%d sizes, median of %d runs each): out of place at most 5%% slower than "
      "NVIDIA: %s; in place under 2 us: %s; wrong elements: %d" % (
          len(sizes), min(len(runs["choir"][sizes[0]]["oop"]), len(runs["nccl"][sizes[0]]["oop"])),
          "all sizes" if not oop_bad else "NOT at " + ", ".join(oop_bad),
          "all sizes" if not ip_bad else "NOT at " + ", ".join(ip_bad), wrong))
PY
      ;;
    torch)
      if [ ! -f test/torch/run.sh ]; then
        note "torch: test/torch/run.sh not found: skipped"
        continue
      fi
      tsizes=${TORCH_SIZES:-1 2 4}
      # World sizes above the GPU count put processes on one GPU: our MPS daemon, exported.
      for n in $tsizes; do
        if [ "$n" -gt "$ngpus" ]; then
          need_mps || note "torch: no MPS ($mps_why); run.sh will say what it does without"
          break
        fi
      done
      # shellcheck disable=SC2086 # the world sizes
      BUILD="$build" OUT="$out" bash test/torch/run.sh $tsizes >"$out/torch.log" 2>&1
      rc=$?
      grep -E '^torch' "$out/torch.log" | cut -c1-220 | sed 's/^/  /' | tee -a "$summary"
      note "torch ($tsizes): rc=$rc$([ "$rc" = 77 ] && echo ' (skipped)')"
      mps_stop >/dev/null
      ;;
    *)
      note "unknown step '$step'"
      ;;
  esac
done
tar -C "$out" -czf "$out/logs.tgz" --exclude logs.tgz . 2>/dev/null
# The device tool brings back only a few files: leave the archive and the summary (LOGS=keep
# leaves every log as well).
if [ "${LOGS:-}" != keep ] && [ -s "$out/logs.tgz" ]; then
  find "$out" -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
fi
echo
echo "==== summary ===="
cat "$summary"
