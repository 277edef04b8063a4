#!/usr/bin/env python3
"""Planted fault: the CPU mock of NCCL (test/perf/mock) leaves the last rank's input out of every
reduction (MOCK_NCCL_DROP_LAST=1). With the data they use by default, the correctness suite
(coll_check on the mock, its --quick data) and the perf tools (their default check) must fail
for every type, on 2, 4 and 8 ranks: every sum, avg and premulsum case, and prod (whose data
hold many factors of 1, so not every case) in each run. Without the fault, the same runs pass.

Before issue 26, fp8 sums with the default data passed with a rank missing (the tolerance of
random data on 4 and 8 ranks is wider than a rank's term).

usage: test_drop_rank.py COLL_CHECK_MOCK PERF_MOCK_DIR
"""

import os
import re
import subprocess
import sys

TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16", "f8e4m3", "f8e5m2"]
RANKS = [2, 4, 8]
failures = []


def run(cmd, drop):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOCK_")}
    env["MOCK_CUDA_DEVICES"] = "8"
    if drop:
        env["MOCK_NCCL_DROP_LAST"] = "1"
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-3000:]), file=sys.stderr)


def cases(out):
    m = re.search(r"^coll-check: (\d+) cases, (\d+) failed$", out, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def coll_check(exe):
    base = ["--ops", "allreduce,reduce,reducescatter", "--sizes", "1023"]
    for n in RANKS:
        # Without the fault: every type and operator passes.
        rc, out, err = run([exe, "-g", str(n), "--types", "all",
                            "--redops", "sum,prod,avg,premulsum"] + base, False)
        total, failed = cases(out)
        check(rc == 0 and failed == 0, "coll_check -g %d without the fault: %s/%s failed, exit %d"
              % (n, failed, total, rc), out + err)
        for t in TYPES:
            rc, out, err = run([exe, "-g", str(n), "--types", t,
                                "--redops", "sum,avg,premulsum"] + base, True)
            total, failed = cases(out)
            check(rc == 1 and total and failed == total,
                  "coll_check -g %d %s sum/avg/premulsum, last rank dropped: %s of %s cases "
                  "failed, exit %d" % (n, t, failed, total, rc), out + err)
            rc, out, err = run([exe, "-g", str(n), "--types", t, "--redops", "prod"] + base, True)
            total, failed = cases(out)
            check(rc == 1 and total and failed, "coll_check -g %d %s prod, last rank dropped: "
                  "%s of %s cases failed, exit %d" % (n, t, failed, total, rc), out + err)
            print("coll_check -g %d %-8s: a dropped rank fails" % (n, t))


def perf(bin_dir):
    base = ["-b", "4K", "-e", "4K", "-n", "1", "-w", "0"]
    for coll in ["all_reduce", "reduce", "reduce_scatter"]:
        exe = os.path.join(bin_dir, coll + "_perf")
        for n in RANKS:
            rc, out, err = run([exe, "-g", str(n), "-d", "all", "-o", "all"] + base, False)
            check(rc == 0, "%s -g %d without the fault: exit %d" % (coll, n, rc), out + err)
            for t in TYPES:
                for op in ["sum", "prod", "avg", "premulsum"]:
                    rc, out, err = run([exe, "-g", str(n), "-d", t, "-o", op] + base, True)
                    check(rc == 1 and "wrong result: rank " in err,
                          "%s -g %d %s %s, last rank dropped: exit %d" % (coll, n, t, op, rc),
                          out + err)
            print("%s_perf -g %d: a dropped rank fails for every type and operator" % (coll, n))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    coll_check(sys.argv[1])
    perf(sys.argv[2])
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("drop-rank: every type fails with a rank missing, passes without")
    return 0


if __name__ == "__main__":
    sys.exit(main())
