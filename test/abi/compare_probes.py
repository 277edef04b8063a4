#!/usr/bin/env python3
"""Run the ABI probe built against Choir's header and the one built against NVIDIA's, and require
identical output (every size, offset, enum and macro value of the NCCL 2.28 ABI).

  compare_probes.py CHOIR_PROBE REFERENCE_PROBE [WHAT [MIN_FACTS]]

WHAT names the header in the summary (nccl.h); MIN_FACTS is the least number of facts the Choir
probe must print (100)."""
import subprocess
import sys


def run(path):
    out = subprocess.run([path], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    return lines[0], lines[1:]


def main():
    if len(sys.argv) < 3 or len(sys.argv) > 5:
        print("usage: compare_probes.py CHOIR_PROBE REFERENCE_PROBE [WHAT [MIN_FACTS]]",
              file=sys.stderr)
        return 2
    what = sys.argv[3] if len(sys.argv) > 3 else "nccl.h"
    min_facts = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    head_a, a = run(sys.argv[1])
    head_b, b = run(sys.argv[2])
    if head_a != "header choir" or head_b != "header reference":
        print(f"probes were built against the wrong headers: {head_a!r}, {head_b!r}")
        return 1
    if len(a) < min_facts:
        print(f"choir probe printed only {len(a)} facts; expected at least {min_facts}")
        return 1
    bad = 0
    ref = dict(line.rsplit(" ", 1) for line in b)
    mine = dict(line.rsplit(" ", 1) for line in a)
    for key in sorted(set(ref) | set(mine)):
        if ref.get(key) != mine.get(key):
            print(f"MISMATCH {key}: choir={mine.get(key)} nvidia={ref.get(key)}")
            bad += 1
    print(f"{what} ABI: {len(ref) - bad}/{len(ref)} facts equal NVIDIA NCCL's")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
