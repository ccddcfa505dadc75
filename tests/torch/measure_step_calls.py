#!/usr/bin/env python3
"""measure_step_calls.py CHROME.json...: what a torch job's steps do per thread, from
Chrome timelines of dpro-export (a measured trace: `dpro-export DIR -o FILE`) or of
dpro-optimize (a plan's simulated timeline: `dpro-optimize DIR --what-if ARGS --chrome
FILE`), to compare a plan with the applied run call by call.

A step runs from the end of one cudaDeviceSynchronize of the main thread (`python`) to the
end of the next; the last 15 steps of each rank count. Per file and rank: the median step,
the backward thread's (`pt_autograd_N`) span (its first call to the end of its last), its
stalls (calls and gaps between its calls over 100 us: a thread that waited or lost its
core) and, per thread and call name (streams: per operation name), the median count of
calls of non-zero length a step (a plan's dropped calls take no time). Counts do not
depend on the machine's load; spans and stalls do.

Written for the tiny-bucket case of the closed loop (docs/figures.md). Not a test."""
import collections
import json
import statistics
import sys

STEPS = 15
STALL_US = 100.0


def steps(path, pid):
    """Per step of rank pid: (step us, backward span, stalls, Counter of (thread, name))."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"].split(" (")[0] for e in ev
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == pid}
    xs = sorted((e for e in ev if e.get("ph") == "X" and e["pid"] == pid
                 and e.get("cat") != "iteration" and not names.get(e["tid"], "").startswith("NVTX")),
                key=lambda e: e["ts"])
    syncs = sorted(e["ts"] + e["dur"] for e in xs if e["name"] == "cudaDeviceSynchronize"
                   and names.get(e["tid"]) == "python")[-(STEPS + 1):]
    out = []
    for a, b in zip(syncs, syncs[1:]):
        inside = [e for e in xs if a <= e["ts"] < b]
        calls = collections.Counter((names.get(e["tid"], "?"), e["name"][:60])
                                    for e in inside if e["dur"] > 0)
        bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd")]
        span = stalls = 0.0
        if bwd:
            span = bwd[-1]["ts"] + bwd[-1]["dur"] - bwd[0]["ts"]
            stalls = sum(e["dur"] for e in bwd if e["dur"] > STALL_US)
            stalls += sum(y["ts"] - x["ts"] - x["dur"] for x, y in zip(bwd, bwd[1:])
                          if y["ts"] - x["ts"] - x["dur"] > STALL_US)
        out.append((b - a, span, stalls, calls))
    return out


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        for pid in (0, 1):
            st = steps(path, pid)
            if not st:
                continue
            med = statistics.median
            print("%s rank %d: %d steps; step %.0f us, backward span %.0f us, stalls %.0f us "
                  "(medians)" % (path, pid, len(st), med(s[0] for s in st), med(s[1] for s in st),
                                med(s[2] for s in st)))
            keys = sorted(set().union(*(s[3].keys() for s in st)))
            for k in keys:
                n = med(s[3][k] for s in st)
                if n > 0:
                    print("  %-14s %-60s %6.1f" % (k[0][:14], k[1], n))


if __name__ == "__main__":
    main(sys.argv[1:])
