#!/usr/bin/env python3
"""A kernel-scaling pair's recorded and changed run compared on the host (docs/fidelity.md,
"Pair 19"): for the kept recordings of a ddp-sim pair (FIDELITY_KEEP=KEEP fidelity.py;
BASE = KEEP/NN-kernels-x0.5-base, NEW = KEEP/NN-kernels-x0.5-new), dpro's prediction from
BASE (dpro-replay --warmup 3 --json --what-if-scale-kernels F) and its replay of NEW (median
and mean iteration), then per rank, from each run's measured timeline (dpro-export
--chrome), the medians over the measured iterations of the iteration, the host's time
until the iteration's synchronisation, its launch calls and the gaps between them (the
forward on the main thread, the backward on ddp-sim's backward thread), the
synchronisation's wait; and the host stalls: a launch call or a gap between two calls of
a thread over STALL_US (the world's host hiccups, preemptions), not the hand-off between
the threads and not the synchronisation: how many iterations hold one and their time per
iteration. Not a test (no bound): a measurement. Run from the build directory; dpro runs
with no SIMGPU_ variable.

usage: host_stalls.py BASE NEW [F]"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402

STALL_US = 150


def replay(d, extra):
    p = subprocess.run([fidelity.REPLAY, d, "--warmup", str(fidelity.WARMUP), "--json"] + extra,
                       env=fidelity.dpro_env(), stdout=subprocess.PIPE, universal_newlines=True,
                       check=True)
    return json.loads(p.stdout)


def timeline(d):
    """The measured timeline of d: (events, thread names by (pid, tid) without the tid)."""
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, "t.json")
        subprocess.run([fidelity.EXPORT, d, "--chrome", out], env=fidelity.dpro_env(),
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            ev = json.load(f)["traceEvents"]
    names = {(e["pid"], e["tid"]): re.sub(r" \(\d+\)", "", e["args"]["name"])
             for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    return ev, names


def stall_us(calls):
    """Time in a run of one thread's calls spent in launch calls or gaps over STALL_US."""
    s = 0.0
    for i, e in enumerate(calls):
        if e["name"] == "cudaLaunchKernel" and e["dur"] > STALL_US:
            s += e["dur"]
        gap = e["ts"] - calls[i - 1]["ts"] - calls[i - 1]["dur"] if i else 0
        if gap > STALL_US:
            s += gap
    return s


def iterations(ev, names, pid):
    """Per measured iteration of rank pid: a dict of its host figures."""
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                 if e.get("cat") == "iteration" and e["pid"] == pid)[fidelity.WARMUP:]
    api = {}
    for e in ev:
        if e.get("cat") == "api" and e["pid"] == pid:
            api.setdefault(names.get((pid, e["tid"])), []).append(e)
    main, bwd = (sorted(api.get(t, []), key=lambda e: e["ts"]) for t in ("ddp-sim", "ddp-bwd"))
    rows = []
    for t0, t1 in its:
        m = [e for e in main if t0 <= e["ts"] < t1]
        b = [e for e in bwd if t0 <= e["ts"] < t1]
        sync = [e for e in m if e["name"] == "cudaStreamSynchronize"]
        if not b or not sync:
            continue
        fwd = [e for e in m if e["ts"] < b[0]["ts"]]
        post = [e for e in m if e["ts"] > b[-1]["ts"] and e is not sync[-1]]
        fwd_span = fwd[-1]["ts"] + fwd[-1]["dur"] - t0 if fwd else 0
        bwd_span = b[-1]["ts"] + b[-1]["dur"] - b[0]["ts"]
        calls = sum(e["dur"] for e in fwd + b)
        rows.append({"iteration": t1 - t0, "host until sync": sync[-1]["ts"] - t0,
                     "launch calls": calls, "gaps": fwd_span + bwd_span - calls,
                     "sync wait": sync[-1]["dur"],
                     "stall": stall_us(fwd) + stall_us(b) + stall_us(post)})
    return rows


def median(xs):
    return fidelity.median(xs) if xs else float("nan")


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    base, new = argv[:2]
    f = argv[2] if len(argv) == 3 else "0.5"
    pred = replay(base, ["--what-if-scale-kernels", f])["what_if"]
    own = replay(new, [])
    print("prediction from %s: median %.1f us, mean %.1f us" % (
        base, pred["predicted_median_iter_us"], pred["predicted_iter_us"]))
    print("replay of %s: median %.1f us, mean %.1f us (measured mean %.1f us)" % (
        new, own["simulated_median_iter_us"], own["simulated_iter_us"], own["measured_iter_us"]))
    (eb, nb), (en, nn) = timeline(base), timeline(new)
    for pid in sorted({e["pid"] for e in eb if e.get("cat") == "iteration"}):
        a, b = iterations(eb, nb, pid), iterations(en, nn, pid)
        print("rank %d (%d / %d iterations), medians us, recorded -> changed:" % (pid, len(a), len(b)))
        for k in ("iteration", "host until sync", "launch calls", "gaps", "sync wait"):
            x, y = median([r[k] for r in a]), median([r[k] for r in b])
            print("  %-16s %8.1f -> %8.1f (%+.1f)" % (k, x, y, y - x))
        print("  host stalls over %d us: in %d of %d iterations, %.1f us an iteration -> in %d of "
              "%d, %.1f us" % (STALL_US, sum(r["stall"] > 0 for r in a), len(a),
                               sum(r["stall"] for r in a) / max(1, len(a)),
                               sum(r["stall"] > 0 for r in b), len(b),
                               sum(r["stall"] for r in b) / max(1, len(b))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
