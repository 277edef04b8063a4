#!/usr/bin/env python3
"""torch_check.py's library guard on the CPU: run under choir-run (Choir's libnccl.so.2
preloaded), it must find nothing wrong; then each way another NCCL can get in must be named:
a libnccl* file outside Choir's directory (a plugin from elsewhere), Choir expected at another
path (the calls resolve outside it), and no NCCL at all (a process without the preload); a copy
at NVIDIA's wheel path (nvidia/nccl/lib) that no call reaches, as torch's wheel maps it, is a note.

usage: choir-run python3 test_library_guard.py LIBNCCL SANITIZED
(SANITIZED=true: skipped, an ASan-built library cannot be preloaded into python)."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_check  # noqa: E402

passed = failed = 0


def expect(name, problems, want):
    """problems must be exactly as many as want, each containing its want string."""
    global passed, failed
    ok = len(problems) == len(want) and all(
        any(w in p for p in problems) for w in want)
    if ok:
        passed += 1
        print("ok: %s" % name)
    else:
        failed += 1
        print("FAIL: %s: problems %s, want %d containing %s" % (name, problems, len(want), want))


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    lib, sanitized = sys.argv[1:]
    if sanitized == "true":
        print("skipped: sanitized build (its library needs the ASan runtime loaded first)")
        return 77
    real = os.path.realpath(lib)
    if os.environ.get("LD_PRELOAD", "").split(":")[0] != lib:
        print("FAIL: run me under choir-run (LD_PRELOAD is %r)" % os.environ.get("LD_PRELOAD"))
        return 1

    expect("Choir preloaded: nothing wrong", torch_check.library_problems(lib, need_torch=False), [])
    # Where the process looks for NCCL's symbols, Choir's library must answer.
    expect("every entry point torch uses resolves into Choir",
           [p for p in torch_check.library_problems(lib, need_torch=False) if "resolved" in p], [])

    with tempfile.TemporaryDirectory() as tmp:
        # Choir expected somewhere else: the mapped one is then another libnccl.
        other = os.path.join(tmp, "other", "libnccl.so.2")
        os.makedirs(os.path.dirname(other))
        shutil.copy(real, other)
        expect("expected at another path", torch_check.library_problems(other, need_torch=False),
               ["%s is not mapped" % other, "another libnccl is mapped: %s" % real,
                "resolved outside %s in the scope of the process: ncclGetVersion -> %s"
                % (other, real)])

        # No NCCL at all: a process without the preload.
        env = dict(os.environ)
        env.pop("LD_PRELOAD")
        code = ("import sys; sys.path.insert(0, %r); import torch_check; "
                "print('\\n'.join(torch_check.library_problems(%r, need_torch=False)))"
                % (os.path.dirname(os.path.abspath(__file__)), lib))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=False).stdout.splitlines()
        expect("no preload: Choir missing, nothing answers ncclGetVersion", out,
               ["%s is not mapped" % real,
                "not defined in the scope of the process: ncclGetVersion, ncclGetUniqueId"])

        # A plugin-named file from outside Choir's directory (a copy of the library will do).
        stray = os.path.join(tmp, "libnccl-net-stray.so")
        shutil.copy(real, stray)
        ctypes.CDLL(stray, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        expect("libnccl* from elsewhere", torch_check.library_problems(lib, need_torch=False),
               ["a libnccl* file from elsewhere is mapped: %s" % stray])

        # A second libnccl.so.2 at the path of NVIDIA's wheel, loaded by its path (which the
        # loader does not match by soname).
        nvidia = os.path.join(tmp, "site-packages", "nvidia", "nccl", "lib", "libnccl.so.2")
        os.makedirs(os.path.dirname(nvidia))
        shutil.copy(real, nvidia)
        ctypes.CDLL(nvidia, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        # torch's wheel maps NVIDIA's copy this way; as long as no call reaches it, it is a note.
        notes = []
        expect("NVIDIA's wheel path", torch_check.library_problems(lib, notes, need_torch=False),
               ["a libnccl* file from elsewhere is mapped: %s" % stray])
        expect("NVIDIA's wheel path noted", notes, ["NVIDIA's NCCL is mapped (unused): %s" % nvidia])
    print("torch library guard: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
