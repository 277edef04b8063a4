#!/usr/bin/env bash
# PyTorch on Choir, as a user runs it: for each world size N, torchrun starts N ranks of
# test/torch/torch_check.py under build/choir-run (Choir's libnccl.so.2 preloaded), and the run
# passes only if every rank passed every check, every rank's version banner (NCCL_DEBUG=VERSION)
# names Choir, and no other NCCL printed one. Ranks beyond the GPU count share GPUs: then
# CHOIR_RANKS_SHARE_GPU=1 and MPS (processes sharing a GPU need it to run at the same time): the
# caller's when CUDA_MPS_PIPE_DIRECTORY is set, else a private daemon from test/gpu-mps.sh.
#
# usage: test/torch/run.sh N... [nvidia:N]
#   N         world size (1, 2, 4, ...)
#   nvidia:N  the control: N ranks WITHOUT choir-run (PyTorch's own NVIDIA NCCL, N <= GPUs); it
#             passes when torch_check fails exactly its library checks and passes all others,
#             which shows the guard catches another library and that the checks hold on NVIDIA's
# Environment: TORCH_CHECK (the program each rank runs: torch_check (default), symmem_check
# (symmetric memory on NCCL windows) or reghook_check (the allocator hook, a DDP step); the
# control is torch_check's only), BUILD (build directory, default build-dev), PYTHON (default
# python3),
# TORCH_RUN_TIMEOUT (seconds per world size, default 180), TORCH_LOG_DIR (default $OUT/torch-logs
# when OUT is set, else $BUILD/torch-logs).
# Prints one line per world size; exits 0 when all passed, 1 when one failed, 77 (skipped, one
# line) without torch, a GPU, or the build.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${BUILD:-build-dev}
python=${PYTHON:-python3}
limit=${TORCH_RUN_TIMEOUT:-180}

check=${TORCH_CHECK:-torch_check}
case $check in
  torch_check | symmem_check | reghook_check) ;;
  *)
    echo "$0: TORCH_CHECK=$check: not one of torch_check, symmem_check, reghook_check" >&2
    exit 2
    ;;
esac
tag=${check//_/-}
if [ $# -eq 0 ]; then
  echo "usage: $0 WORLD_SIZE... [nvidia:N]   (e.g. $0 1 2 4)" >&2
  exit 2
fi
for arg in "$@"; do
  case ${arg#nvidia:} in
    "" | *[!0-9]* | 0*)
      echo "$0: '$arg' is not a world size (a positive integer, or nvidia:N)" >&2
      exit 2
      ;;
  esac
  if [ "$arg" != "${arg#nvidia:}" ] && [ "$check" != torch_check ]; then
    echo "$0: the control ($arg) runs torch_check only (its library guard), not $check" >&2
    exit 2
  fi
done

skip() {
  echo "torch: skipped: $*"
  exit 77
}
run=$build/choir-run
[ -x "$run" ] || skip "no Choir build at $build ($run missing; meson setup $build && ninja -C $build, or set BUILD)"
lib=$("$run" --print)
[ -f "$lib" ] || skip "$lib is not built (ninja -C $build)"
real_lib=$(readlink -f "$lib")
# torch_check uses every type and op: a build with a subset of the kernels cannot pass it.
subset=$("$python" -c 'import json, sys
opts = json.load(open(sys.argv[1]))
print(next((o["value"] for o in opts if o["name"] == "kernel_subset"), "all"))' \
  "$build/meson-info/intro-buildoptions.json" 2>/dev/null) || subset=all
[ "$subset" = all ] ||
  skip "$build has a subset of the kernels (kernel_subset=$subset); torch_check needs them all (meson configure $build -Dkernel_subset=all)"

# Probe without Choir: can this Python run torch.distributed on NCCL over a GPU?
probe=$("$python" - 2>&1 <<'EOF'
import sys
try:
    import torch
    import torch.distributed as dist
except Exception as e:
    print("python cannot import torch (%s)" % str(e).splitlines()[0])
    sys.exit(1)
if not dist.is_available() or not dist.is_nccl_available():
    print("torch %s has no NCCL backend for torch.distributed" % torch.__version__)
    sys.exit(1)
if not torch.cuda.is_available():
    print("torch %s sees no GPU (torch.cuda.is_available() is False)" % torch.__version__)
    sys.exit(1)
print("ready %s %d" % (torch.__version__, torch.cuda.device_count()))
EOF
)
case $probe in
  ready\ *) ;;
  *) skip "$(printf '%s\n' "$probe" | tail -n 1) [$python]" ;;
esac
read -r _ torch_version ngpus <<<"$(printf '%s\n' "$probe" | grep '^ready ' | tail -n 1)"
if [ "$check" != torch_check ]; then
  # What this program needs of torch beyond the above (symmem_check: the NCCL backend of
  # symmetric memory), asked without Choir.
  why=$("$python" "test/torch/$check.py" --probe 2>&1)
  [ $? = 77 ] && skip "$(printf '%s\n' "$why" | tail -n 1) [$python]"
fi

logdir=${TORCH_LOG_DIR:-${OUT:+$OUT/torch-logs}}
logdir=${logdir:-$build/torch-logs}
mkdir -p "$logdir" || exit 1
echo "torch: torch $torch_version, $ngpus GPU(s), Choir lib $real_lib, logs in $logdir"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export CHOIR_EXPECT_LIB=$lib
# The banner is printed at VERSION level and above, to stdout unless NCCL_DEBUG_FILE says else.
case ${NCCL_DEBUG:-} in
  [Ii][Nn][Ff][Oo] | [Tt][Rr][Aa][Cc][Ee]) ;;
  *) export NCCL_DEBUG=VERSION ;;
esac
unset NCCL_DEBUG_FILE

mps_ready=0 mps_ours=0
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  if [ "$mps_ours" = 1 ]; then mps_stop; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# ensure_mps: MPS for ranks that share a GPU; 1 with the reason in mps_why when there is none.
ensure_mps() {
  [ "$mps_ready" = 1 ] && return 0
  if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    echo "torch: MPS of the caller ($CUDA_MPS_PIPE_DIRECTORY)"
    mps_ready=1
    return 0
  fi
  if [ ! -f test/gpu-mps.sh ]; then
    mps_why="test/gpu-mps.sh not found (it starts the MPS daemon)"
    return 1
  fi
  # shellcheck source=/dev/null
  . test/gpu-mps.sh
  if ! mps_start; then
    mps_why="mps_start failed (its reason is printed above)"
    return 1
  fi
  mps_ours=1 mps_ready=1
  echo "torch: started MPS ($CUDA_MPS_PIPE_DIRECTORY)"
}

failed=0
for arg in "$@"; do
  n=${arg#nvidia:}
  control=0
  [ "$arg" != "$n" ] && control=1
  label="torch world $n"
  [ "$check" != torch_check ] && label="torch $check world $n"
  log=$logdir/torch-world-$n.log
  [ "$check" != torch_check ] && log=$logdir/$tag-world-$n.log
  launcher=("$run")
  share=()
  if [ "$control" = 1 ]; then
    label="torch control (NVIDIA's NCCL) world $n"
    log=$logdir/torch-nvidia-world-$n.log
    launcher=()
    if [ "$n" -gt "$ngpus" ]; then
      echo "$label: FAILED (the control needs a GPU per rank: $n ranks, $ngpus GPU(s))"
      failed=1
      continue
    fi
  elif [ "$n" -gt "$ngpus" ]; then
    share=(env CHOIR_RANKS_SHARE_GPU=1)
    if ! ensure_mps; then
      echo "$label: FAILED ($n ranks on $ngpus GPU(s) need MPS: $mps_why)"
      failed=1
      continue
    fi
  fi
  start=$SECONDS
  timeout -k 15 "$limit" "${share[@]}" "${launcher[@]}" "$python" -m torch.distributed.run --standalone \
    --nproc-per-node "$n" "test/torch/$check.py" >"$log" 2>&1
  rc=$?
  took=$((SECONDS - start))

  # What the ranks said.
  summary_re="^$tag: rank [0-9]+: [0-9]+ checks passed, [0-9]+ failed\$"
  nsum=$(grep -cE "$summary_re" "$log")
  counts=$(grep -E "$summary_re" "$log" | sed -E 's/.*: ([0-9]+) checks passed, ([0-9]+) failed$/\1 \2/')
  nfail_ranks=$(printf '%s\n' "$counts" | awk 'NF && $2 != 0' | wc -l)
  min=$(printf '%s\n' "$counts" | awk 'NF {print $1}' | sort -n | head -n 1)
  max=$(printf '%s\n' "$counts" | awk 'NF {print $1}' | sort -n | tail -n 1)
  # Banners only: a line that starts with it, or NCCL's log prefix before it (not an error
  # message that quotes the version).
  banner_re='(^|NCCL (INFO|VERSION) )NCCL version [0-9]'
  choir_banners=$(grep -E "$banner_re" "$log" | grep -c '(Choir ')
  other_banners=$(grep -E "$banner_re" "$log" | grep -vc '(Choir ')
  fail_lines=$(grep -E "^$tag: rank [0-9]+: FAIL " "$log")
  nonlib_fails=$(printf '%s\n' "$fail_lines" | grep -v ': FAIL nccl library ' | grep -c 'FAIL')
  lib_fails=$(printf '%s\n' "$fail_lines" | grep -c ': FAIL nccl library ')

  why=""
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    why="timed out after ${limit}s"
  elif [ "$control" = 0 ]; then
    if [ "$rc" != 0 ]; then why="exit status $rc"; fi
    if [ "$nsum" != "$n" ]; then why="${why:+$why; }$nsum of $n ranks finished"; fi
    if [ "$nfail_ranks" != 0 ]; then why="${why:+$why; }$nfail_ranks rank(s) failed checks"; fi
    if [ "$choir_banners" != "$n" ]; then
      why="${why:+$why; }$choir_banners Choir version banner(s) for $n ranks"
    fi
    if [ "$other_banners" != 0 ]; then
      why="${why:+$why; }$other_banners banner(s) of another NCCL"
    fi
  else
    # The control must fail, on the library checks only, on every rank.
    if [ "$rc" = 0 ]; then why="torch_check passed on NVIDIA's NCCL: the library guard missed it"; fi
    if [ "$nsum" != "$n" ]; then why="${why:+$why; }$nsum of $n ranks finished"; fi
    if [ "$lib_fails" -lt "$n" ]; then
      why="${why:+$why; }$lib_fails library check failure(s) for $n ranks"
    fi
    if [ "$nonlib_fails" != 0 ]; then
      why="${why:+$why; }$nonlib_fails other check(s) failed on NVIDIA's NCCL"
    fi
    if [ "$choir_banners" != 0 ]; then why="${why:+$why; }Choir printed a banner"; fi
    if [ "$other_banners" = 0 ]; then why="${why:+$why; }no banner of NVIDIA's NCCL"; fi
  fi

  checks="$min checks each"
  [ "$min" != "$max" ] && checks="$min-$max checks each"
  if [ -z "$why" ]; then
    if [ "$control" = 1 ]; then
      echo "$label: ok (every rank failed its library checks and passed the other $checks; ${took}s)"
    else
      echo "$label: ok ($n ranks, $checks, Choir lib $real_lib, ${took}s)"
    fi
  else
    echo "$label: FAILED ($why; log $log)"
    failed=1
    if [ -n "$fail_lines" ]; then printf '%s\n' "$fail_lines" | head -n 20 | sed 's/^/    /'; fi
    echo "    last lines of the log:"
    tail -n 25 "$log" | sed 's/^/    /'
  fi
done
exit "$failed"
