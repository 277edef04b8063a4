#!/usr/bin/env python3
"""Summarise CHOIR_PROXY_TRACE files: where the time of the network path goes.

Run a job with CHOIR_PROXY_TRACE=/tmp/tr/t (one file per proxy, written at communicator
destruction: lines "ns event rank peer id slot bytes"), then:

    test/perf/proxy_trace.py /tmp/tr/t

Events: SP the proxy handed a slot to isend, SD the send completed, RP an irecv was posted, RD the
receive completed and the kernel was told, LB/LE a launch began/ended (host side). Clocks are
CLOCK_MONOTONIC, so hops between ranks are only meaningful for ranks of one host.

Printed (microseconds, p10/p50/p90/mean):
  hop      SP on the sender to RD on the receiver, same connection and slot
  send     SP to SD on the sender (a helper thread waking up shows here)
  turn     RD to the next SP of the same rank and channel: the kernel's step plus the proxy
           noticing it; split into steps inside an operation and the first step of the next one
           (launch gaps), using the ring's 2 * (ranks - 1) sends per channel and operation
"""
import collections
import glob
import statistics
import sys


def load(prefix):
    ev = []
    for path in glob.glob(prefix + "*"):
        with open(path) as f:
            for line in f:
                ns, e, r, peer, cid, slot, nbytes = line.split()
                ev.append((int(ns), e, int(r), int(peer), int(cid), int(slot), int(nbytes)))
    ev.sort()
    return ev


def stats(v):
    if not v:
        return "n/a"
    v = sorted(v)
    n = len(v)
    return "n=%d p10=%.1f p50=%.1f p90=%.1f mean=%.1f" % (
        n, v[n // 10] / 1e3, v[n // 2] / 1e3, v[9 * n // 10] / 1e3, statistics.mean(v) / 1e3)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ev = load(sys.argv[1])
    if not ev:
        print("no trace files match %s*" % sys.argv[1])
        return 1
    at = collections.defaultdict(dict)  # (sender, receiver, channel, slot) -> {event: ns}
    for ns, e, r, peer, cid, slot, _ in ev:
        if e in ("SP", "SD"):
            at[(r, peer, cid, slot)][e] = ns
        elif e in ("RP", "RD"):
            at[(peer, r, cid, slot)][e] = ns
    hop = [v["RD"] - v["SP"] for v in at.values() if "SP" in v and "RD" in v]
    send = [v["SD"] - v["SP"] for v in at.values() if "SP" in v and "SD" in v]
    nranks = len({x[2] for x in ev})
    steps = max(1, 2 * (nranks - 1))
    inside, first = [], []
    last_rd = {}
    for ns, e, r, _, cid, slot, _ in ev:
        if e == "RD":
            last_rd[(r, cid)] = ns
        elif e == "SP" and (r, cid) in last_rd:
            (first if slot % steps == 0 else inside).append(ns - last_rd.pop((r, cid)))
    sizes = collections.Counter(x[6] for x in ev if x[1] == "SP")
    print("ranks %d, sends by size %s" % (nranks, sizes.most_common(4)))
    print("hop   SP->RD (us):            %s" % stats(hop))
    print("send  SP->SD (us):            %s" % stats(send))
    print("turn  RD->SP in an op (us):   %s" % stats(inside))
    print("turn  RD->SP next op (us):    %s" % stats(first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
