#!/usr/bin/env python3
"""Unit test of test/perf/compare, driven with the perf binaries linked with the CPU mock: the
alternating runs, the table, the CSV, failure reporting, the command lines it builds, and its
argument checks. With --ranks-per-gpu, a reference library that refuses ranks sharing a GPU (as
NVIDIA's NCCL does; here a wrapper around the mock binary that fails as the real one does when
its LD_LIBRARY_PATH is library B's) shows as "refused", with library A's figures alone.

usage: test_compare.py COMPARE_SCRIPT MOCK_BIN_DIR
"""

import csv
import json
import os
import stat
import subprocess
import sys
import tempfile

# What all_reduce_perf prints when NVIDIA's NCCL refuses two ranks on one GPU (the header, then
# the failing call with ncclGetLastError's text).
NVIDIA_REFUSAL = """#!/bin/sh
case "$LD_LIBRARY_PATH:$*" in
  {refuser}*--ranks-per-gpu*)
    echo "# Collective test starting: all_reduce_perf"
    echo "all_reduce_perf: process 0 thread 0: ncclCommInitAll(comms, ctx->ngpus, devs) failed:" \
         "invalid usage, last error: 'Duplicate GPU detected : rank 1 and rank 0 both on CUDA" \
         "device 1000' (perf_run.c:800), during ncclCommInitAll of 4 devices" >&2
    exit 3 ;;
esac
exec {real} "$@"
"""


def refusing_bin_dir(d, bin_dir, refuser):
    """A bin dir whose all_reduce_perf refuses shared GPUs under the library dir `refuser`."""
    wrap = os.path.join(d, "wrap-" + os.path.basename(refuser))
    os.makedirs(wrap)
    path = os.path.join(wrap, "all_reduce_perf")
    with open(path, "w") as f:
        f.write(NVIDIA_REFUSAL.format(refuser=refuser,
                                      real=os.path.join(bin_dir, "all_reduce_perf")))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return wrap

failures = []


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-3000:]), file=sys.stderr)


def run(compare, args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MOCK_")}
    e.update(env or {})
    p = subprocess.run([sys.executable, compare] + args, env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    compare, bin_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        lib_a, lib_b, out_dir = (os.path.join(d, x) for x in ("liba", "libb", "out"))
        os.makedirs(lib_a)
        os.makedirs(lib_b)
        common = ["--bin-dir", bin_dir, "--lib-a", lib_a, "--lib-b", lib_b, "--name-a", "choir",
                  "--name-b", "nccl", "--ngpus", "2", "-b", "8", "-e", "128K", "-f", "8",
                  "-n", "2", "--out", out_dir]
        rc, out, err = run(compare, common + ["--ops", "all_reduce,broadcast", "--repeat", "2",
                                              "-c", "1"])
        check(rc == 0, "compare exit status %d" % rc, out + err)
        runs = [l for l in out.splitlines() if l.startswith("# [")]
        labels = [l.split("]")[0][3:] for l in runs]
        # 2 operations x 2 repeats x 2 libraries, alternating A B, then B A.
        check(labels == ["choir", "nccl", "nccl", "choir"] * 2, "run order %s" % labels, out)
        with open(os.path.join(out_dir, "all_reduce-nccl-0.json")) as f:
            env = json.load(f)["env"]
        check("NCCL_NVLS_ENABLE=0" in env and
              any(v.startswith("LD_LIBRARY_PATH=" + lib_b) for v in env),
              "children run with NVLS off and library B first", str(env))
        check(all(("LD_LIBRARY_PATH=" + (lib_a if lab == "choir" else lib_b)) in l
                  for l, lab in zip(runs, labels)), "LD_LIBRARY_PATH per library", out)
        check("== all_reduce, 2 GPUs, out-of-place" in out and "== broadcast, 2 GPUs" in out,
              "tables", out)
        check("choir/nccl" in out and "geometric mean" in out, "ratio columns", out)
        with open(os.path.join(out_dir, "compare.csv")) as f:
            lines = [l for l in f if not l.startswith("#")]
        rows = list(csv.DictReader(lines))
        sizes = sorted({int(r["size"]) for r in rows if r["op"] == "all_reduce"})
        check(sizes == [8, 64, 512, 4096, 32768], "CSV sizes %s" % sizes, "".join(lines))
        check(len(rows) == 10, "CSV rows: %d" % len(rows), "".join(lines))
        for r in rows:
            want = "time" if int(r["size"]) < 65536 else "busbw"
            check(r["metric"] == want and float(r["ratio"]) > 0 and
                  float(r["a_value"]) > 0 and float(r["b_value"]) > 0 and
                  r["a_wrong"] == "0" and r["b_wrong"] == "0", "CSV row %s" % r)
        check(os.path.exists(os.path.join(out_dir, "all_reduce-choir-1.json")),
              "raw JSON kept", str(os.listdir(out_dir)))

        # An environment for one library only (a net plugin for A, B's own transport): each
        # run gets its own, and the commands shown say so; NVLS stays off whatever is asked.
        rc, out, err = run(compare, common + ["--ops", "all_reduce", "--env-a",
                                              "NCCL_NET_PLUGIN=/x/libnccl-net-ofi.so", "--env-b",
                                              "NCCL_NET=Socket", "--env-b", "NCCL_NVLS_ENABLE=1"])
        check(rc == 0, "--env-a/--env-b: exit status %d" % rc, out + err)
        envs = {}
        for lab in ("choir", "nccl"):
            with open(os.path.join(out_dir, "all_reduce-%s-0.json" % lab)) as f:
                envs[lab] = json.load(f)["env"]
        check("NCCL_NET_PLUGIN=/x/libnccl-net-ofi.so" in envs["choir"] and
              not any(v.startswith("NCCL_NET=") for v in envs["choir"]),
              "library A's environment", str(envs["choir"]))
        check("NCCL_NET=Socket" in envs["nccl"] and "NCCL_NVLS_ENABLE=0" in envs["nccl"] and
              not any(v.startswith("NCCL_NET_PLUGIN=") for v in envs["nccl"]),
              "library B's environment", str(envs["nccl"]))
        shown = [l for l in out.splitlines() if l.startswith("# [")]
        check(any(l.startswith("# [choir]") and " NCCL_NET_PLUGIN=/x/libnccl-net-ofi.so " in l
                  for l in shown) and
              any(l.startswith("# [nccl]") and " NCCL_NET=Socket " in l for l in shown),
              "commands show each library's environment", out)
        rc, out, err = run(compare, common + ["--ops", "all_reduce", "--env-a", "NO_EQUALS",
                                              "--dry-run"])
        check(rc == 2 and "--env-a: not KEY=VALUE: 'NO_EQUALS'" in err,
              "a malformed --env-a is refused (%d)" % rc, out + err)
        rc, out, err = run(compare, common + ["--ops", "all_reduce", "--procs", "2", "--dry-run",
                                              "--mpirun", "mpirun", "--env-a", "UCX_TLS=tcp"])
        check(rc == 0 and "-x NCCL_NVLS_ENABLE -x UCX_TLS " in out,
              "mpirun exports library A's variables", out + err)

        rc, out, err = run(compare, common + ["--ops", "reduce", "-c", "1"],
                           {"MOCK_NCCL_CORRUPT": "1"})
        check(rc == 1 and "WRONG" in out and "had wrong results" in err,
              "wrong results fail the comparison (%d)" % rc, out + err)

        rc, out, err = run(compare, common + ["--ops", "all_reduce", "--timeout", "1"],
                           {"MOCK_NCCL_HANG": "0"})
        check(rc == 1 and "failed (exit status 4)" in err, "a hung run is reported (%d)" % rc,
              out + err)

        # 8 GPUs (issue 8's machine): one process driving 8, and one process per GPU
        rc, out, err = run(compare, common + ["--ngpus", "8", "--ops", "all_reduce,alltoall",
                                              "-c", "1"])
        check(rc == 0 and "== all_reduce, 8 GPUs, out-of-place" in out and
              "== alltoall, 8 GPUs" in out and " -g 8 " in out, "8 GPUs (%d)" % rc, out + err)
        rc, out, err = run(compare, common + ["--ngpus", "8", "--procs", "8", "--ops", "all",
                                              "--dry-run"])
        cmds = [l for l in out.splitlines() if l.startswith("# [")]
        check(rc == 0 and len(cmds) == 18 and all(" -p 8 " in c and " -g 1 " in c for c in cmds),
              "dry run, 8 processes: %d commands" % len(cmds), out + err)

        rc, out, err = run(compare, common + ["--ops", "all", "--procs", "2", "--dry-run"])
        cmds = [l for l in out.splitlines() if l.startswith("# [")]
        check(rc == 0 and len(cmds) == 18, "dry run: %d commands" % len(cmds), out + err)
        check(all(" -p 2 " in c and " -g 1 " in c and " -J " in c and " -T " in c for c in cmds),
              "dry run: process layout", out)
        rc, out, err = run(compare, common + ["--ops", "all_reduce", "--procs", "2", "--dry-run",
                                              "--mpirun", "mpirun --allow-run-as-root"])
        check(rc == 0 and "mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x "
              "NCCL_NVLS_ENABLE" in out and "all_reduce_perf_mpi" in out, "mpirun command", out)

        # One rank (the one-rank bar of issue 17): busbw is 0 by definition, so sizes from
        # --small compare algbw, with a real ratio.
        one = list(common)
        one[one.index("--ngpus") + 1] = "1"
        one[one.index("-e") + 1] = "1M"
        rc, out, err = run(compare, one + ["--ops", "all_reduce", "-c", "1"])
        with open(os.path.join(out_dir, "compare.csv")) as f:
            rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
        big = [r for r in rows if int(r["size"]) >= 65536]
        check(rc == 0 and "== all_reduce, 1 GPU, out-of-place" in out and "algbw in GB/s" in out
              and "algbw ratio choir/nccl" in out and len(big) == 1 and
              big[0]["metric"] == "algbw" and float(big[0]["ratio"]) > 0,
              "one rank: algbw compared (%d)" % rc, out + err)
        # Ranks sharing a GPU: both runs get --ranks-per-gpu and -g counts ranks.
        rc, out, err = run(compare, common + ["--ngpus", "1", "--ranks-per-gpu", "4", "--procs",
                                              "2", "--ops", "all", "--dry-run"])
        cmds = [l for l in out.splitlines() if l.startswith("# [")]
        check(rc == 0 and len(cmds) == 18 and
              all(" -p 2 " in c and " -g 2 " in c and " --ranks-per-gpu 4" in c for c in cmds),
              "dry run, 4 ranks on 1 GPU in 2 processes", out + err)
        # The reference refuses (as NVIDIA's NCCL does): its column says so, no ratio, no failure.
        common_rpg = [x if x != bin_dir else refusing_bin_dir(d, bin_dir, lib_b) for x in common]
        common_rpg[common_rpg.index("--ngpus") + 1] = "1"
        rc, out, err = run(compare, common_rpg + ["--ranks-per-gpu", "4", "--ops", "all_reduce",
                                                  "-c", "1", "--repeat", "2"],
                           {"MOCK_CUDA_DEVICES": "1"})
        check(rc == 0, "reference refuses shared GPUs: exit status %d" % rc, out + err)
        check("== all_reduce, 1 GPU, 4 ranks per GPU, out-of-place" in out, "title", out)
        line = [l for l in out.splitlines() if l.startswith("   nccl: refused: ")]
        check(len(line) == 1 and line[0].startswith(
            "   nccl: refused: nccl does not run ranks that share a GPU (as NVIDIA's NCCL never "
            "does): ") and "Duplicate GPU detected : rank 1 and rank 0" in line[0],
            "refusal line", out)
        table = [l.split() for l in out.splitlines() if l.strip() and l.split()[0].isdigit()]
        check(len(table) == 5 and all(t[4] != "refused" and float(t[4]) > 0 and
                                      t[5] == "refused" and t[6] == "n/a" for t in table),
              "rows: choir's figure, nccl refused, no ratio: %s" % table, out)
        check("geometric mean" not in out and "nan" not in out.lower(), "no ratio summary", out)
        check(err.count("nccl refused ranks that share a GPU") == 2 and
              "compare: failed" not in err,
              "refusal reported, not as a failure", err)
        with open(os.path.join(out_dir, "compare.csv")) as f:
            rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
        check(len(rows) == 5 and all(r["b_value"] == "" and r["note"] == "nccl refused shared GPUs"
                                     and float(r["a_value"]) > 0 for r in rows),
              "CSV rows with the refusal", str(rows))
        # Library A refusing is a failure.
        common_a = [x if x != bin_dir else refusing_bin_dir(d, bin_dir, lib_a) for x in common]
        rc, out, err = run(compare, common_a + ["--ranks-per-gpu", "2", "--ops", "all_reduce"])
        check(rc == 1 and "choir: refused" in out and
              "failed: all_reduce with choir (repeat 0): refused ranks that share a GPU" in err,
              "library A refusing fails the comparison (%d)" % rc, out + err)

        for bad, msg in ((["--ops", "allreduce"], "unknown operation 'allreduce'"),
                         (["--ngpus", "3", "--procs", "2"], "--ngpus must be a positive multiple"),
                         (["--ngpus", "1", "--ranks-per-gpu", "3", "--procs", "2"],
                          "--ngpus x --ranks-per-gpu (the ranks) must be a positive multiple"),
                         (["--ranks-per-gpu", "0"], "--ranks-per-gpu must be at least 1"),
                         (["--repeat", "0"], "--repeat must be at least 1"),
                         (["--small", "lots"], "--small: not a size")):
            rc, out, err = run(compare, common + bad)
            check(rc == 2 and msg in err, "argument error %s" % bad, err)
        rc, out, err = run(compare, ["--lib-a", "/nonexistent", "--lib-b", lib_b])
        check(rc == 2 and "--lib-a: no such directory" in err, "missing library directory", err)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("compare: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
