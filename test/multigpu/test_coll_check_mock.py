#!/usr/bin/env python3
"""Unit test: coll_check linked with the CPU mock of CUDA and NCCL (test/perf/mock) runs its matrix
and every semantic case end to end without a GPU, counts its cases as the matrix defines them,
and turns injected faults (wrong values, overruns, asynchronous errors, missing devices, bad
options) into the right exit status with a message naming the rank, the case and the element.

Several ranks per GPU (--ranks-per-gpu R, CHOIR_TEST_RPG): on mocks of 1 and 2 devices, R = 2
and 4 with 4 and 8 ranks, threads and procs; the device of every rank's stream (the mock's
trace; the fake NCCL refuses a stream of another device than its communicator's) is rank / R,
CHOIR_RANKS_SHARE_GPU=1 is set unless the caller set it, procs without MPS skip, fewer than 2
ranks skip (a multi-GPU test must not pass on one GPU), and the mock aborts any
device-synchronising call made while NCCL work is in flight on that device.

The mock keeps its communicators inside one process, so between processes it cannot complete a
collective: procs mode runs with --case none here (creation, rank-to-device layout, teardown);
its collectives run on GPUs only.

usage: test_coll_check_mock.py COLL_CHECK_MOCK
"""

import os
import re
import subprocess
import sys
import tempfile

failures = []
REDUCING = {"allreduce", "reduce", "reducescatter"}
# placements per operation: bcast is in place only, alltoall and sendrecv out of place only
PLACEMENTS = {"allreduce": 2, "broadcast": 2, "bcast": 1, "reduce": 2, "allgather": 2,
              "reducescatter": 2, "alltoall": 1, "gather": 2, "scatter": 2, "sendrecv": 1}


def run(exe, args, env=None, timeout=300):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("MOCK_") and k not in ("CHOIR_TEST_NDEV", "CHOIR_TEST_RPG",
                                                    "CHOIR_RANKS_SHARE_GPU")}
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
    # every operation, type and operator, on 2 to 5 ranks, both ways of creating communicators
    for g in ("2", "3", "5"):
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
    for name, n in (("groups", 12), ("graph", 4), ("nonblocking", 4), ("streams", 6),
                    ("multicomm", 8), ("zero", 18)):
        check(re.search(r"case %-11s +%d cases, 0 failed" % (name, n), out) is not None,
              "case %s: %d cases" % (name, n), out)
    check(re.search(r"case unaligned +\d+ cases, 0 failed", out) is not None, "case unaligned", out)
    # the non-blocking case reports how often the library deferred (never required)
    m = re.search(r"nonblocking: ncclCommGetAsyncError said ncclInProgress in (\d+) of (\d+) "
                  r"waits$", out, re.M)
    check(m is not None and int(m.group(2)) > 0 and int(m.group(1)) <= int(m.group(2)),
          "nonblocking: the wait count line", out)
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
    check(rc == 77 and "4 ranks at 1 per GPU need 4 GPUs but only 2 are visible" in out,
          "too few GPUs: %d" % rc, out + err)
    rc, out, err = run(exe, ["--sizes", "1", "--ops", "sendrecv", "--types", "float"],
                       {"CHOIR_TEST_NDEV": "5"})
    check(rc == 0 and "5 GPUs driven" in out, "CHOIR_TEST_NDEV: %d" % rc, out + err)
    for bad in (["--ops", "allreduce,nope"], ["--types", "float7"], ["--case", "x"], ["-g", "0"],
                ["--sizes", "12Q"], ["--mode", "mpi"], ["extra"], ["--ranks-per-gpu", "0"],
                ["--ranks-per-gpu", "two"]):
        rc, out, err = run(exe, bad)
        check(rc == 2, "bad option %s: exit status %d" % (bad, rc), out + err)
    rc, out, err = run(exe, [], {"CHOIR_TEST_RPG": "x"})
    check(rc == 2 and "CHOIR_TEST_RPG='x'" in err, "bad CHOIR_TEST_RPG: %d" % rc, out + err)


SKIP_ONE_RANK = ("skipped: 1 rank (%s), and the collectives need at least 2; on one GPU, run "
                 "several ranks on it: --ranks-per-gpu 2 (or CHOIR_TEST_RPG=2)")


def test_one_gpu_skips(exe):
    """Issue 26: a multi-GPU test must not pass on one GPU (it ran 1 rank and said 0 failed)."""
    for mode in ("threads", "procs"):
        rc, out, err = run(exe, ["--mode", mode], {"MOCK_CUDA_DEVICES": "1"})
        check(rc == 77 and out.strip() == "coll_check: " + SKIP_ONE_RANK %
              "1 GPU visible, 1 rank per GPU", "one device, %s: %d" % (mode, rc), out + err)
        check("cases" not in out, "one device, %s: nothing run" % mode, out)
    rc, out, err = run(exe, ["-g", "1"])
    check(rc == 77 and SKIP_ONE_RANK % "-g 1" in out, "-g 1 on 8 devices: %d" % rc, out + err)
    rc, out, err = run(exe, [], {"CHOIR_TEST_NDEV": "1"})
    check(rc == 77 and SKIP_ONE_RANK % "CHOIR_TEST_NDEV=1" in out, "CHOIR_TEST_NDEV=1: %d" % rc,
          out + err)


LAYOUT = re.compile(r"^coll_check: (\S+): pid (\d+): rank (\d+) on device (\d+)$", re.M)


def check_layout(what, out, trace_path, nranks, rpg, labels):
    """Every rank on device rank / rpg, as coll_check says and as the mock's trace of its streams
    shows: the streams a process created, in order, are its ranks' (one per rank here)."""
    got = {}
    for label, pid, rank, dev in LAYOUT.findall(out):
        got.setdefault(label, []).append((int(pid), int(rank), int(dev)))
    check(sorted(got) == sorted(labels), "%s: layouts of %s" % (what, sorted(got)), out)
    try:
        with open(trace_path) as f:
            trace = [l.split() for l in f]
    except OSError:
        trace = []
    streams = {}
    for t in trace:
        streams.setdefault(int(t[1][4:]), []).append(int(t[2][4:]))
    for label in labels:
        ranks = sorted(got.get(label, []), key=lambda x: x[1])
        check([r for _, r, _ in ranks] == list(range(nranks)), "%s %s: ranks %s" %
              (what, label, [r for _, r, _ in ranks]), out)
        for pid, rank, dev in ranks:
            check(dev == rank // rpg, "%s %s: rank %d on device %d" % (what, label, rank, dev), out)
    # The streams of each process, in creation order, against its ranks in the order printed.
    for pid in {p for l in labels for p, _, _ in got.get(l, [])}:
        devs = [d for l in labels for p, _, d in got.get(l, []) if p == pid]
        check(streams.get(pid) == devs, "%s: pid %d streams on devices %s, ranks on %s" %
              (what, pid, streams.get(pid), devs), str(trace))


def test_ranks_per_gpu(exe):
    matrix = ["--sizes", "0,7,1023", "--types", "float,int8,bfloat16", "--redops",
              "sum,max,premul-dev", "--root", "ends"]
    ran = set()  # (ranks, R) whose operations ran: the same layout on a mock with more devices
    with tempfile.TemporaryDirectory() as d:
        for ndev in (1, 2):
            for rpg in (2, 4):
                for nranks in (4, 8):
                    need = (nranks + rpg - 1) // rpg
                    for mode in ("threads", "procs"):
                        what = "%d ranks, %d per GPU, %s, %d device(s)" % (nranks, rpg, mode, ndev)
                        trace = os.path.join(d, "trace-%d-%d-%d-%s" % (ndev, rpg, nranks, mode))
                        env = {"MOCK_CUDA_DEVICES": str(ndev), "MOCK_CUDA_TRACE": trace,
                               "MOCK_CUDA_MPS": "1"}
                        args = ["-g", str(nranks), "--ranks-per-gpu", str(rpg), "--mode", mode]
                        if need > ndev:
                            rc, out, err = run(exe, args, env)
                            check(rc == 77 and out.strip() ==
                                  "coll_check: skipped: %d ranks at %d per GPU need %d GPUs but "
                                  "only %d are visible" % (nranks, rpg, need, ndev),
                                  "%s: too few devices (%d)" % (what, rc), out + err)
                            continue
                        banner = "%d ranks on %d GPU%s, %d ranks per GPU " \
                                 "(CHOIR_RANKS_SHARE_GPU=1)" % (nranks, need, "s" * (need > 1), rpg)
                        if mode == "procs":
                            # Creation and teardown in every process (see the docstring).
                            rc, out, err = run(exe, args + ["--case", "none"], env)
                            check(rc == 0 and final(out) == (0, 0) and
                                  "coll_check: procs: %d processes on %d GPU%s, %d ranks per GPU "
                                  "(CHOIR_RANKS_SHARE_GPU=1)" % (nranks, need, "s" * (need > 1),
                                                                 rpg) in out,
                                  "%s: exit status %d" % (what, rc), out + err)
                            check_layout(what, out, trace, nranks, rpg, ["procs"])
                            continue
                        # Layout of both ways of creating the communicators, then every
                        # operation and semantic case on it.
                        rc, out, err = run(exe, args + ["--init", "all,group", "--case", "none"],
                                           env)
                        check(rc == 0 and out.count(banner) == 2, "%s: layout run (%d)" %
                              (what, rc), out + err)
                        check_layout(what, out, trace, nranks, rpg,
                                     ["threads/initall", "threads/group-initrank"])
                        if (nranks, rpg) in ran:
                            continue
                        ran.add((nranks, rpg))
                        rc, out, err = run(exe, args + matrix + ["--init", "all,group"], env)
                        nops_roots = {"broadcast": 2, "bcast": 2, "reduce": 2, "gather": 2,
                                      "scatter": 2}
                        want = 0
                        for op, pl in PLACEMENTS.items():
                            want += 3 * 3 * pl * (3 if op in REDUCING else 1) * \
                                nops_roots.get(op, 1)
                        check(rc == 0 and final(out) == (2 * want, 0) and banner in out,
                              "%s: matrix %s (%d)" % (what, final(out), rc), out + err)
                        # Every semantic case (fewer operations in the unaligned one: time).
                        cases = "all" if nranks == 4 else "groups,graph,nonblocking,streams," \
                            "multicomm,zero"
                        rc, out, err = run(exe, args + ["--case", cases, "--replays", "2", "--ops",
                                                        "allreduce,sendrecv,scatter"], env)
                        for name, n in (("groups", 12), ("graph", 2), ("nonblocking", 4),
                                        ("streams", 6), ("multicomm", 8), ("zero", 18)):
                            check(re.search(r"case %-11s +%d cases, 0 failed" % (name, n), out)
                                  is not None, "%s: case %s" % (what, name), out + err)
                        check(rc == 0 and final(out)[1] == 0, "%s: cases (%d)" % (what, rc),
                              out + err)
    # Without MPS, processes sharing a GPU skip with the reason (threads need none).
    rc, out, err = run(exe, ["-g", "4", "--ranks-per-gpu", "2", "--mode", "procs"],
                       {"MOCK_CUDA_DEVICES": "2"})
    check(rc == 77 and out.startswith("coll_check: skipped: needs MPS: --mode procs with 2 ranks "
                                      "per GPU") and out.count("\n") == 1 and
          "nvidia-cuda-mps-control -d" in out, "procs without MPS: %d" % rc, out + err)
    rc, out, err = run(exe, ["-g", "4", "--ranks-per-gpu", "2", "--case", "none"],
                       {"MOCK_CUDA_DEVICES": "2"})
    check(rc == 0, "threads need no MPS: %d" % rc, out + err)
    # CHOIR_TEST_RPG as --ranks-per-gpu; the default rank count is every device times R; a
    # CHOIR_RANKS_SHARE_GPU the caller set is kept (and shown).
    rc, out, err = run(exe, ["--case", "none"], {"MOCK_CUDA_DEVICES": "1", "CHOIR_TEST_RPG": "3",
                                                 "CHOIR_RANKS_SHARE_GPU": "0"})
    check(rc == 0 and "3 ranks on 1 GPU, 3 ranks per GPU (CHOIR_RANKS_SHARE_GPU=0)" in out and
          len(LAYOUT.findall(out)) == 3, "CHOIR_TEST_RPG=3: %d" % rc, out + err)
    # One rank per GPU leaves CHOIR_RANKS_SHARE_GPU alone and says nothing of it.
    rc, out, err = run(exe, ["-g", "2", "--case", "none"])
    check(rc == 0 and "CHOIR_RANKS_SHARE_GPU" not in out and "2 GPUs driven" in out,
          "one rank per GPU: %d" % rc, out + err)


def main():
    exe = sys.argv[1]
    test_one_gpu_skips(exe)
    test_ranks_per_gpu(exe)
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
