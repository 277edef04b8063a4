#!/usr/bin/env python3
"""Header edits rebuild CUDA objects (issue 26).

Meson before 1.3 gives nvcc no depfile, so ninja knew no header of any .cu object: an edited
ref.h or kernel header left stale objects that still passed. kernels/meson.build's cu_wrap
compiles every .cu through a wrapper whose step records the headers (nvcc -M). This checks:

1. a scratch project (in a temporary folder, so the checkout is never touched): a .cu that
   includes a header, compiled through cu_wrap, and the same .cu compiled plainly; after
   touching the header, `ninja -n` must rebuild the wrapped object (and, with this Meson, says
   whether the plain one would have been: the hole);
2. this build: every CUDA object in build.ninja is compiled from a cu_wrap wrapper, and ninja's
   deps log (`ninja -t deps`) lists, for each, the project headers it includes.

usage: test_cu_deps.py BUILD_DIR SOURCE_DIR NVCC MESON NINJA
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

failures = []


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-3000:]), file=sys.stderr)


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    return p.returncode, p.stdout


SCRATCH_MESON = """project('cu_deps_scratch', 'c', 'cuda', meson_version: '>=1.0.0')
cu_wrap = [find_program('python3'), '{wrap}', '{nvcc}']
wrapped = custom_target('k.wrap.cu', input: 'k.cu', output: 'k.wrap.cu', depfile: 'k.wrap.cu.d',
  command: cu_wrap + ['@INPUT@', '@OUTPUT@', '@DEPFILE@', '-I' + meson.current_source_dir()])
static_library('wrapped', wrapped)
static_library('plain', 'k.cu')
"""


def scratch(src_dir, nvcc, meson, ninja):
    top = tempfile.mkdtemp(prefix="choir-cu-deps-")
    try:
        src = os.path.join(top, "src")
        os.mkdir(src)
        with open(os.path.join(src, "meson.build"), "w") as f:
            f.write(SCRATCH_MESON.format(wrap=os.path.join(src_dir, "kernels", "cu_wrap.py"),
                                         nvcc=nvcc))
        with open(os.path.join(src, "k.h"), "w") as f:
            f.write("#define K_VALUE 3\n")
        with open(os.path.join(src, "k.cu"), "w") as f:
            f.write('#include "k.h"\n__global__ void k(int* p) { *p = K_VALUE; }\n')
        env = dict(os.environ, NVCC=nvcc)
        rc, out = run([meson, "setup", os.path.join(top, "b"), src], env=env)
        check(rc == 0, "scratch project: meson setup", out)
        if rc != 0:
            return
        b = os.path.join(top, "b")
        rc, out = run([ninja, "-C", b])
        check(rc == 0, "scratch project: first build", out)
        rc, out = run([ninja, "-C", b, "-n"])
        check("no work to do" in out, "scratch project: a second build has nothing to do", out)
        # A header edit, one second later than everything built (coarse file systems).
        time.sleep(1.1)
        os.utime(os.path.join(src, "k.h"))
        rc, out = run([ninja, "-C", b, "-n", "-d", "explain"])
        rebuilt = [l for l in out.splitlines() if "Compiling Cuda object" in l]
        check(any("k.wrap.cu" in l for l in rebuilt),
              "scratch project: touching k.h does not rebuild the wrapped object", out)
        plain = any("plain" in l for l in rebuilt)
        print("scratch: after touching the header, ninja rebuilds the wrapped object; the plain "
              "one %s (Meson %s)" % ("too" if plain else "not (the hole cu_wrap closes)",
                                     run([meson, "--version"])[1].strip()))
    finally:
        shutil.rmtree(top, ignore_errors=True)


# Project headers each .cu of the build must be known to depend on (by file name).
EXPECTED = {
    "kern_copy.cu": ["kernels.h", "kern_coll.cuh", "kern_prims.cuh", "kern_reduce.cuh",
                     "nccl_types.h"],
    "kern_inst_": ["kernels.h", "kern_coll.cuh", "kern_prims.cuh", "kern_reduce_copy.cuh",
                   "nccl_types.h"],
    "kern_prims_test.cu": ["kern_prims.cuh", "kern_reduce.cuh", "kernels.h", "ref.h"],
    "perf_data.cu": ["perf_data.h", "perf_gen.h", "ref.h"],
    "test_ref_cuda.cu": ["ref.h"],
    "graph_floor.cu": [],  # CUDA's headers only
    "test_transport_kern.cu": ["test_transport_kern.h"],
    "test_memalloc_kern.cu": ["test_memalloc_kern.h"],
    "win_check_kern.cu": ["win_check_kern.h", "nccl_device.h", "nccl.h"],
    # test/abi: the probe against Choir's nccl_device.h and against NVIDIA's (both probe.h).
    "device_probe.cu": ["probe.h"],
    "device_usage.cu": ["nccl_device.h", "nccl.h"],
    "alone_nccl_device_h.cu": ["nccl_device.h", "nccl.h"],
}


def this_build(build, ninja):
    with open(os.path.join(build, "build.ninja")) as f:
        manifest = f.read()
    edges = re.findall(r"^build ([^:\n]+): cuda_COMPILER ([^\n|]+)", manifest, re.M)
    check(len(edges) >= 4, "build.ninja has %d CUDA compile steps" % len(edges))
    for obj, src in edges:
        src = src.strip()
        check(src.endswith(".wrap.cu"), "%s is compiled from %s, not a cu_wrap wrapper" % (obj, src))
        if not src.endswith(".wrap.cu"):
            continue
        rc, out = run([ninja, "-C", build, "-t", "deps", src])
        names = [os.path.basename(l.strip()) for l in out.splitlines()[1:]]
        real = names[0] if names else "?"
        if "#deps 0" in out or "deps not found" in out or rc != 0:
            check(False, "%s: ninja knows no dependencies (not built yet?)" % src, out)
            continue
        want = next((v for k, v in EXPECTED.items() if real.startswith(k)), None)
        check(want is not None, "%s wraps %s, which this test does not know" % (src, real), out)
        missing = [h for h in (want or []) if h not in names]
        check(not missing, "%s (%s): ninja does not know it depends on %s" % (src, real, missing),
              out)
        if want and not missing:
            print("%s: %d dependencies, including %s" % (real, len(names) - 1, ", ".join(want)))


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    build, src, nvcc, meson, ninja = sys.argv[1:]
    scratch(src, nvcc, meson, ninja)
    this_build(build, ninja)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("cu-deps: header edits rebuild every CUDA object")
    return 0


if __name__ == "__main__":
    sys.exit(main())
