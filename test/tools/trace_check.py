#!/usr/bin/env python3
"""Checks Chrome trace files (the JSON "traceEvents" format that Perfetto and chrome://tracing
load) against the format's rules, and prints what each holds.

  trace_check.py FILE...   one line per file: OK or the first problems, then the event names
                           with their counts; exit 1 if any file breaks a rule.

Rules: the document is an object with a "traceEvents" list (or a bare list); every event is an
object with a string "name" and a known "ph"; every event but metadata ("M") has numeric "ts",
"pid" and "tid"; complete events ("X") have a numeric "dur" >= 0; begin/end pairs ("B"/"E") nest
per (pid, tid) and none is left open; instants ("i"/"I") have a scope "s" of g, p or t when
given; metadata names are the known ones with an "args" object."""
import collections
import json
import sys

PHASES = set("XBEiIMCbenstfPOND")
META = {"process_name", "process_labels", "process_sort_index", "thread_name",
        "thread_sort_index"}


def check(path):
    problems = []
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return ["not JSON: %s" % e], collections.Counter()
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return ["no traceEvents list"], collections.Counter()
    names = collections.Counter()
    open_b = collections.defaultdict(list)
    for k, e in enumerate(events):
        where = "event %d" % k
        if not isinstance(e, dict):
            problems.append("%s is not an object" % where)
            continue
        ph, name = e.get("ph"), e.get("name")
        if ph not in PHASES:
            problems.append("%s: phase %r" % (where, ph))
            continue
        if not isinstance(name, str):
            problems.append("%s: no name" % where)
        names[name] += 1
        if ph == "M":
            if name not in META or not isinstance(e.get("args"), dict):
                problems.append("%s: metadata %r without args" % (where, name))
            continue
        for key in ("ts", "pid", "tid"):
            if not isinstance(e.get(key), (int, float)):
                problems.append("%s (%s): %s is %r" % (where, name, key, e.get(key)))
        if ph == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            problems.append("%s (%s): dur %r" % (where, name, e.get("dur")))
        if ph in "iI" and e.get("s", "t") not in ("g", "p", "t"):
            problems.append("%s (%s): scope %r" % (where, name, e.get("s")))
        key = (e.get("pid"), e.get("tid"))
        if ph == "B":
            open_b[key].append(name)
        elif ph == "E":
            if not open_b[key]:
                problems.append("%s (%s): end without begin on %s" % (where, name, key))
            else:
                open_b[key].pop()
    for key, stack in open_b.items():
        if stack:
            problems.append("%d begin(s) never ended on %s" % (len(stack), key))
    return problems, names


def main():
    bad = 0
    for path in sys.argv[1:]:
        problems, names = check(path)
        counts = ", ".join("%s=%d" % kv for kv in sorted(names.items(), key=lambda kv: str(kv[0])))
        if problems:
            bad += 1
            print("%s: %d problem(s): %s; events: %s" % (path, len(problems),
                                                         "; ".join(problems[:5]), counts))
        else:
            print("%s: OK, %d events: %s" % (path, sum(names.values()), counts))
    return 1 if bad or not sys.argv[1:] else 0


if __name__ == "__main__":
    sys.exit(main())
