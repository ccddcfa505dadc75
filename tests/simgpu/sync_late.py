#!/usr/bin/env python3
"""sync_late.py CHROME.json...: how late a torch job's closing synchronisations return, and
how long its cudaMemsetAsync calls take, from Chrome timelines of dpro-export
(`dpro-export DIR --chrome FILE`) of jobs on the simulated device.

Per file and rank: for the main thread's cudaDeviceSynchronize calls (the thread with the
most of them) that waited for the device (its last operation before the return, kernels,
memsets, copies, collectives, ended after the call; the last 15), the lateness (the
return less that end), median and the count over 500 us; for the cudaMemsetAsync calls
of 2 MB or more and of less (every thread), the median and largest duration and the
count over 100 us.  On a real GPU a synchronize returns microseconds after the last
operation's end, and a memset's call costs what a launch does (tests/simgpu/README.md,
"Host load", "Memsets").  Not a test."""
import collections
import json
import statistics
import sys

STEPS = 15
DEVICE_CATS = ("kernel", "memset", "memcpy", "collective")


def rank_stats(events, pid):
    """(lateness us list of the last STEPS syncs, memset durations us by big/small)."""
    xs = [e for e in events if e.get("ph") == "X" and e["pid"] == pid]
    syncs = collections.defaultdict(list)
    for e in xs:
        if e.get("cat") == "api" and e["name"] == "cudaDeviceSynchronize":
            syncs[e["tid"]].append(e)
    main = max(syncs, key=lambda t: len(syncs[t]))
    dev_ends = sorted((e["ts"] + e["dur"], e["ts"]) for e in xs if e.get("cat") in DEVICE_CATS)
    late = []
    for s in sorted(syncs[main], key=lambda e: e["ts"])[-STEPS:]:
        ret = s["ts"] + s["dur"]
        last = max((end for end, start in dev_ends if start < ret and end <= ret + 1),
                   default=None)
        if last is not None and last > s["ts"]:
            late.append(ret - last)
    sets = {"big": [], "small": []}
    for e in xs:
        if e.get("cat") == "api" and e["name"].startswith("cudaMemsetAsync"):
            big = e.get("args", {}).get("bytes", 0) >= 2 << 20
            sets["big" if big else "small"].append(e["dur"])
    return late, sets


def main(paths):
    for path in paths:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        for pid in sorted({e["pid"] for e in events if e.get("ph") == "X"}):
            late, sets = rank_stats(events, pid)
            line = "%s rank %d: syncs that waited: late median %.0f us, over 500 us in %d of %d" % (
                path, pid, statistics.median(late) if late else -1,
                sum(x > 500 for x in late), len(late))
            for k in ("big", "small"):
                d = sets[k]
                if d:
                    line += "; memsets %s %d: median %.1f us, max %.0f, over 100 us %d" % (
                        ">=2MB" if k == "big" else "<2MB", len(d), statistics.median(d),
                        max(d), sum(x > 100 for x in d))
            print(line)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
