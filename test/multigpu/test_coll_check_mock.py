#!/usr/bin/env python3
"""Unit test: coll_check linked with the CPU mock of CUDA and NCCL (test/perf/mock) runs its matrix
and every semantic case end to end without a GPU, counts its cases as the matrix defines them,
and turns injected faults (wrong values, overruns, asynchronous errors, missing devices, bad
options) into the right exit status with a message naming the rank, the case and the element.

The mock runs one process only (its communicators live in the process), so the one-process-per-GPU
mode is exercised on GPUs only.

usage: test_coll_check_mock.py COLL_CHECK_MOCK
"""

import os
import re
import subprocess
import sys

failures = []
REDUCING = {"allreduce", "reduce", "reducescatter"}
# placements per operation: bcast is in place only, alltoall and sendrecv out of place only
PLACEMENTS = {"allreduce": 2, "broadcast": 2, "bcast": 1, "reduce": 2, "allgather": 2,
              "reducescatter": 2, "alltoall": 1, "gather": 2, "scatter": 2, "sendrecv": 1}


def run(exe, args, env=None, timeout=300):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MOCK_") and k != "CHOIR_TEST_NDEV"}
    e["MOCK_CUDA_DEVICES"] = "8"
    e.update(env or {})
    p = subprocess.run([exe] + args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-4000:]), file=sys.stderr)


def final(out):
    m = re.search(r"^coll-check: (\d+) cases, (\d+) failed$", out, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def expected_matrix(ntypes, nsizes, nreds, inits=1):
    n = 0
    for op, pl in PLACEMENTS.items():
        n += ntypes * nsizes * pl * (nreds if op in REDUCING else 1)
    return n * inits


def test_matrix(exe):
    # every operation, type and operator, on 1 to 5 ranks, both ways of creating communicators
    for g in ("1", "2", "3", "5"):
        rc, out, err = run(exe, ["-g", g, "--sizes", "0,1,7,1023,4099", "--init", "all,group"])
        what = "matrix -g %s" % g
        check(rc == 0, "%s: exit status %d" % (what, rc), out + err)
        cases, failed = final(out)
        check(cases == expected_matrix(12, 5, 7, 2) and failed == 0,
              "%s: %s cases, %s failed" % (what, cases, failed), out)
        check(out.count(" 0 failed") >= 20, "%s: per-op lines" % what, out)
        check("threads/group-initrank" in out and "threads/initall" in out, "%s: both inits" % what,
              out)
    # 8 ranks (issue 8's machine), every operation, one type of each kind, one process
    rc, out, err = run(exe, ["-g", "8", "--sizes", "0,7,4099", "--types", "float,int8,bfloat16",
                             "--redops", "sum,max"])
    check(rc == 0 and final(out) == (expected_matrix(3, 3, 2), 0) and "8 ranks" in out,
          "matrix -g 8: %s" % (final(out),), out + err)
    # sizes in bytes: 1KB of each type
    rc, out, err = run(exe, ["-g", "2", "--sizes", "1KB", "--ops", "allgather", "--types",
                             "double,int8", "-v"])
    check(rc == 0 and "allgather double count 128 " in out and "allgather int8 count 1024 " in out,
          "byte sizes", out + err)
    # every root
    rc, out, err = run(exe, ["-g", "4", "--sizes", "33", "--ops", "reduce,gather,scatter,bcast",
                             "--types", "float", "--redops", "sum", "--root", "all"])
    check(rc == 0 and final(out) == (4 * (2 + 2 + 2 + 1), 0), "roots all", out + err)


def test_cases(exe):
    rc, out, err = run(exe, ["-g", "3", "--case", "all", "--replays", "4", "--ops",
                             "allreduce,bcast,sendrecv,scatter"])
    check(rc == 0, "semantic cases: exit status %d" % rc, out + err)
    for name, n in (("groups", 7), ("graph", 4), ("nonblocking", 4), ("streams", 6),
                    ("multicomm", 8), ("zero", 18)):
        check(re.search(r"case %-11s +%d cases, 0 failed" % (name, n), out) is not None,
              "case %s: %d cases" % (name, n), out)
    check(re.search(r"case unaligned +\d+ cases, 0 failed", out) is not None, "case unaligned", out)
    # the matrix replayed from CUDA graphs
    rc, out, err = run(exe, ["-g", "2", "--graph", "3", "--sizes", "7,1023", "--types",
                             "float,uint8", "--case", "matrix,graph", "--replays", "2"])
    check(rc == 0 and final(out)[1] == 0, "graph matrix: exit status %d" % rc, out + err)


def test_faults(exe):
    args = ["-g", "3", "--sizes", "1023", "--ops", "allreduce,sendrecv,gather", "--types",
            "float,int8", "--redops", "sum,premul-dev"]
    rc, out, err = run(exe, args, {"MOCK_NCCL_CORRUPT": "1"})
    cases, failed = final(out)
    check(rc == 1 and cases is not None and failed == cases and cases > 0,
          "corrupt: exit status %d, %s of %s failed" % (rc, failed, cases), out + err)
    check(re.search(r"FAIL allreduce float premul-dev count 1023 out-of-place .*rank 2 \(device 2\): "
                    r"1 wrong elements \(first at 511\)", err) is not None,
          "corrupt: names the case, rank and element", err)
    check(re.search(r"rank 2 recvbuff\[511\]: got \S+, expected \S+ \(tolerance", err) is not None,
          "corrupt: shows got and expected", err)
    check(re.search(r"FAIL gather int8 count 1023 .* root 2 .*rank 2", err) is not None,
          "corrupt: gather at the root", err)

    rc, out, err = run(exe, ["-g", "2", "--sizes", "7", "--ops", "allgather", "--types", "half"],
                       {"MOCK_NCCL_OVERRUN": "1"})
    check(rc == 1 and "bytes overwritten after the buffer" in err, "overrun: exit status %d" % rc,
          out + err)

    rc, out, err = run(exe, ["-g", "2", "--sizes", "7", "--ops", "allgather"],
                       {"MOCK_NCCL_ASYNC_ERROR": "1"})
    check(rc == 1 and "asynchronous error" in err, "async error: exit status %d" % rc, out + err)

    rc, out, err = run(exe, [], {"MOCK_CUDA_DEVICES": "0"})
    check(rc == 77 and "skipped: no GPU" in out, "no GPU: exit status %d" % rc, out + err)
    rc, out, err = run(exe, ["--mode", "procs"], {"MOCK_CUDA_DEVICES": "0"})
    check(rc == 77 and "skipped: no GPU" in out, "no GPU, procs: exit status %d" % rc, out + err)
    rc, out, err = run(exe, ["--sizes", "1"], {"MOCK_CUDA_DEVICES": "2", "CHOIR_TEST_NDEV": "4"})
    check(rc == 77 and "4 GPUs requested but only 2" in out, "too few GPUs: %d" % rc, out + err)
    rc, out, err = run(exe, ["--sizes", "1", "--ops", "sendrecv", "--types", "float"],
                       {"CHOIR_TEST_NDEV": "5"})
    check(rc == 0 and "5 GPUs driven" in out, "CHOIR_TEST_NDEV: %d" % rc, out + err)
    for bad in (["--ops", "allreduce,nope"], ["--types", "float7"], ["--case", "x"], ["-g", "0"],
                ["--sizes", "12Q"], ["--mode", "mpi"], ["extra"]):
        rc, out, err = run(exe, bad)
        check(rc == 2, "bad option %s: exit status %d" % (bad, rc), out + err)


def main():
    exe = sys.argv[1]
    test_matrix(exe)
    test_cases(exe)
    test_faults(exe)
    if failures:
        print("%d failures" % len(failures), file=sys.stderr)
        return 1
    print("coll-check-mock: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
