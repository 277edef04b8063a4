# shellcheck shell=bash
# A private CUDA MPS control daemon for tests whose processes share a GPU: their kernels spin on
# each other, so they must run at the same time, which separate processes on one GPU only do under
# MPS. Source this file, then:
#   mps_start   start a daemon with its pipe and log folders under a fresh `mktemp -d`, exported
#               as CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY for the processes started
#               after it; returns 0 once the daemon runs. If CUDA_MPS_PIPE_DIRECTORY is already
#               set and a daemon answers there, that one is used and nothing else is done.
#               Otherwise prints one line saying why not ("mps: ...") and returns nonzero, with
#               the environment as it was.
#   mps_stop    stops only what mps_start started: `echo quit | nvidia-cuda-mps-control`, waits
#               until the daemon and its servers are gone, removes the folder, restores the two
#               variables. Does nothing (returns 0) when mps_start started nothing.
#   mps_active  returns 0 while a daemon answers at CUDA_MPS_PIPE_DIRECTORY.
# MPS_CONTROL names the control program (default nvidia-cuda-mps-control), for tests.
# The daemon writes nvidia-cuda-mps-control.pid into its pipe folder (documented by NVIDIA);
# a daemon "answers" when that process is alive and the control program can talk to it.

_mps_dir=""          # the folder mps_start made; empty when it started nothing
_mps_pid=""          # the control daemon it started
_mps_saved_pipe=""   # CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY before mps_start,
_mps_saved_log=""    #   "-" when unset
_mps_ctl() { "${MPS_CONTROL:-nvidia-cuda-mps-control}" "$@"; }

# _mps_alive PID: the process exists and is not a zombie waiting for a parent to reap it.
_mps_alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed -E 's/^.*\) ([A-Z]).*$/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# _mps_pid_in DIR: the control daemon's pid from DIR's pid file, if that process is alive.
_mps_pid_in() {
  local p
  p=$(cat "$1/nvidia-cuda-mps-control.pid" 2>/dev/null) || return 1
  [[ "$p" =~ ^[0-9]+$ ]] && _mps_alive "$p" && echo "$p"
}

mps_active() {
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || return 1
  _mps_pid_in "$CUDA_MPS_PIPE_DIRECTORY" >/dev/null || return 1
  echo get_server_list | timeout 10 "${MPS_CONTROL:-nvidia-cuda-mps-control}" >/dev/null 2>&1
}

_mps_restore_env() {
  if [ "$_mps_saved_pipe" = - ]; then unset CUDA_MPS_PIPE_DIRECTORY
  else export CUDA_MPS_PIPE_DIRECTORY="$_mps_saved_pipe"; fi
  if [ "$_mps_saved_log" = - ]; then unset CUDA_MPS_LOG_DIRECTORY
  else export CUDA_MPS_LOG_DIRECTORY="$_mps_saved_log"; fi
}

mps_start() {
  local i why
  if [ -n "$_mps_dir" ]; then
    mps_active && return 0
    echo "mps: the daemon this shell started (pid $_mps_pid) no longer answers; stopping it"
    mps_stop
  fi
  mps_active && return 0
  if ! command -v "${MPS_CONTROL:-nvidia-cuda-mps-control}" >/dev/null 2>&1; then
    echo "mps: ${MPS_CONTROL:-nvidia-cuda-mps-control} not found (install the NVIDIA compute utilities)"
    return 1
  fi
  _mps_saved_pipe=${CUDA_MPS_PIPE_DIRECTORY--} _mps_saved_log=${CUDA_MPS_LOG_DIRECTORY--}
  _mps_dir=$(mktemp -d "${TMPDIR:-/tmp}/choir-mps.XXXXXX") || {
    echo "mps: mktemp -d failed"; _mps_dir=""; return 1; }
  mkdir -p "$_mps_dir/pipe" "$_mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY="$_mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$_mps_dir/log"
  if ! _mps_ctl -d >"$_mps_dir/start.out" 2>&1; then
    why=$(tr '\n' ' ' <"$_mps_dir/start.out" | cut -c1-160)
    echo "mps: nvidia-cuda-mps-control -d failed: ${why:-no output}"
    _mps_restore_env; rm -rf "$_mps_dir"; _mps_dir=""
    return 1
  fi
  # -d returns once the daemon forked; it answers after it wrote its pid file and opened its pipe.
  for i in $(seq 1 100); do
    _mps_pid=$(_mps_pid_in "$CUDA_MPS_PIPE_DIRECTORY") && mps_active && return 0
    [ "$i" = 100 ] || sleep 0.1
  done
  why=$(tail -3 "$_mps_dir/log/control.log" 2>/dev/null | tr '\n' ' ' | cut -c1-160)
  echo "mps: the daemon did not answer within 10 s (${why:-no control.log})"
  [ -n "$_mps_pid" ] && kill "$_mps_pid" 2>/dev/null
  _mps_restore_env; rm -rf "$_mps_dir"; _mps_dir="" _mps_pid=""
  return 1
}

mps_stop() {
  local servers p i alive
  [ -n "$_mps_dir" ] || return 0
  # The servers the daemon started run on as their own processes: wait for them too.
  servers=$(echo get_server_list | CUDA_MPS_PIPE_DIRECTORY="$_mps_dir/pipe" \
    timeout 10 "${MPS_CONTROL:-nvidia-cuda-mps-control}" 2>/dev/null | grep -oE '^[0-9]+')
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$_mps_dir/pipe" timeout 30 \
    "${MPS_CONTROL:-nvidia-cuda-mps-control}" >/dev/null 2>&1
  for i in $(seq 1 300); do
    alive=""
    for p in $_mps_pid $servers; do _mps_alive "$p" && alive="$alive $p"; done
    [ -z "$alive" ] && break
    if [ "$i" = 300 ]; then
      echo "mps: still running 30 s after quit:$alive; killing them"
      for p in $alive; do kill -9 "$p" 2>/dev/null; done
    fi
    sleep 0.1
  done
  rm -rf "$_mps_dir"
  _mps_restore_env
  _mps_dir="" _mps_pid=""
  return 0
}
