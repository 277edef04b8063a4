#!/usr/bin/env python3
"""Draws a window of a Chrome trace (the JSON that Choir's trace plugin writes) as a timeline
picture, one lane per thread, one colour per event category, for the README and docs.

  trace_plot.py TRACE.json OUT.png [--from-us T | --at CAT] [--span-us S] [--max-lanes N]
                [--title TEXT]

The window starts T microseconds after the first event (default: the start of the last tenth of
the trace, where the timed loop runs), or --at CAT: a tenth of the span before the start of the
event of category CAT nine tenths of the way through them; it lasts S microseconds (default 300). With
--max-lanes, only the N lanes with the most events in the window are drawn; with --lanes RE,
only lanes whose name matches the regular expression. Complete events
("X") are drawn as bars, nested ones thinner, so that a Coll inside a Group stays visible.
Needs matplotlib (pip install matplotlib); checking a trace needs only trace_check.py."""
import argparse
import collections
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from-us", type=float, default=None)
    ap.add_argument("--span-us", type=float, default=300.0)
    ap.add_argument("--at", default=None)
    ap.add_argument("--max-lanes", type=int, default=0)
    ap.add_argument("--lanes", default=None)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("trace_plot.py: matplotlib is not installed (pip install matplotlib)")

    doc = json.load(open(a.trace))
    events = doc.get("traceEvents", doc) if isinstance(doc, dict) else doc
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    xs = [e for e in events if e.get("ph") == "X"]
    if not xs:
        sys.exit("trace_plot.py: no complete events in %s" % a.trace)
    t0 = min(e["ts"] for e in xs)
    t1 = max(e["ts"] + e["dur"] for e in xs)
    lo = t0 + (a.from_us if a.from_us is not None else 0.9 * (t1 - t0))
    if a.at is not None:
        at = sorted(e["ts"] for e in xs if e.get("cat") == a.at)
        if not at:
            sys.exit("trace_plot.py: no %s event in %s" % (a.at, a.trace))
        lo = at[len(at) * 9 // 10] - 0.1 * a.span_us
    hi = lo + a.span_us
    win = [e for e in xs if e["ts"] < hi and e["ts"] + e["dur"] > lo]
    if a.lanes is not None:
        pat = re.compile(a.lanes)
        win = [e for e in win if pat.search(names.get((e["pid"], e["tid"]), ""))]
    per_lane = collections.Counter((e["pid"], e["tid"]) for e in win)
    keep = per_lane if a.max_lanes <= 0 else dict(per_lane.most_common(a.max_lanes))
    win = [e for e in win if (e["pid"], e["tid"]) in keep]
    lanes = sorted(keep)
    cats = sorted({e.get("cat", e["name"]) for e in win})
    cmap = plt.get_cmap("tab20")
    colour = {c: cmap(i % 20) for i, c in enumerate(cats)}

    fig, ax = plt.subplots(figsize=(12, 0.9 + 0.55 * len(lanes)))
    for row, lane in enumerate(lanes):
        evs = sorted((e for e in win if (e["pid"], e["tid"]) == lane), key=lambda e: e["ts"])
        # Nesting depth per event: how many earlier events of the lane still contain it.
        open_ends = []
        for e in evs:
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            depth = len(open_ends)
            open_ends.append(e["ts"] + e["dur"])
            open_ends.sort(reverse=True)
            h = max(0.8 - 0.2 * depth, 0.2)
            s = max(e["ts"], lo) - lo
            w = min(e["ts"] + e["dur"], hi) - lo - s
            ax.broken_barh([(s, max(w, 0.05))], (row - h / 2, h),
                           facecolors=colour[e.get("cat", e["name"])], edgecolors="none")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([names.get(l, "pid %d tid %d" % l) for l in lanes], fontsize=8)
    ax.set_xlim(0, a.span_us)
    ax.set_xlabel("microseconds from %.0f us into the trace" % (lo - t0))
    ax.invert_yaxis()
    ax.set_title(a.title or a.trace.rsplit("/", 1)[-1], fontsize=10)
    ax.legend(handles=[Patch(color=colour[c], label=c) for c in cats], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("trace_plot.py: %s: %d events in %d lanes, %s" % (
        a.out, len(win), len(lanes),
        ", ".join("%s=%d" % kv for kv in collections.Counter(
            e.get("cat", e["name"]) for e in win).most_common())))


if __name__ == "__main__":
    main()
