#!/usr/bin/env bash
# Gather Choir's network plugins from a build and the shared libraries they need (libfabric,
# UCX and what those load) into one folder, for a GPU machine that lacks those libraries: carry
# the folder there and point test/device-run.sh at it with NETPLUGIN_DIR and NETLIB_DIR.
#   test/tools/carry-netlibs.sh [BUILD [DIR]]     (defaults: build-dev, netlibs)
# The C library and the loader stay behind (the machine has its own). net-ib opens libibverbs
# only at run time; it comes along here as a dependency of libfabric (without an HCA the plugin
# then finds the library and reports no devices).
set -euo pipefail
build=${1:-build-dev}
dir=${2:-netlibs}
mkdir -p "$dir"
for p in socket ofi ucx ib; do
  so="$build/plugins/libnccl-net-$p.so"
  if [ ! -f "$so" ]; then
    echo "carry-netlibs: $so not built (its library's headers missing?); skipped" >&2
    continue
  fi
  cp -L "$so" "$dir/"
  ldd "$so" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
      *) cp -L "$lib" "$dir/" ;;
    esac
  done
done
echo "carry-netlibs: $(find "$dir" -maxdepth 1 -type f | wc -l) files, $(du -sh "$dir" | cut -f1) in $dir"
