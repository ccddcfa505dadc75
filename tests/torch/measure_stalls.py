#!/usr/bin/env python3
"""measure_stalls.py CHROME.json...: where the backward thread of a torch job stalls, step by
step, from Chrome timelines of dpro-export (`dpro-export DIR --chrome FILE`) or of a plan
(`dpro-optimize DIR --what-if ARGS --chrome FILE`).

Steps and stalls are measure_step_calls.py's (the last 15 steps between the main thread's
cudaDeviceSynchronize; a stall: a call of the backward thread, `pt_autograd_N`, over 100 us,
or a gap over 100 us before one). A stall's place is its step's position among the
backward thread's calls, the call's name and whether the call or the gap before it took
the time. Per file and rank: the median stall time a step; of the stall time of all the
steps, the share at places that stall in at least half of the steps (a property of the
job, which the typical prediction keeps: each host call at its place's median, docs/
models.md) and what each step would keep at its places' medians; the stall time by call
name (the call, or the gap before it) and by length.

Written for the tiny-bucket case of the closed loop (docs/figures.md). Not a test."""
import collections
import statistics
import sys

import measure_step_calls

STALL_US = measure_step_calls.STALL_US


def step_stalls(path, pid):
    """Per step of rank pid: {(what, position, name): us} of the backward thread's stalls."""
    out = []
    for _, inside, names in measure_step_calls.step_events(path, pid):
        bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd")]
        st = {}
        for i, e in enumerate(bwd):
            if e["dur"] > STALL_US:
                st[("call", i, e["name"][:50])] = e["dur"]
            if i > 0:
                gap = e["ts"] - bwd[i - 1]["ts"] - bwd[i - 1]["dur"]
                if gap > STALL_US:
                    st[("gap before", i, e["name"][:50])] = gap
        out.append(st)
    return out


def report(path, pid):
    steps = step_stalls(path, pid)
    if not steps:
        return
    n = len(steps)
    places = collections.Counter(k for s in steps for k in s)
    total = sum(sum(s.values()) for s in steps)
    recurring = sum(v for s in steps for k, v in s.items() if 2 * places[k] >= n)
    kept = sum(statistics.median(s.get(k, 0.0) for s in steps) for k in places)
    by_name = collections.Counter()
    for s in steps:
        for (what, _, name), v in s.items():
            by_name[(what, name)] += v / n
    sizes = collections.Counter()
    for s in steps:
        for v in s.values():
            sizes["0.1-0.5 ms" if v < 500 else "0.5-2 ms" if v < 2000 else ">= 2 ms"] += 1
    print("%s rank %d: %d steps; stalls a step: median %.0f us, %.1f stalls; %d places, of "
          "the stall time %.0f %% at places stalling in half the steps or more; kept at the "
          "places' medians %.0f us a step"
          % (path, pid, n, statistics.median(sum(s.values()) for s in steps),
             sum(len(s) for s in steps) / n, len(places),
             100.0 * recurring / total if total else 0.0, kept))
    print("  stalls by length (all steps): %s" % dict(sizes))
    for (what, name), v in by_name.most_common(6):
        print("  %-10s %-50s %7.0f us a step" % (what, name, v))


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        for pid in (0, 1):
            report(path, pid)


if __name__ == "__main__":
    main(sys.argv[1:])
