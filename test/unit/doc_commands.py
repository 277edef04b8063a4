#!/usr/bin/env python3
"""The commands the README and docs/ show that need no GPU, run as written.

Each entry names the file that shows the command and the command itself; the command must
appear in that file verbatim (so a reworded document fails here until this list follows it),
and it must exit 0 when run from the source root, with the leading `build/` of every path
replaced by this build's directory. Commands that need a GPU, PyTorch or MPI are not listed;
`meson setup build && ninja -C build` is what CI itself runs.

    doc_commands.py SOURCE_ROOT BUILD_DIR
"""
import os
import re
import shlex
import subprocess
import sys

COMMANDS = [
    ("README.md", "build/core/info/choir-info", "Choir"),
    ("docs/knobs.md", "choir-info --markdown", "# Knobs"),
    ("docs/support.md", "choir-run --print", "libnccl.so.2"),
    ("docs/plugins.md",
     "build/test/plugin/net-conformance --list build/plugins/libnccl-net-socket.so",
     "connect-first"),
]


def main():
    root, build = sys.argv[1], os.path.abspath(sys.argv[2])
    failed = 0
    for doc, cmd, expect in COMMANDS:
        text = open(os.path.join(root, doc), encoding="utf-8").read()
        if cmd not in text:
            print(f"FAIL {doc}: no longer shows `{cmd}`: update test/unit/doc_commands.py")
            failed += 1
            continue
        argv = shlex.split(cmd)
        # Bare tool names (as the prose writes them) are the build's own.
        tools = {"choir-info": "build/core/info/choir-info", "choir-run": "build/choir-run"}
        argv[0] = tools.get(argv[0], argv[0])
        argv = [re.sub(r"^build/", build + "/", a) for a in argv]
        try:
            r = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"FAIL {doc}: `{cmd}` could not run: {e}")
            failed += 1
            continue
        if r.returncode != 0 or expect not in r.stdout:
            print(f"FAIL {doc}: `{cmd}` exited {r.returncode}, output lacks {expect!r}:\n"
                  f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
            failed += 1
        else:
            print(f"ok   {doc}: `{cmd}`")
    print(f"{len(COMMANDS) - failed}/{len(COMMANDS)} documented commands ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
