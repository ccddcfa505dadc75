#!/usr/bin/env python3
"""measure_launch_idle.py TRACE_DIR...: what a kernel launch of the autograd (backward)
thread costs on the host when its stream is idle and when it is busy, in rank 0's trace
of each directory (a torch job under dpro-run; trace-dump of the build tree reads it).

A launch finds its stream busy when an operation launched before it on that stream is
still running (or queued) at the launch call's start, idle otherwise. Per directory:
launches onto an idle stream (count, median, mean and total call duration), then onto
a busy one, over the whole trace.

Written for the tiny-bucket case of the closed loop (docs/figures.md): the simulated
device's stream worker sleeps when its queue is empty, and a launch that finds it so
signals it, which costs the launching thread more on a loaded machine. Not a test."""
import bisect
import glob
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import TRACE_DUMP  # noqa: E402


def launches(path):
    """(idle, busy): the durations in us of the autograd thread's kernel launches."""
    d = subprocess.run([TRACE_DUMP, path], capture_output=True, text=True, timeout=120)
    if d.returncode != 0 or not d.stdout:
        raise SystemExit("trace-dump %s: %s" % (path, d.stderr))
    t = json.loads(d.stdout.splitlines()[0])
    bwd = {int(k) for k, v in t["thread_names"].items() if v.startswith("pt_autograd")}
    ops = [e for e in t["events"] if e["kind"] in ("kernel", "memcpy", "memset")]
    by_corr = {e["corr"]: e for e in ops if e["corr"]}
    by_stream = {}
    for o in sorted(ops, key=lambda e: e["corr"]):
        by_stream.setdefault(o["stream"], []).append(o)
    # per stream, in launch (correlation) order: the latest end of the operations so far
    ends = {}
    for s, lst in by_stream.items():
        m, acc = 0, []
        for o in lst:
            m = max(m, o["t1"])
            acc.append(m)
        ends[s] = ([o["corr"] for o in lst], acc)
    idle, busy = [], []
    for e in t["events"]:
        if (e["kind"] != "api" or "Launch" not in e["name"] or e["tid"] not in bwd
                or e["corr"] not in by_corr):
            continue
        corrs, acc = ends[by_corr[e["corr"]]["stream"]]
        i = bisect.bisect_left(corrs, e["corr"])  # the operations launched before it
        running = i > 0 and acc[i - 1] > e["t0"]
        (busy if running else idle).append((e["t1"] - e["t0"]) / 1e3)
    return idle, busy


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: measure_launch_idle.py TRACE_DIR...")
    for dirn in sys.argv[1:]:
        files = sorted(glob.glob(os.path.join(dirn, "rank0*.dpro")))
        if not files:
            raise SystemExit("%s: no rank0*.dpro" % dirn)
        idle, busy = launches(files[0])
        row = [os.path.basename(dirn.rstrip("/"))]
        for name, xs in (("idle", idle), ("busy", busy)):
            row.append("%s %d, median %.1f us, mean %.1f us, total %.1f ms"
                       % (name, len(xs), statistics.median(xs) if xs else 0,
                          statistics.mean(xs) if xs else 0, sum(xs) / 1e3))
        print(": ".join(row[:1]) + ": " + "; ".join(row[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
