#!/usr/bin/env python3
"""Unit test: the perf binaries, linked with the CPU mock of CUDA and NCCL (test/perf/mock), run
end to end without a GPU. Every collective, type and operator passes its checks in several rank
layouts (GPUs, threads, graphs, aggregation, blocking, roots), the output has the nccl-tests
shape and valid JSON, and injected faults (wrong values, overruns, hangs, asynchronous errors,
missing devices) end with the right exit status and a message naming the rank and operation.
Several ranks per GPU (--ranks-per-gpu): every collective checked with 4 ranks of one thread,
4 ranks of two threads and 8 ranks on 2 GPUs; local rank i on device i / R in the header and in
the mock's trace of the streams each process created; processes sharing a GPU skip without MPS.

usage: test_mock.py MOCK_BIN_DIR
"""

import json
import os
import re
import subprocess
import sys
import tempfile

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "sendrecv",
         "alltoall", "gather", "scatter"]
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
failures = []


def run(bin_dir, coll, args, env=None, timeout=300):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("MOCK_") or k == "CHOIR_RANKS_SHARE_GPU":
            del e[k]
    e.update(env or {})
    p = subprocess.run([os.path.join(bin_dir, coll + "_perf")] + args, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-3000:]), file=sys.stderr)


def data_rows(out):
    return [l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")]


def test_matrix(bin_dir):
    layouts = [["-g", "1"], ["-g", "2", "-r", "all"], ["-g", "3"], ["-t", "2", "-g", "2"],
               ["-g", "4", "-G", "2", "-m", "2"], ["-g", "3", "-z", "1", "-a", "2"],
               ["-t", "2", "-g", "1", "-z", "2", "-a", "0"], ["-g", "8"], ["-t", "2", "-g", "4"]]
    for coll in COLLS:
        for lay in layouts:
            args = ["-b", "8", "-e", "2K", "-f", "4", "-d", "all", "-o", "all", "-n", "2", "-c",
                    "2"] + lay
            rc, out, err = run(bin_dir, coll, args)
            what = "%s %s" % (coll, " ".join(lay))
            check(rc == 0, "%s: exit status %d" % (what, rc), out + err)
            rows = data_rows(out)
            nops = 6 if coll in REDUCING else 1
            nroots = 2 if ("all" in lay and coll in ("broadcast", "reduce", "gather", "scatter")) else 1
            check(len(rows) == 5 * 12 * nops * nroots, "%s: %d rows" % (what, len(rows)), out)
            for r in rows:
                inplace_na = coll in ("alltoall", "sendrecv")
                ok = len(r) == 13 and r[8] == "0" and (r[12] == ("N/A" if inplace_na else "0"))
                check(ok, "%s: row %s" % (what, " ".join(r)), out)
                if not ok:
                    break
            check("# Out of bounds values : 0 OK" in out and "# Avg bus bandwidth" in out,
                  "%s: footer" % what, out)


def test_output(bin_dir):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        rc, out, err = run(bin_dir, "all_gather", ["-b", "8", "-e", "64", "-f", "2", "-g", "4",
                                                    "-J", path])
        check(rc == 0, "all_gather -J: exit status %d" % rc, out + err)
        lines = out.splitlines()
        check(lines[1] == "# Collective test starting: all_gather_perf", "header", out)
        check(lines[2].startswith("# nThread 1 nGpus 4 minBytes 8 maxBytes 64 step: 2(factor)"),
              "config line", out)
        check(sum(1 for l in lines if l.startswith("#  Rank ")) == 4, "device lines", out)
        rows = data_rows(out)
        # 4 ranks: 8 B cannot be split into 4 floats per rank: size 0 rows, as nccl-tests.
        check([r[0] for r in rows] == ["0", "16", "32", "64"], "sizes", out)
        check(all(r[3] == "none" and r[4] == "-1" for r in rows), "redop/root columns", out)
        with open(path) as f:
            doc = json.load(f)
        check(doc["config"]["nranks"] == 4 and len(doc["devices"]) == 4, "JSON config", str(doc))
        check([r["size"] for r in doc["results"]] == [0, 16, 32, 64], "JSON sizes", str(doc))
        r = doc["results"][-1]
        check(r["count"] == 4 and r["out_of_place"]["nwrong"] == 0 and
              r["in_place"]["nwrong"] == 0 and r["out_of_place"]["bus_bw"] >= 0,
              "JSON row", str(r))
        check(doc["out_of_bounds"] == {"count": 0, "okay": True}, "JSON footer", str(doc))

    # -R 1 and -R 2 register the buffers (and deregister them before the communicators go):
    # the data is still checked.
    for reg in ("1", "2"):
        rc, out, err = run(bin_dir, "all_reduce", ["-b", "8", "-e", "1K", "-f", "4", "-g", "3",
                                                    "-t", "2", "-R", reg, "-c", "1"])
        rows = data_rows(out)
        check(rc == 0 and len(rows) == 4 and all(r[8] == "0" and r[12] == "0" for r in rows),
              "all_reduce -R %s" % reg, out + err)

    rc, out, err = run(bin_dir, "broadcast", ["-b", "64", "-e", "64", "-g", "2", "-c", "0"])
    check(rc == 0 and data_rows(out)[0][8] == "N/A" and data_rows(out)[0][12] == "N/A",
          "-c 0 prints N/A", out + err)


def test_faults(bin_dir):
    base = ["-b", "256", "-e", "256", "-n", "1"]
    for coll in COLLS:
        rc, out, err = run(bin_dir, coll, base + ["-g", "3", "-r", "1"], {"MOCK_NCCL_CORRUPT": "1"})
        check(rc == 1, "%s corrupt: exit status %d" % (coll, rc), out + err)
        check("wrong result: rank " in err and coll in err and "first at index" in err,
              "%s corrupt: message" % coll, err)
        check("FAILED" in out, "%s corrupt: footer" % coll, out)
        wrong = [r for r in data_rows(out) if r[8] not in ("0", "N/A")]
        check(len(wrong) == 1, "%s corrupt: #wrong column" % coll, out)

    rc, out, err = run(bin_dir, "reduce_scatter", base + ["-g", "2", "-d", "half", "-o", "avg"],
                       {"MOCK_NCCL_CORRUPT": "1"})
    check(rc == 1 and "reduce_scatter half avg" in err and "exact pattern" in err,
          "corrupt half avg message", err)

    rc, out, err = run(bin_dir, "all_reduce", base + ["-g", "2"], {"MOCK_NCCL_OVERRUN": "1"})
    check(rc == 1 and "after the end of the 256-byte output were overwritten" in err,
          "overrun detected", err)

    rc, out, err = run(bin_dir, "all_reduce", base + ["-g", "2", "-T", "1"], {"MOCK_NCCL_HANG": "1"},
                       timeout=60)
    check(rc == 4 and "timeout" in err and "did not complete within 1 s" in err and
          "all_reduce float sum" in err, "hang: exit status %d" % rc, err)

    rc, out, err = run(bin_dir, "all_reduce", base + ["-t", "2", "-T", "1"],
                       {"MOCK_NCCL_INIT_HANG": "1"}, timeout=60)
    check(rc == 4 and "communicator initialisation" in err, "init hang: exit status %d" % rc, err)

    rc, out, err = run(bin_dir, "all_reduce", base + ["-g", "2"], {"MOCK_NCCL_ASYNC_ERROR": "1"})
    check(rc == 3 and "asynchronous NCCL error" in err, "async error: exit status %d" % rc, err)

    rc, out, err = run(bin_dir, "all_reduce", base, {"MOCK_CUDA_DEVICES": "0"})
    check(rc == 77 and out.startswith("no CUDA device: "), "no device: skip (%d)" % rc, out)
    rc, out, err = run(bin_dir, "all_reduce", base + ["-p", "3"], {"MOCK_CUDA_DEVICES": "0"})
    check(rc == 77 and out.count("no CUDA device") == 1, "no device, 3 processes: one line", out)
    rc, out, err = run(bin_dir, "all_reduce", base + ["-g", "4"], {"MOCK_CUDA_DEVICES": "2"})
    check(rc == 77 and "needs devices 0..3 but only 2" in out, "too few devices", out)

    # Processes cannot share the mock's state: their collectives never complete, so -T must end
    # every process and the launcher must report it.
    rc, out, err = run(bin_dir, "all_reduce", base + ["-p", "2", "-T", "1"], timeout=60)
    check(rc == 4 and "perf launcher" in err, "launcher + timeout: exit status %d" % rc, err)

    rc, out, err = run(bin_dir, "broadcast", base + ["-g", "2", "-r", "2"])
    check(rc == 2 and "-r (--root): root 2 is out of range for 2 ranks" in err, "bad root", err)
    rc, out, err = run(bin_dir, "all_reduce", ["-d", "float128"])
    check(rc == 2 and "-d (--datatype)" in err, "bad type", err)


DEVICE_LINE = re.compile(r"^#  Rank +(\d+) Group +\d+ Pid +(\d+) on +\S+ device +(\d+) ", re.M)


def check_devices(what, out, trace_path, nranks, rpg):
    """The header's rank -> device lines say rank // rpg (one host: rank = local slot), and each
    process created its streams, in rank order, on those devices (the mock's trace)."""
    lines = [(int(r), int(p), int(d)) for r, p, d in DEVICE_LINE.findall(out)]
    check([r for r, _, _ in lines] == list(range(nranks)), "%s: device lines %s" % (what, lines),
          out)
    check(all(d == r // rpg for r, _, d in lines), "%s: devices %s" % (what, lines), out)
    streams = {}
    try:
        with open(trace_path) as f:
            for t in f:
                pid, dev = t.split()[1:3]
                streams.setdefault(int(pid[4:]), []).append(int(dev[4:]))
    except OSError:
        pass
    want = {}
    for _, p, d in lines:
        want.setdefault(p, []).append(d)
    check(streams == want, "%s: streams per process %s, header %s" % (what, streams, want), out)


def test_ranks_per_gpu(bin_dir):
    with tempfile.TemporaryDirectory() as d:
        # One process: every collective, type and operator checked, ranks sharing GPUs.
        for lay, ndev, nranks, rpg in ((["-g", "4"], 1, 4, 4), (["-t", "2", "-g", "2"], 1, 4, 4),
                                       (["-g", "8"], 2, 8, 4)):
            for coll in COLLS:
                trace = os.path.join(d, "%s-%s" % (coll, "-".join(lay)))
                args = ["-b", "8", "-e", "2K", "-f", "8", "-d", "all", "-o", "all", "-n", "2",
                        "-c", "1", "--ranks-per-gpu", str(rpg)] + lay
                rc, out, err = run(bin_dir, coll, args, {"MOCK_CUDA_DEVICES": str(ndev),
                                                         "MOCK_CUDA_TRACE": trace})
                what = "%s %s --ranks-per-gpu %d on %d device(s)" % (coll, " ".join(lay), rpg, ndev)
                check(rc == 0, "%s: exit status %d" % (what, rc), out + err)
                check("# Ranks per GPU: %d (CHOIR_RANKS_SHARE_GPU=1)" % rpg in out,
                      "%s: header" % what, out)
                rows = data_rows(out)
                nops = 6 if coll in REDUCING else 1
                check(len(rows) == 3 * 12 * nops and all(r[8] == "0" for r in rows),
                      "%s: %d rows, all checked right" % (what, len(rows)), out)
                check_devices(what, out, trace, nranks, rpg)
        # Processes sharing GPU 0 (MPS). The mock cannot carry a collective between processes, so
        # the run ends at -T; the header and the streams show where each rank was.
        for lay, nranks, rpg, mps in ((["-p", "4", "-g", "1"], 4, 4, True),
                                      (["-p", "2", "-g", "3"], 6, 2, True),
                                      (["-p", "2", "-t", "2", "-g", "2"], 8, 4, False)):
            trace = os.path.join(d, "procs-%s" % "-".join(lay))
            args = ["-b", "64", "-e", "64", "-n", "1", "-T", "1", "--ranks-per-gpu", str(rpg)] + lay
            what = "%s --ranks-per-gpu %d" % (" ".join(lay), rpg)
            env = {"MOCK_CUDA_DEVICES": str((nranks + rpg - 1) // rpg), "MOCK_CUDA_TRACE": trace}
            if mps:
                rc, out, err = run(bin_dir, "all_reduce", args, env, timeout=60)
                check(rc == 77 and out.strip().startswith("skipped: needs MPS: with --ranks-per-gpu "
                                                          "%d, processes share a GPU" % rpg) and
                      out.count("\n") == 1, "%s without MPS: skipped (%d)" % (what, rc), out + err)
                env["MOCK_CUDA_MPS"] = "1"
                if os.path.exists(trace):
                    os.unlink(trace)
            rc, out, err = run(bin_dir, "all_reduce", args, env, timeout=60)
            check(rc == 4 and "# Ranks per GPU: %d" % rpg in out, "%s: exit status %d" % (what, rc),
                  out + err)
            check_devices(what, out, trace, nranks, rpg)
    # Too few devices for the ranks; a CHOIR_RANKS_SHARE_GPU the caller set is kept.
    rc, out, err = run(bin_dir, "all_reduce", ["-b", "64", "-e", "64", "-g", "8", "--ranks-per-gpu",
                                               "4"], {"MOCK_CUDA_DEVICES": "1"})
    check(rc == 77 and "needs devices 0..1 but only 1" in out, "8 ranks at 4 per GPU on 1: %d" % rc,
          out + err)
    rc, out, err = run(bin_dir, "all_reduce", ["-b", "64", "-e", "64", "-g", "2", "--ranks-per-gpu",
                                               "2"], {"MOCK_CUDA_DEVICES": "1",
                                                      "CHOIR_RANKS_SHARE_GPU": "0"})
    check(rc == 0 and "# Ranks per GPU: 2 (CHOIR_RANKS_SHARE_GPU=0)" in out, "caller's value kept",
          out + err)
    rc, out, err = run(bin_dir, "all_reduce", ["-b", "64", "-e", "64", "-g", "2"])
    check(rc == 0 and "Ranks per GPU" not in out, "one rank per GPU: no header line", out + err)


def test_pose_hosts(bin_dir):
    """CHOIR_TEST_HOSTS=H with the launcher's processes: process p of n poses as host p * H / n
    (NCCL_HOSTID set in the child before the library starts); without it none is set."""
    os.environ.pop("NCCL_HOSTID", None)  # the caller's would be every process's
    os.environ.pop("CHOIR_TEST_HOSTS", None)
    with tempfile.TemporaryDirectory() as d:
        for hosts, want in (("2", {0: "perf-host-0", 1: "perf-host-0", 2: "perf-host-1",
                                   3: "perf-host-1"}),
                            (None, {r: "-" for r in range(4)})):
            trace = os.path.join(d, "hosts-%s" % hosts)
            env = {"MOCK_NCCL_HOSTS": trace, "MOCK_CUDA_DEVICES": "4"}
            if hosts:
                env["CHOIR_TEST_HOSTS"] = hosts
            # The mock cannot carry a collective between processes: the run ends at -T (exit
            # status 4), after every process's ncclCommInitRank.
            rc, out, err = run(bin_dir, "all_reduce", ["-b", "64", "-e", "64", "-n", "1", "-p", "4",
                                                       "-g", "1", "-T", "1"], env, timeout=60)
            what = "-p 4 with CHOIR_TEST_HOSTS=%s" % hosts
            check(rc == 4, "%s: exit status %d" % (what, rc), out + err)
            got = {}
            if os.path.exists(trace):
                for line in open(trace):
                    m = re.match(r"rank (\d+) host (\S+)$", line.strip())
                    if m:
                        got[int(m.group(1))] = m.group(2)
            check(got == want, "%s: hosts %s, expected %s" % (what, got, want))


def main():
    bin_dir = sys.argv[1]
    test_ranks_per_gpu(bin_dir)
    test_pose_hosts(bin_dir)
    test_output(bin_dir)
    test_faults(bin_dir)
    test_matrix(bin_dir)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("perf binaries on the CPU mock: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
