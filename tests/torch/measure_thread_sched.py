#!/usr/bin/env python3
"""measure_thread_sched.py DIR...: per rank of a ddp_train.py run traced by dpro-run (one
gradient all-reduce a step: one bucket), per step from one all-reduce's start to the
next (steps 2..19 of --steps 20), the main thread's and the backward thread's
(pt_autograd) CPU time and runqueue wait (meta thread_sched, docs/format.md, interpolated
linearly between samples at the step's ends), the backward thread's longest API call of
the step, and that thread's CPU time and runqueue wait interpolated over the call (no
finer than the samples' spacing, printed). Medians and ranges over the steps, us. Run in
the build tree (top_builddir), docs/figures.md "Per thread: runqueue wait in the DDP
memory budget's runs"."""
import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys

BUILD = os.environ.get("top_builddir", os.getcwd())
DUMP = os.path.join(BUILD, "tests", "collector", "trace-dump")
for d in sys.argv[1:]:
    for f in sorted(glob.glob(d + "/rank*.dpro")):
        doc = json.loads(subprocess.run([DUMP, f], capture_output=True, text=True).stdout)
        ar = sorted(e["t0"] / 1e3 for e in doc["events"]
                    if e["kind"] == "collective" and e["name"] == "ncclAllReduce")
        names = {int(k): v for k, v in doc["thread_names"].items()}
        meta = dict(sqlite3.connect(f).execute("select key, value from meta"))
        th = {}
        for part in meta["thread_sched"].split(";"):
            tid, ss = part.split("=")
            th[int(tid)] = [tuple(int(v) for v in x.split(":")) for x in ss.split(",")]
        def at(s, t, k):
            for a, b in zip(s, s[1:]):
                if a[0] <= t <= b[0]:
                    return a[k] + (b[k] - a[k]) * (t - a[0]) / max(1, b[0] - a[0])
            return float("nan")
        auto = [t for t in th if names.get(t, "").startswith("pt_autograd")][0]
        main = [t for t in th if names.get(t) == "python"][0]
        api = [e for e in doc["events"] if e["kind"] == "api" and e["tid"] == auto]
        rows = []
        for i in range(2, 19):
            t0, t1 = ar[i], ar[i + 1]
            calls = [e for e in api if t0 <= e["t0"] / 1e3 < t1]
            long = max(calls, key=lambda e: e["t1"] - e["t0"])
            c0, c1 = long["t0"] / 1e3, long["t1"] / 1e3
            rows.append(dict(step=t1 - t0,
                             mrun=at(th[main], t1, 1) - at(th[main], t0, 1),
                             mwait=at(th[main], t1, 2) - at(th[main], t0, 2),
                             arun=at(th[auto], t1, 1) - at(th[auto], t0, 1),
                             await_=at(th[auto], t1, 2) - at(th[auto], t0, 2),
                             call=c1 - c0, cname=long["name"],
                             cwait=at(th[auto], c1, 2) - at(th[auto], c0, 2),
                             crun=at(th[auto], c1, 1) - at(th[auto], c0, 1)))
        sp = [b[0] - a[0] for a, b in zip(th[auto], th[auto][1:]) if ar[2] <= a[0] <= ar[19]]
        med = lambda k: statistics.median(r[k] for r in rows)
        rng = lambda k: "%.0f-%.0f" % (min(r[k] for r in rows), max(r[k] for r in rows))
        print("%s (sample spacing in the steps: median %.0f us)" % (f, statistics.median(sp)))
        for k in ("step", "mrun", "mwait", "arun", "await_", "call", "cwait", "crun"):
            print("  %-7s median %6.0f us  range %s" % (k, med(k), rng(k)))
        print("  longest calls:", sorted(set(r["cname"] for r in rows)))
