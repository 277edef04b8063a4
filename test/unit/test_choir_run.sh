#!/bin/sh
# choir-run (core/info/choir-run.in), as configured by Meson:
#   - --print names the build's libnccl.so.2; the installed copy names <prefix>/<libdir>'s;
#   - LD_PRELOAD gets the library first, before what was there (unset, empty, several entries);
#   - the command's arguments arrive byte for byte, its exit status comes back;
#   - bad uses fail with a message and run nothing (no command, unknown option, missing library,
#     a library path LD_PRELOAD cannot carry);
#   - the library is really mapped into the command (not in sanitized builds: an ASan-built
#     library cannot be preloaded into an uninstrumented program).
# The LD_PRELOAD and argument cases run a copy of build/choir-run whose library line names the
# C library instead (already in every process: preloading it changes nothing), so that they
# hold in sanitized builds too; the copy differs from the original in that one line only.
# usage: test_choir_run.sh BUILD_CHOIR_RUN BUILD_LIB INSTALLED_CHOIR_RUN INSTALLED_LIB SANITIZED
# The single-quoted $ strings below are meant for the shells choir-run starts.
# shellcheck disable=SC2016
set -u
if [ $# -ne 5 ]; then
  echo "usage: $0 BUILD_CHOIR_RUN BUILD_LIB INSTALLED_CHOIR_RUN INSTALLED_LIB SANITIZED" >&2
  exit 2
fi
run=$1 lib=$2 run_installed=$3 lib_installed=$4 sanitized=$5
passed=0 failed=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

pass() {
  passed=$((passed + 1))
  echo "ok: $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
}
# expect NAME GOT WANT
expect() {
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got [$2], want [$3]"; fi
}
# with_script FILE LIBPATH: a copy of build/choir-run naming LIBPATH on its library line.
with_script() {
  sed "s|^lib='.*'\$|lib='$2'|" "$run" >"$1" && chmod +x "$1"
}

# --- the configured scripts ---
expect "build/choir-run --print" "$("$run" --print)" "$lib"
expect "build/choir-run --print exit status" "$("$run" --print >/dev/null; echo $?)" 0
expect "installed choir-run --print" "$(sh "$run_installed" --print)" "$lib_installed"
case $lib in
  /*) pass "library path is absolute" ;;
  *) fail "library path is not absolute: $lib" ;;
esac
if [ -f "$lib" ]; then pass "library exists"; else fail "library missing: $lib"; fi
expect "--help exit status" "$("$run" --help >/dev/null; echo $?)" 0
expect "--help prints usage" "$("$run" --help | sed -n 1p | cut -c1-16)" "usage: choir-run"

# --- the stand-in copy ---
standin=$(sed -n 's|^.* \(/[^ ]*/libc\.so\.6\)$|\1|p' /proc/self/maps | sed -n 1p)
if [ -z "$standin" ] || [ ! -f "$standin" ]; then
  echo "FAIL: cannot find the C library in /proc/self/maps for the stand-in"
  exit 1
fi
copy=$tmp/choir-run
with_script "$copy" "$standin"
expect "stand-in copy differs in one line" \
  "$(diff "$run" "$copy" | grep -c '^[<>]')" 2
expect "stand-in copy names the stand-in" "$("$copy" --print)" "$standin"

show_preload='printf "%s" "${LD_PRELOAD-<unset>}"'
expect "LD_PRELOAD unset" "$(unset LD_PRELOAD; "$copy" sh -c "$show_preload")" "$standin"
expect "LD_PRELOAD empty" "$(LD_PRELOAD='' "$copy" sh -c "$show_preload")" "$standin"
# Entries already there stay, in order, after the library (links to the C library: harmless).
ln -s "$standin" "$tmp/libfirst.so"
ln -s "$standin" "$tmp/libsecond.so"
existing="$tmp/libfirst.so $tmp/libsecond.so"
expect "LD_PRELOAD kept after the library" \
  "$(LD_PRELOAD=$existing "$copy" sh -c "$show_preload")" "$standin:$existing"
expect "LD_PRELOAD colon list kept" \
  "$(LD_PRELOAD="$tmp/libfirst.so:$tmp/libsecond.so" "$copy" sh -c "$show_preload")" \
  "$standin:$tmp/libfirst.so:$tmp/libsecond.so"
# Children of the command inherit it (what torchrun and mpirun rely on).
expect "grandchild inherits LD_PRELOAD" \
  "$(unset LD_PRELOAD; "$copy" sh -c 'sh -c '"'$show_preload'")" "$standin"
expect "the rest of the environment is kept" \
  "$(CHOIR_RUN_TEST_VAR='a b' "$copy" sh -c 'printf "%s" "$CHOIR_RUN_TEST_VAR"')" "a b"

# Arguments: the same program run directly and through choir-run must print the same bytes.
nl='
'
show_args='printf "%s\n" "$#"; for a do printf "<%s>\n" "$a"; done'
set -- "" "a b" "  lead and trail  " "it's" 'say "hi"' '*' '$HOME' "line1${nl}line2" -x -- \
  'back\slash' '%s%d'
direct=$(sh -c "$show_args" argv0 "$@")
through=$("$copy" sh -c "$show_args" argv0 "$@")
expect "arguments pass through unchanged" "$through" "$direct"
expect "argument count" "$(printf '%s\n' "$through" | sed -n 1p)" 12
expect "-- ends the options" "$("$copy" -- sh -c 'printf "%s" "$1"' argv0 --print)" "--print"
expect "command's exit status" "$("$copy" sh -c 'exit 7'; echo $?)" 7
expect "missing command: status 127" \
  "$("$copy" "$tmp/no-such-command" 2>/dev/null; echo $?)" 127

# --- misuse: a message, a nonzero status, nothing run ---
marker=$tmp/ran
expect "no command: status 2" "$("$copy" 2>/dev/null; echo $?)" 2
expect "no command: usage on stderr" "$("$copy" 2>&1 >/dev/null | sed -n 1p | cut -c1-16)" \
  "usage: choir-run"
expect "unknown option: status 2" \
  "$("$copy" --bogus sh -c ": >'$marker'" 2>/dev/null; echo $?)" 2
missing=$tmp/missing-run
with_script "$missing" "$tmp/nowhere/libnccl.so.2"
expect "missing library: status 1" \
  "$("$missing" sh -c ": >'$marker'" 2>/dev/null; echo $?)" 1
case $("$missing" true 2>&1) in
  *"$tmp/nowhere/libnccl.so.2 does not exist"*) pass "missing library: message names it" ;;
  *) fail "missing library: message does not name $tmp/nowhere/libnccl.so.2" ;;
esac
mkdir "$tmp/with space" "$tmp/with:colon"
ln -s "$standin" "$tmp/with space/libnccl.so.2"
ln -s "$standin" "$tmp/with:colon/libnccl.so.2"
for dir in "with space" "with:colon"; do
  bad=$tmp/bad-run
  with_script "$bad" "$tmp/$dir/libnccl.so.2"
  expect "library path $dir: status 1" "$("$bad" sh -c ": >'$marker'" 2>/dev/null; echo $?)" 1
  case $("$bad" true 2>&1) in
    *"LD_PRELOAD splits paths"*) pass "library path $dir: message says why" ;;
    *) fail "library path $dir: no message about LD_PRELOAD" ;;
  esac
done
if [ -e "$marker" ]; then fail "a misuse ran the command"; else pass "no misuse ran the command"; fi

# --- the real library, really mapped ---
if [ "$sanitized" = true ]; then
  echo "skip: real preload (sanitized build: its library needs the ASan runtime loaded first)"
else
  real=$(readlink -f "$lib")
  expect "real: LD_PRELOAD" "$(unset LD_PRELOAD; "$run" sh -c "$show_preload")" "$lib"
  if "$run" cat /proc/self/maps | grep -qF " $real"; then
    pass "real: $real mapped into the command"
  else
    fail "real: $real not mapped into the command"
  fi
fi

echo "choir-run: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
