#!/usr/bin/env bash
# Install what building and testing Choir needs, where it is missing (Debian/Ubuntu packages).
# The CUDA toolkit (nvcc, CUDA 12 or newer) must already be installed.
set -euo pipefail

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: nvcc not found: install the CUDA toolkit (12.0 or newer) and put nvcc on PATH" >&2
  exit 1
fi

need=()
command -v meson >/dev/null 2>&1 || need+=(meson)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v nm >/dev/null 2>&1 || need+=(binutils)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# The network plugins' libraries (plugins/net-ofi, plugins/net-ucx): built and tested in CI.
# pkg-config may be missing itself on a bare machine: then ask for both.
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libfabric; then
  need+=(libfabric-dev)
fi
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists ucx; then
  need+=(libucx-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
