#!/usr/bin/env bash
# Fuzzes one libFuzzer engine for FUZZ_SECONDS (default 60), starting from copies of its corpus
# folders (the checked-in corpus is never written), with ASan/UBSan as the engine was built.
#   run_fuzzer.sh ENGINE ARTIFACT_DIR CORPUS_DIR...
# Exit 0: nothing found. Otherwise 1 (never libFuzzer's default 77, which meson reads as a skip),
# with the crashing input kept in ARTIFACT_DIR and shown as hex (add it to
# test/fuzz/corpus/NAME/ with the fix).
set -euo pipefail
engine=$1
artifacts=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
for d in "$@"; do
  [ -d "$d" ] && find "$d" -maxdepth 1 -type f -exec cp {} "$work/corpus/" \;
done
secs=${FUZZ_SECONDS:-60}
echo "fuzzing $(basename "$engine") for $secs s from $(ls "$work/corpus" | wc -l) input(s)"
export NCCL_DEBUG=${NCCL_DEBUG:-NONE}
rc=0
"$engine" -max_total_time="$secs" -timeout=10 -error_exitcode=1 -timeout_exitcode=1 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
grep -E "^stat::|Done [0-9]+ runs|ERROR|SUMMARY" "$work/log" | head -20 || true
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$work/log"
  for f in "$artifacts"/*; do
    [ -f "$f" ] || continue
    echo "input kept: $f"
    od -A d -c "$f" | head -20
  done
  echo "fuzz: $(basename "$engine") FOUND A PROBLEM (status $rc)"
  exit "$rc"
fi
echo "fuzz: $(basename "$engine"): nothing found in $secs s"
