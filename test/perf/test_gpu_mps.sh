#!/usr/bin/env bash
# CPU test of test/gpu-mps.sh against a fake nvidia-cuda-mps-control (written below) that keeps
# the real one's contract: -d forks a daemon that writes nvidia-cuda-mps-control.pid into
# CUDA_MPS_PIPE_DIRECTORY; the client mode reads a command on stdin and fails when no daemon
# answers there; get_server_list prints the server pids; quit stops the servers and the daemon.
#   test_gpu_mps.sh PATH/TO/gpu-mps.sh
set -u
lib=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
# gone PID: no such process, or a zombie (exited; here PID 1 may reap orphans late).
gone() { ! kill -0 "$1" 2>/dev/null || grep -qE '^[0-9]+ \(.*\) Z' "/proc/$1/stat" 2>/dev/null; }
running() { ! gone "$1"; }
check() { # check DESCRIPTION COMMAND...: one line per check
  if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

fake="$work/fake-mps-control"
cat >"$fake" <<'EOF'
#!/usr/bin/env bash
d=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
if [ "${1:-}" = -d ]; then
  [ -n "${FAKE_MPS_FAIL:-}" ] && { echo "An instance of this daemon is already running"; exit 1; }
  [ -n "${FAKE_MPS_MUTE:-}" ] && exit 0 # claims success, never starts
  (
    trap '' HUP
    sleep 1000 & echo $! >"$d/server.pid"          # one "server" the daemon started
    echo $BASHPID >"$d/nvidia-cuda-mps-control.pid"
    while [ ! -e "$d/quit" ]; do sleep 0.05; done
    sleep 0.3                                       # quitting takes a while
    kill "$(cat "$d/server.pid")"
    rm -f "$d/nvidia-cuda-mps-control.pid" "$d/quit"
  ) </dev/null >/dev/null 2>&1 &
  exit 0
fi
p=$(cat "$d/nvidia-cuda-mps-control.pid" 2>/dev/null)
if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then
  echo "Cannot find MPS control daemon process" >&2
  exit 1
fi
read -r cmd
case "$cmd" in
  get_server_list) cat "$d/server.pid" ;;
  quit) touch "$d/quit" ;;
esac
EOF
chmod +x "$fake"
export MPS_CONTROL=$fake
export TMPDIR=$work/tmp # mps_start's mktemp -d goes there: checked empty at the end
mkdir -p "$TMPDIR"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

# shellcheck source=/dev/null
. "$lib"

# 1. Start: a private folder, exported, the daemon answers there.
check "mps_start returns 0" mps_start
pipe=${CUDA_MPS_PIPE_DIRECTORY:-}
check "CUDA_MPS_PIPE_DIRECTORY is a fresh folder" test -d "$pipe"
check "CUDA_MPS_LOG_DIRECTORY is beside it" test -d "${CUDA_MPS_LOG_DIRECTORY:-/nonexistent}"
check "the variables are exported" test -n "$(printenv CUDA_MPS_PIPE_DIRECTORY)"
dpid=$(cat "$pipe/nvidia-cuda-mps-control.pid")
spid=$(cat "$pipe/server.pid")
check "the daemon runs" kill -0 "$dpid"
check "mps_active" mps_active
check "a second mps_start reuses it" mps_start
check "... in the same folder" test "$pipe" = "$CUDA_MPS_PIPE_DIRECTORY"

# 2. Stop: daemon and server gone (waited for), folder removed, variables restored (unset).
check "mps_stop returns 0" mps_stop
check "the daemon is gone when mps_stop returns" gone "$dpid"
check "its server is gone when mps_stop returns" gone "$spid"
check "the folder is removed" test ! -e "$pipe"
check "CUDA_MPS_PIPE_DIRECTORY unset again" test -z "${CUDA_MPS_PIPE_DIRECTORY+x}"
check "CUDA_MPS_LOG_DIRECTORY unset again" test -z "${CUDA_MPS_LOG_DIRECTORY+x}"
check "a second mps_stop does nothing" mps_stop

# 3. A daemon someone else started answers at CUDA_MPS_PIPE_DIRECTORY: used, never stopped.
mkdir -p "$work/theirs"
export CUDA_MPS_PIPE_DIRECTORY=$work/theirs
"$fake" -d
for _ in $(seq 50); do [ -s "$work/theirs/nvidia-cuda-mps-control.pid" ] && break; sleep 0.1; done
theirs=$(cat "$work/theirs/nvidia-cuda-mps-control.pid")
check "mps_start reuses the caller's daemon" mps_start
check "... without changing CUDA_MPS_PIPE_DIRECTORY" test "$CUDA_MPS_PIPE_DIRECTORY" = "$work/theirs"
mps_stop
check "mps_stop leaves the caller's daemon running" running "$theirs"
echo quit | "$fake"
for _ in $(seq 50); do gone "$theirs" && break; sleep 0.1; done

# 4. A CUDA_MPS_PIPE_DIRECTORY where nothing answers: a private daemon, then the value restored.
export CUDA_MPS_PIPE_DIRECTORY=$work/stale
check "mps_start with a stale CUDA_MPS_PIPE_DIRECTORY starts its own" mps_start
check "... elsewhere" test "$CUDA_MPS_PIPE_DIRECTORY" != "$work/stale"
mps_stop
check "mps_stop restores the caller's value" test "$CUDA_MPS_PIPE_DIRECTORY" = "$work/stale"
unset CUDA_MPS_PIPE_DIRECTORY

# 5. Failures: one line starting "mps: ", nonzero, environment untouched, nothing left behind.
fail_case() { # fail_case NAME EXPECTED-TEXT ENV...
  local out rc
  # shellcheck disable=SC2016 # expanded by the inner bash
  out=$(env "${@:3}" bash -c '. "$1"; mps_start; rc=$?; echo "pipe=${CUDA_MPS_PIPE_DIRECTORY-unset}"; exit $rc' _ "$lib")
  rc=$?
  check "$1: nonzero" test "$rc" != 0
  check "$1: one line naming the reason" test "$(echo "$out" | grep -c '^mps: ')" = 1
  check "$1: the reason says '$2'" grep -q "$2" <<<"$out"
  check "$1: environment untouched" grep -q '^pipe=unset$' <<<"$out"
}
fail_case "no control program" "not found" MPS_CONTROL="$work/none"
fail_case "-d fails" "already running" FAKE_MPS_FAIL=1
fail_case "daemon never answers" "did not answer" FAKE_MPS_MUTE=1
check "no private folder left behind" test -z "$(ls -A "$TMPDIR")"

echo "gpu-mps: $fails failed"
[ "$fails" = 0 ]
