#!/usr/bin/env python3
"""The contention factor dpro measures in a trace (dpro-replay --json: contention) against
the one two runs of the same world show (docs/models.md): the compute stream runs the same
kernels in the same order whatever the bucket sizes, so each kernel place (position in its
iteration on its stream) has a median duration and a median overlap with collective
transfers (a rank's collective from its wait's end to its end) in each run; the realised
factor is the least-squares slope of the ratio of the medians minus 1 against the change of
overlap, (d_B / d_A - 1) = k (f_B - f_A) / (1 + k f_A), over the places whose overlap
changed by at least 0.05. Not a test (no bound): a measurement.

usage (from the build directory): measure_contention.py TRACE_DIR_A TRACE_DIR_B ..."""
import json, os, statistics, subprocess, sys
B = os.environ.get("top_builddir", os.getcwd())


def places(d):
    out = d.rstrip("/") + ".contention.chrome"
    subprocess.run([B + "/tools/dpro-export", d, "--chrome", out, "-f"], capture_output=True, check=True)
    ev = json.load(open(out))["traceEvents"]
    os.remove(out)
    X = [e for e in ev if e.get("ph") == "X"]
    iters = {}
    for e in X:
        if e["name"].startswith("iteration "):
            iters.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    comm = {}
    for e in X:
        if e.get("cat") == "collective":
            a = e["ts"] + e["args"].get("wait_us", 0)
            comm.setdefault(e["pid"], []).append((a, e["ts"] + e["dur"]))
    res = {}
    for e in X:
        if e.get("cat") != "kernel" or "nccl" in e["name"].lower():
            continue
        pid = e["pid"]
        it = [k for k, (a, b) in enumerate(sorted(iters.get(pid, []))) if a <= e["ts"] < b]
        if not it or it[0] < 2:
            continue
        s, t = e["ts"], e["ts"] + e["dur"]
        f = sum(max(0, min(t, b) - max(s, a)) for a, b in comm.get(pid, [])) / e["dur"] if e["dur"] > 0 else 0
        res.setdefault((pid, e["tid"], it[0]), []).append((e["name"], e["dur"], min(f, 1)))
    plc = {}
    for (pid, tid, it), l in res.items():
        for k, (name, dur, f) in enumerate(l):
            plc.setdefault((pid, tid, k, name), []).append((dur, f))
    return {k: (statistics.median(x[0] for x in v), statistics.mean(x[1] for x in v)) for k, v in plc.items()}


def measured(d):
    j = json.loads(subprocess.run([B + "/tools/dpro-replay", d, "--json"], capture_output=True, text=True,
                                  check=True).stdout)
    return j["contention"]["compute_by_communication"]


dirs = sys.argv[1:]
pa = places(dirs[0])
ma = measured(dirs[0])
for d in dirs[1:]:
    pb = places(d)
    sxx = sxy = 0
    n = 0
    for k, (da, fa) in pa.items():
        if k not in pb:
            continue
        db, fb = pb[k]
        x = fb - fa
        if abs(x) < 0.05:
            continue
        y = db / da - 1
        sxx += x * x
        sxy += x * y
        n += 1
    s = sxy / sxx if sxx else 0
    print("%s vs %s: realised compute factor %.3f over %d places; dpro measured in the first %.3f "
          "(fitted %s, %d informative)" % (os.path.basename(dirs[0]), os.path.basename(d), s, n, ma["factor"],
                                            ma["fitted"], ma["informative"]), flush=True)
