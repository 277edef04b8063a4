#!/usr/bin/env python3
"""net-ib opens libibverbs at run time: its shared object must need no ibv_* symbol and must not
list libibverbs among its NEEDED libraries, so that it loads where rdma-core is missing."""
import subprocess
import sys


def main():
    so = sys.argv[1]
    undef = subprocess.run(["nm", "-D", "--undefined-only", so], check=True, capture_output=True,
                           text=True).stdout.split()
    bad = sorted({s for s in undef if s.startswith(("ibv_", "_ibv_", "__ibv_"))})
    dyn = subprocess.run(["readelf", "-d", so], check=True, capture_output=True, text=True).stdout
    needed = [l for l in dyn.splitlines() if "NEEDED" in l and "ibverbs" in l]
    for s in bad:
        print(f"{so}: needs verbs symbol {s} at load time (call it through nib_v instead)")
    for l in needed:
        print(f"{so}: links libibverbs: {l.strip()}")
    print(f"net-ib: {len(undef)} undefined symbols checked, {len(bad) + len(needed)} problem(s)")
    return 1 if bad or needed else 0


if __name__ == "__main__":
    sys.exit(main())
