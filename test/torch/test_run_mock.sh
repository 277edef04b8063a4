#!/bin/sh
# test/torch/run.sh's verdicts, without a GPU: a stand-in PyTorch (test/torch/mock) whose torchrun
# prints what the ranks would, per scenario, and a stand-in build whose choir-run preloads the C
# library (harmless) instead of Choir. run.sh must skip without torch, a GPU or a build, or with
# a kernel subset; pass only when every rank finished with 0 failed and printed Choir's banner
# and no other NCCL did; fail on a failed check, a missing rank, another NCCL's banner, a nonzero
# exit, a hang; set
# LD_PRELOAD, NCCL_DEBUG=VERSION, NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, and
# CHOIR_RANKS_SHARE_GPU=1 exactly when ranks outnumber GPUs (the stand-in ranks check these); and
# judge the nvidia:N control (the library checks must fail, nothing else).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runsh=$here/run.sh
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

standin=$(sed -n 's|^.* \(/[^ ]*/libc\.so\.6\)$|\1|p' /proc/self/maps | sed -n 1p)
if [ -z "$standin" ]; then
  echo "FAIL: cannot find the C library in /proc/self/maps for the stand-in"
  exit 1
fi
mkdir "$tmp/build"
sed "s|@CHOIR_LIB@|$standin|" "$root/core/info/choir-run.in" >"$tmp/build/choir-run"
chmod +x "$tmp/build/choir-run"

PYTHONPATH=$here/mock${PYTHONPATH:+:$PYTHONPATH}
BUILD=$tmp/build
TORCH_LOG_DIR=$tmp/logs
export PYTHONPATH BUILD TORCH_LOG_DIR
unset OUT CUDA_MPS_PIPE_DIRECTORY CHOIR_RANKS_SHARE_GPU FAKE_TORCH FAKE_TORCH_SCENARIO
export NCCL_DEBUG=WARN  # run.sh must raise it to VERSION (the stand-in ranks check)

# run_case NAME WANT_STATUS WANT_TEXT [VAR=VALUE...] run.sh [ARG...]: run.sh's status and one
# line of its output (fixed string) must be as given.
run_case() {
  name=$1 want_rc=$2 want_text=$3
  shift 3
  out=$(env "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ]; then
    failed=$((failed + 1))
    echo "FAIL: $name: status $rc, want $want_rc; output:"
    printf '%s\n' "$out" | sed 's/^/    /'
  elif ! printf '%s\n' "$out" | grep -qF -- "$want_text"; then
    failed=$((failed + 1))
    echo "FAIL: $name: no line with [$want_text]; output:"
    printf '%s\n' "$out" | sed 's/^/    /'
  else
    passed=$((passed + 1))
    echo "ok: $name"
  fi
}
# also NAME TEXT: another line the last case printed.
also() {
  if printf '%s\n' "$out" | grep -qF -- "$2"; then
    passed=$((passed + 1))
    echo "ok: $1"
  else
    failed=$((failed + 1))
    echo "FAIL: $1: no line with [$2]"
  fi
}

mps=$tmp/mps  # as if the caller ran MPS: run.sh must use it, not start one
run_case "skip without torch" 77 "torch: skipped: python cannot import torch" \
  FAKE_TORCH=noimport "$runsh" 1
run_case "skip without a GPU" 77 "torch: skipped: torch 0.0+fake sees no GPU" \
  FAKE_TORCH=nogpu "$runsh" 1
run_case "skip without the build" 77 "torch: skipped: no Choir build at $tmp/nowhere" \
  BUILD="$tmp/nowhere" "$runsh" 1
run_case "bad world size" 2 "is not a world size" "$runsh" 2x
mkdir -p "$tmp/subset/meson-info"
cp "$tmp/build/choir-run" "$tmp/subset/"
echo '[{"name": "kernel_subset", "value": "ops=sum;types=f32"}]' \
  >"$tmp/subset/meson-info/intro-buildoptions.json"
run_case "skip a kernel subset" 77 "has a subset of the kernels (kernel_subset=ops=sum;types=f32)" \
  BUILD="$tmp/subset" "$runsh" 1

run_case "1 2 4 ranks on 1 GPU pass" 0 "torch world 1: ok (1 ranks, 6 checks each, Choir lib $standin" \
  FAKE_TORCH_GPUS=1 CUDA_MPS_PIPE_DIRECTORY="$mps" "$runsh" 1 2 4
also "world 2 shares the GPU" "torch world 2: ok (2 ranks, 7 checks each"
also "world 4 shares the GPU" "torch world 4: ok (4 ranks, 7 checks each"
also "the caller's MPS is used" "torch: MPS of the caller ($mps)"
run_case "4 ranks on 4 GPUs: no sharing" 0 "torch world 4: ok (4 ranks, 6 checks each" \
  FAKE_TORCH_GPUS=4 "$runsh" 4

run_case "a failed check fails" 1 "torch world 2: FAILED (exit status 1; 1 rank(s) failed checks" \
  FAKE_TORCH_GPUS=2 FAKE_TORCH_SCENARIO=rank-fail "$runsh" 2
also "the failed check is shown" "torch-check: rank 1: FAIL all_reduce sum float32: wrong"
run_case "NVIDIA's banner fails" 1 "0 Choir version banner(s) for 1 ranks; 1 banner(s) of another NCCL" \
  FAKE_TORCH_SCENARIO=nvidia-banner "$runsh" 1
run_case "another banner fails" 1 "torch world 2: FAILED (1 banner(s) of another NCCL" \
  FAKE_TORCH_GPUS=2 FAKE_TORCH_SCENARIO=extra-banner "$runsh" 2
run_case "a missing rank fails" 1 "torch world 2: FAILED (1 of 2 ranks finished" \
  FAKE_TORCH_GPUS=2 FAKE_TORCH_SCENARIO=missing-rank "$runsh" 2
run_case "a nonzero exit fails" 1 "torch world 1: FAILED (exit status 1;" \
  FAKE_TORCH_SCENARIO=exit-status "$runsh" 1
run_case "a hang fails in bounded time" 1 "torch world 1: FAILED (timed out after 2s" \
  FAKE_TORCH_SCENARIO=hang TORCH_RUN_TIMEOUT=2 "$runsh" 1
run_case "one failed size fails the run" 1 "torch world 2: FAILED" \
  FAKE_TORCH_GPUS=2 FAKE_TORCH_SCENARIO=rank-fail "$runsh" 1 2
also "the other size still reports" "torch world 1: ok (1 ranks"

run_case "control: NVIDIA's NCCL caught" 0 "torch control (NVIDIA's NCCL) world 2: ok" \
  FAKE_TORCH_GPUS=2 "$runsh" nvidia:2
run_case "control: another failure is not the guard" 1 "1 other check(s) failed on NVIDIA's NCCL" \
  FAKE_TORCH_GPUS=2 FAKE_TORCH_SCENARIO=rank-fail "$runsh" nvidia:2
run_case "control: needs a GPU per rank" 1 "the control needs a GPU per rank: 2 ranks, 1 GPU(s)" \
  FAKE_TORCH_GPUS=1 "$runsh" nvidia:2

echo "torch run.sh mock: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
