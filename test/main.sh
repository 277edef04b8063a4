#!/usr/bin/env bash
# The main job: set up, build, and run the all-reduce benchmark over every local GPU.
#   test/main.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
. test/setup-deps.sh
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build"

export NCCL_NVLS_ENABLE=0
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$ngpus" -eq 0 ]; then
  echo "main: built $build/libnccl.so.2; no NVIDIA GPU here (nvidia-smi lists none), so there is"
  echo "main: no all-reduce benchmark to run. On a GPU machine this runs all_reduce_perf over"
  echo "main: every local GPU."
  exit 0
fi
cmd="LD_LIBRARY_PATH=$build $build/test/perf/all_reduce_perf -b 8 -e 8G -f 2 -g $ngpus -c 1"
echo "main: $ngpus GPU(s) found; running: $cmd"
export NCCL_NVLS_ENABLE=0
eval "$cmd"
