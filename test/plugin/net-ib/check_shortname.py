#!/usr/bin/env python3
"""The core's net loader finds net-ib by its short name (NCCL_NET_PLUGIN=ib: libnccl-net-ib.so in
Choir's plugin folder) and, on a machine without an RDMA device, the plugin loads at ABI v12,
reports 0 devices with an INFO line saying why and no WARN, and the conformance runner says it
has nothing to test (exit 77). Here that is the expected outcome, so it is this test's pass.

usage: check_shortname.py NET_CONFORMANCE"""
import os
import subprocess
import sys


def main():
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET")
    p = subprocess.run([sys.argv[1], "--case", "props", "ib"], env=env, capture_output=True,
                       text=True, timeout=60)
    out = p.stdout + p.stderr
    print(out)
    if "0 device(s)" not in out:
        # A machine with an HCA: the props case itself must pass.
        ok = p.returncode == 0 and "PASS props" in out
        print("net-ib has devices here: props", "passed" if ok else "FAILED")
        return 0 if ok else 1
    problems = []
    if p.returncode != 77:
        problems.append(f"exit status {p.returncode}, expected 77 (no device)")
    if "loaded ncclNetPlugin_v12 'IB'" not in out:
        problems.append("the core did not load the v12 table 'IB' by the short name")
    if "net-ib: no devices" not in out and "NCCL_IB_DISABLE" not in out:
        problems.append("no INFO line from net-ib says why it has no devices")
    if " WARN " in out:
        problems.append("a WARN was logged: no devices is not an error")
    for w in problems:
        print("FAIL:", w)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
