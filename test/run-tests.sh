#!/usr/bin/env bash
# Build Choir and run every test suite; GPU suites skip (exit 77) where there is no GPU. Then the
# CPU suites again under AddressSanitizer and UndefinedBehaviorSanitizer, then every fuzz target
# under libFuzzer for FUZZ_SECONDS each (default 60; clang build in BUILD-fuzz).
#   test/run-tests.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
. test/setup-deps.sh
# net-ib's real-verbs test (test/plugin/net-ib/softroce.sh): QEMU, busybox-static, rdma-core and
# libibverbs-dev (so that net-ib is built), and the package list that names Debian's kernel.
bash test/plugin/net-ib/softroce-deps.sh

[ -f "$build/build.ninja" ] || meson setup "$build" --werror
ninja -C "$build"
meson test -C "$build" --print-errorlogs

san="$build-sanitize"
[ -f "$san/build.ninja" ] || meson setup "$san" -Db_sanitize=address,undefined \
  -Db_lundef=false -Dkernel_subset="ops=sum;types=f32"
ninja -C "$san"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C "$san" --print-errorlogs --suite unit --suite abi --suite plugin

fz="$build-fuzz"
bash test/fuzz/fuzz-deps.sh
[ -f "$fz/build.ninja" ] || CC=clang CXX=clang++ meson setup "$fz" -Dfuzz=true \
  -Db_sanitize=address,undefined -Db_lundef=false -Dkernel_subset="ops=sum;types=f32"
ninja -C "$fz" fuzz-engines
FUZZ_SECONDS=${FUZZ_SECONDS:-60} meson test -C "$fz" --no-rebuild --print-errorlogs --suite fuzz
