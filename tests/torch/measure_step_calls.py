#!/usr/bin/env python3
"""measure_step_calls.py CHROME.json...: what a torch job's steps do per thread, from
Chrome timelines of dpro-export (a measured trace: `dpro-export DIR -o FILE`) or of
dpro-optimize (a plan's simulated timeline: `dpro-optimize DIR --what-if ARGS --chrome
FILE`), to compare a plan with the applied run call by call.

A step runs from the end of one cudaDeviceSynchronize of the main thread (`python`) to the
end of the next; the last 15 steps of each rank count. Per file and rank: the median step,
the backward thread's (`pt_autograd_N`) span (its first call to the end of its last), its
stalls (calls and gaps between its calls over 100 us: a thread that waited or lost its
core), the closing wait (how long the main thread's last cudaDeviceSynchronize of the step
returned after the step's last device operation ended: work the timeline does not show,
on tests/simgpu the collectives' data moved by the host), per thread and stream the median
busy time a step (the sum of its calls' or operations' durations) and, per thread and call
name (streams: per operation name), the median count of calls of non-zero length a step (a
plan's dropped calls take no time). Counts do not depend on the machine's load; spans,
stalls, waits and host busy times do.

With --gates SUBSTRING first: per file, rank 0's last 3 steps, how many of the backward
thread's launches of kernels whose name holds SUBSTRING precede each all-reduce call
(`nccl:allreduce`; launches linked to their kernels by the timeline's flows): where in the
backward each bucket's all-reduce starts, counted in DDP's copies into the buckets
(SUBSTRING `AUnaryFunctor`), for a plan and the applied run alike.

With --decompose first: per file and rank, the medians over the last steps of where a step's
time goes, for a captured step's plan against its applied run: `submit`, the window's
start to the end of the main thread's last call before its closing synchronisation (the
Python, the input's copy, the graph launch or the plan's stand-in for it); `device`, from
there to the end of the step's last device op; `tail`, from that end to the closing
synchronisation's return (the host's wake-up); and the device ops' busy time (their
union) and span (first start to last end), which load hardly moves on the simulated device.

Written for the bucket cases of the closed loop (docs/figures.md, docs/models.md). Not a
test."""
import collections
import json
import statistics
import sys

STEPS = 15
STALL_US = 100.0


def step_events(path, pid):
    """Per step of rank pid (the last STEPS): (step us, its complete events by start, the
    names of the threads by tid)."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"].split(" (")[0] for e in ev
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == pid}
    xs = sorted((e for e in ev if e.get("ph") == "X" and e["pid"] == pid
                 and e.get("cat") != "iteration" and not names.get(e["tid"], "").startswith("NVTX")),
                key=lambda e: e["ts"])
    syncs = sorted(e["ts"] + e["dur"] for e in xs if e["name"] == "cudaDeviceSynchronize"
                   and names.get(e["tid"]) == "python")[-(STEPS + 1):]
    return [(b - a, [e for e in xs if a <= e["ts"] < b], names) for a, b in zip(syncs, syncs[1:])]


def closing_wait(inside, names):
    """How long the step's closing cudaDeviceSynchronize (the main thread's last) returned
    after the later of its start and the end of the step's last device operation: a wait
    for work the timeline does not show."""
    syncs = [e for e in inside if e["name"] == "cudaDeviceSynchronize"
             and names.get(e["tid"]) == "python"]
    dev = [e["ts"] + e["dur"] for e in inside
           if not names.get(e["tid"], "?").startswith(("python", "pt_autograd"))]
    if not syncs or not dev:
        return 0.0
    s = syncs[-1]
    return max(0.0, s["ts"] + s["dur"] - max(s["ts"], max(dev)))


def steps(path, pid):
    """Per step of rank pid: (step us, backward span, stalls, Counter of (thread, name),
    Counter of busy us by thread, closing wait)."""
    out = []
    for step, inside, names in step_events(path, pid):
        calls = collections.Counter((names.get(e["tid"], "?"), e["name"][:60])
                                    for e in inside if e["dur"] > 0)
        busy = collections.Counter()
        for e in inside:
            busy[names.get(e["tid"], "?")] += e["dur"]
        bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd")]
        span = stalls = 0.0
        if bwd:
            span = bwd[-1]["ts"] + bwd[-1]["dur"] - bwd[0]["ts"]
            stalls = sum(e["dur"] for e in bwd if e["dur"] > STALL_US)
            stalls += sum(y["ts"] - x["ts"] - x["dur"] for x, y in zip(bwd, bwd[1:])
                          if y["ts"] - x["ts"] - x["dur"] > STALL_US)
        out.append((step, span, stalls, calls, busy, closing_wait(inside, names)))
    return out


def gates(path, sub):
    """Per step of rank 0 with all-reduces (the last 3): the launches of kernels named with
    sub before each all-reduce call of the backward thread."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == 0}
    xs = [e for e in ev if e.get("ph") == "X" and e["pid"] == 0 and e.get("cat") != "iteration"]
    bwd = [t for t, n in names.items() if n.startswith("pt_autograd")]
    at = {(e["tid"], round(e["ts"], 2)): e for e in xs}
    ends = {e["id"]: e for e in ev if e.get("ph") == "f" and e.get("pid") == 0}
    launches = sorted(e["ts"] for e in ev if e.get("ph") == "s" and e.get("pid") == 0
                      and e["tid"] in bwd and e["id"] in ends
                      and sub in at.get((ends[e["id"]]["tid"], round(ends[e["id"]]["ts"], 2)),
                                        {}).get("name", ""))
    syncs = sorted(e["ts"] + e["dur"] for e in xs if e["name"] == "cudaDeviceSynchronize"
                   and names.get(e["tid"], "").startswith("python"))
    out = []
    for a, b in zip(syncs, syncs[1:]):
        calls = sorted(e["ts"] for e in xs if e["tid"] in bwd and e["name"] == "nccl:allreduce"
                       and a <= e["ts"] < b)
        if calls:
            out.append([sum(1 for t in launches if a <= t < c) for c in calls])
    return out[-3:]


def decompose(path, pid):
    """Per step of rank pid: (step, submit, device, tail, busy, span) in us (the docstring)."""
    out = []
    for step, inside, names in step_events(path, pid):
        dev = [e for e in inside if names.get(e["tid"], "").startswith("stream") and e["dur"] > 0]
        main = [e for e in inside if names.get(e["tid"]) == "python" and e["dur"] > 0]
        if not dev or len(main) < 2:
            continue
        t0 = inside[0]["ts"]
        # the window starts at the previous synchronisation's end: the first event's start
        # may lie later; the step's duration places it
        t0 = main[-1]["ts"] + main[-1]["dur"] - step
        submit = main[-2]["ts"] + main[-2]["dur"]
        last = max(e["ts"] + e["dur"] for e in dev)
        busy = end = 0.0
        for e in sorted(dev, key=lambda e: e["ts"]):
            a, b = max(e["ts"], end), e["ts"] + e["dur"]
            busy += max(0.0, b - a)
            end = max(end, b)
        out.append((step, submit - t0, last - submit, t0 + step - last, busy,
                    last - min(e["ts"] for e in dev)))
    return out


def main(paths):
    if len(paths) > 1 and paths[0] == "--decompose":
        for path in paths[1:]:
            for pid in (0, 1):
                parts = decompose(path, pid)
                if parts:
                    med = [statistics.median(p[i] for p in parts) for i in range(6)]
                    print("%s rank %d: %d steps; step %.0f us = submit %.0f + device %.0f + tail "
                          "%.0f (medians); device busy %.0f us, span %.0f us"
                          % ((path, pid, len(parts)) + tuple(med)))
        return
    if len(paths) > 2 and paths[0] == "--gates":
        for path in paths[2:]:
            print("%s: %s launches before each all-reduce call, last 3 steps: %s"
                  % (path, paths[1], gates(path, paths[1])))
        return
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        for pid in (0, 1):
            st = steps(path, pid)
            if not st:
                continue
            med = statistics.median
            print("%s rank %d: %d steps; step %.0f us, backward span %.0f us, stalls %.0f us, "
                  "closing wait %.0f us (medians)"
                  % (path, pid, len(st), med(s[0] for s in st), med(s[1] for s in st),
                     med(s[2] for s in st), med(s[5] for s in st)))
            for t in sorted(set().union(*(s[4].keys() for s in st))):
                print("  %-14s busy %.0f us (median)" % (t[:14], med(s[4][t] for s in st)))
            keys = sorted(set().union(*(s[3].keys() for s in st)))
            for k in keys:
                n = med(s[3][k] for s in st)
                if n > 0:
                    print("  %-14s %-60s %6.1f" % (k[0][:14], k[1], n))


if __name__ == "__main__":
    main(sys.argv[1:])
