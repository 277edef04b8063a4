#!/usr/bin/env bash
# Installs clang with its libFuzzer runtime where missing (Debian/Ubuntu: clang and
# libclang-rt-N-dev), then checks that clang links a libFuzzer program. Quiet when all is there.
set -euo pipefail
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
probe() {
  local d
  d=$(mktemp -d)
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) { (void)d; (void)n; return 0; }\n' >"$d/p.c"
  clang -fsanitize=fuzzer,address "$d/p.c" -o "$d/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}
command -v clang >/dev/null 2>&1 && probe && exit 0
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz-deps: installing clang"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang >/dev/null
fi
major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
if ! probe; then
  echo "fuzz-deps: installing libclang-rt-$major-dev (libFuzzer)"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "libclang-rt-$major-dev" >/dev/null ||
    true
fi
if ! probe; then
  echo "fuzz-deps: clang $major cannot link a libFuzzer program (-fsanitize=fuzzer)" >&2
  exit 1
fi
