#!/usr/bin/env python3
"""measure_step_phases.py A_TIMELINE_BASE...: where a plan's step and the applied run's step
grow over the baseline's, phase by phase, for the closed loop's pairs whose timelines
measure_microbatches.py wrote beside the kept traces (BASE.json the baseline A's
`dpro-export`, BASE-plan.json its `dpro-optimize --what-if --chrome`, and the same path
with -A replaced by -B the applied run's `dpro-export`).

A step runs from one closing cudaDeviceSynchronize of the main thread to the next
(measure_step_calls.py's steps, the last 15). Its phases: from the step's start to the
backward thread's first call (the forward, the batch's making), the backward thread's
span (its first call to the end of its last), and from there to the step's end. Per pair
and rank: the medians of A, the plan and B, and the all-gathers launched from the
backward's start on (the backward's re-gathers). Pooled over every pair and rank: the
plan's growth over A and B's over A per phase (medians and ranges) and the median of
B's step growth over the plan's. Then the backward cut at the backward thread's
reduce-scatter launches (`nccl:reducescatter`): the main thread's wait for the backward
(from its last call before the backward thread's first to that first call), each span
up to a reduce-scatter's launch and the rest of the backward; medians over the steps,
then over every pair and rank, for A, the plan and B. Written for the FSDP reshard
budget (docs/figures.md, "FSDP2 reshard and memory budgets, phase by phase"). Not a
test."""
import statistics
import sys

import measure_step_calls

PHASES = ("step", "to backward", "backward span", "after backward")


def phases(path, pid):
    """Medians over the steps of rank pid: step, to backward, backward span, after
    backward (us), and the all-gathers launched from the backward's first call on."""
    out = []
    for step, inside, names in measure_step_calls.step_events(path, pid):
        bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd")]
        main = [e for e in inside if names.get(e["tid"]) == "python"]
        if not bwd or not main:
            continue
        end = main[-1]["ts"] + main[-1]["dur"]
        start = end - step
        b0, b1 = bwd[0]["ts"], bwd[-1]["ts"] + bwd[-1]["dur"]
        gathers = sum(1 for e in inside if "allgather" in e["name"].lower() and e["ts"] >= b0
                      and names.get(e["tid"], "").startswith(("python", "pt_autograd")))
        out.append((step, b0 - start, b1 - b0, end - b1, gathers))
    if not out:
        return None
    return [statistics.median(o[i] for o in out) for i in range(5)]


def spans(path, pid):
    """Medians over the steps of rank pid: the wait before the backward thread's first
    call, then the backward's spans ending at each reduce-scatter launch and its rest (us)."""
    out = []
    for _, inside, names in measure_step_calls.step_events(path, pid):
        bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd")]
        before = [e for e in inside if names.get(e["tid"]) == "python" and bwd
                  and e["ts"] < bwd[0]["ts"]]
        if not before:
            continue
        cuts = ([before[-1]["ts"] + before[-1]["dur"], bwd[0]["ts"]]
                + [e["ts"] for e in bwd if e["name"] == "nccl:reducescatter"]
                + [bwd[-1]["ts"] + bwd[-1]["dur"]])
        out.append([b - a for a, b in zip(cuts, cuts[1:])])
    if not out:
        return None
    n = min(len(o) for o in out)
    return [statistics.median(o[i] for o in out) for i in range(n)]


def main(bases):
    if not bases:
        sys.exit(__doc__)
    rows = []
    for base in bases:
        for pid in (0, 1):
            a = phases(base + ".json", pid)
            p = phases(base + "-plan.json", pid)
            b = phases(base.replace("-A", "-B") + ".json", pid)
            if not (a and p and b):
                continue
            rows.append((a, p, b))
            print("%s rank %d: A %.0f = %.0f + %.0f + %.0f | plan %.0f = %.0f + %.0f + %.0f, "
                  "re-gathers %d | B %.0f = %.0f + %.0f + %.0f, re-gathers %d"
                  % ((base, pid) + tuple(a[:4]) + tuple(p) + tuple(b)))
    if not rows:
        return
    med = statistics.median
    for i, name in enumerate(PHASES):
        dp = [r[1][i] - r[0][i] for r in rows]
        db = [r[2][i] - r[0][i] for r in rows]
        print("%-14s plan - A %+.0f (%.0f..%.0f), B - A %+.0f (%.0f..%.0f), plan - B %+.0f us"
              % (name, med(dp), min(dp), max(dp), med(db), min(db), max(db),
                 med([x - y for x, y in zip(dp, db)])))
    cut = {"A": [], "plan": [], "B": []}
    for base in bases:
        for pid in (0, 1):
            for key, path in (("A", base + ".json"), ("plan", base + "-plan.json"),
                              ("B", base.replace("-A", "-B") + ".json")):
                s = spans(path, pid)
                if s:
                    cut[key].append(s)
    for key, rows_k in cut.items():
        if rows_k:
            n = min(len(r) for r in rows_k)
            print("backward cut, %-4s wait %.0f, spans %s us (medians)"
                  % (key, med(r[0] for r in rows_k),
                     " ".join("%.0f" % med(r[i] for r in rows_k) for i in range(1, n))))
    ratio = [(r[2][0] - r[0][0]) / (r[1][0] - r[0][0]) for r in rows if r[1][0] != r[0][0]]
    if ratio:
        print("step growth, B's over the plan's: median %.3f (%.3f..%.3f) over %d"
              % (med(ratio), min(ratio), max(ratio), len(ratio)))


if __name__ == "__main__":
    main(sys.argv[1:])
