#!/usr/bin/env python3
"""A plugin library exports exactly the given symbols (nm -D --defined-only) and does not link
libnccl (readelf -d). Usage: check_exports.py LIBRARY SYMBOL...  Exit 77 when binutils are
missing."""
import shutil
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    lib, wanted = sys.argv[1], set(sys.argv[2:])
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        print("nm or readelf not found: skipping", file=sys.stderr)
        return 77
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    exported = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            exported.add(fields[2].split("@")[0])
    failed = False
    if exported != wanted:
        print(f"{lib}: exports {sorted(exported)}, expected exactly {sorted(wanted)}",
              file=sys.stderr)
        failed = True
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    needed = [l for l in dyn.splitlines() if "(NEEDED)" in l]
    if any("libnccl" in l for l in needed):
        print(f"{lib}: links libnccl: {needed}", file=sys.stderr)
        failed = True
    if not failed:
        print(f"{lib}: exports exactly {sorted(wanted)}, no libnccl")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
