#!/usr/bin/env python3
"""Check the dynamic symbols of libnccl.so.2: exactly the listed functions and their pnccl twins,
and the soname libnccl.so.2. Also checks the 38 functions PyTorch 2.11 links are among them."""
import subprocess
import sys

PYTORCH_2_11 = """ncclAllGather ncclAllReduce ncclAlltoAll ncclBcast ncclBroadcast ncclCommAbort
ncclCommCount ncclCommDeregister ncclCommDestroy ncclCommFinalize ncclCommGetAsyncError
ncclCommInitAll ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable
ncclCommRegister ncclCommShrink ncclCommSplit ncclCommUserRank ncclCommWindowDeregister
ncclCommWindowRegister ncclDevCommCreate ncclDevCommDestroy ncclGetErrorString ncclGetLastError
ncclGetUniqueId ncclGetVersion ncclGroupEnd ncclGroupSimulateEnd ncclGroupStart ncclMemAlloc
ncclMemFree ncclRecv ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclReduce ncclReduceScatter
ncclSend""".split()


def main():
    lib, listing = sys.argv[1], sys.argv[2]
    wanted = [l.strip() for l in open(listing) if l.strip() and not l.startswith("#")]
    expected = set(wanted) | {"p" + f for f in wanted}
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            exported[parts[2].split("@")[0]] = parts[1]
    bad = 0
    for name in sorted(expected - set(exported)):
        print(f"missing export: {name}")
        bad += 1
    for name in sorted(set(exported) - expected):
        print(f"unexpected export: {name} ({exported[name]})")
        bad += 1
    for name in sorted(expected & set(exported)):
        if exported[name] != "T":
            print(f"{name} is exported as '{exported[name]}', not as a function (T)")
            bad += 1
    missing_pt = [f for f in PYTORCH_2_11 if f not in exported]
    if len(PYTORCH_2_11) != 38 or missing_pt:
        print(f"PyTorch 2.11 needs {missing_pt}")
        bad += 1
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    if "Library soname: [libnccl.so.2]" not in dyn:
        print("soname is not libnccl.so.2")
        bad += 1
    print(f"exports: {len(expected & set(exported))}/{len(expected)} expected symbols, "
          f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
