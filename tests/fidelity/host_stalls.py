#!/usr/bin/env python3
"""A pair's recorded and changed run compared on the host (docs/fidelity.md, "Pair 19" and
"Fusion pair 3 decomposed"): for the kept recordings of a ddp-sim pair (FIDELITY_KEEP=KEEP
fidelity.py; BASE = KEEP/NN-KIND-base, NEW = KEEP/NN-KIND-new), dpro's prediction from
BASE and its replay of NEW (median and mean iteration), then per rank, from each run's
measured timeline (dpro-export --chrome), the medians over the measured iterations of the
iteration, the host's time until the iteration's synchronisation, its launch calls and the
gaps between them (the forward on the main thread, the backward on ddp-sim's backward
thread), the hand-off from the forward to the backward thread, the time from the
backward's last call to the synchronisation, the synchronisation's wait, the kernels and
their time, the collectives' transfer and wait (their transfer_us and wait_us), the host
after the device (the iteration's end after its last device record: fidelity.device_lag)
(each also as a mean over the iterations); how many iterations have the host after the
device over STALL_US and how many are longer than the fastest tenth by STALL_US (slowed:
where about half are, the median iteration flips between two modes); and the host
stalls: a launch call or a gap between two calls of a thread over STALL_US (the world's
host hiccups, preemptions), not the hand-off between the threads and not the
synchronisation: how many iterations hold one and their time per iteration. Last, each
run's host share as dpro-replay learns it from the trace (what_if.host_share at its own
rank count and layout): the CPU its ranks used per second, their load on the host's cores
and the stalls a second it counts (a host call over its place's median by its stall
threshold).

The prediction: a kernel-scaling pair (F, default 0.5) by dpro-replay --warmup 3 --json
--what-if-scale-kernels F; a change of the job's options (--what-if ARGS, the suite's
fusion, cuda-graph, recompute, accumulation and bucket kinds) by dpro-optimize --json
--quiet --warmup 3 --batch B --what-if ARGS, whose simulated timeline (--chrome) is then
compared too, as a third column between the recorded and the changed run, and its typical
iteration against the changed run's own typical replay (dpro's typical-duration replay on
both sides: the change's model with each thread's typical stall, not the iterations' own).
Not a test (no bound): a measurement. Run from the build directory; dpro runs with no
SIMGPU_ variable.

usage: host_stalls.py BASE NEW [F]
       host_stalls.py BASE NEW --what-if ARGS --batch B"""
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
        return read_timeline(out)


def read_timeline(path):
    """A Chrome trace of dpro's (dpro-export, dpro-optimize --chrome): (events, thread
    names by (pid, tid) without the tid)."""
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {(e["pid"], e["tid"]): re.sub(r" \(\d+\)", "", e["args"]["name"])
             for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    return ev, names


def optimize_what_if(base, args, batch):
    """dpro-optimize's prediction of the ddp-sim options args from the recording base:
    (its --json answer, the simulated timeline of the changed job: read_timeline's)."""
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, "p.json")
        p = subprocess.run([fidelity.OPTIMIZE, base, "--json", "--quiet", "--warmup",
                            str(fidelity.WARMUP), "--batch", str(batch), "--what-if", args,
                            "--chrome", out], env=fidelity.dpro_env(), check=True,
                           stdout=subprocess.PIPE, universal_newlines=True)
        return json.loads(p.stdout), read_timeline(out)


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
    """Per measured iteration of rank pid: a dict of its host figures and its kernels."""
    its = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                 if e.get("cat") == "iteration" and e["pid"] == pid)[fidelity.WARMUP:]
    api = {}
    for e in ev:
        if e.get("cat") == "api" and e["pid"] == pid:
            api.setdefault(names.get((pid, e["tid"])), []).append(e)
    kernels = sorted((e["ts"], e["dur"]) for e in ev
                     if e.get("cat") == "kernel" and e["pid"] == pid and e["dur"] > 0)
    dev = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                 if e.get("ph") == "X" and e["pid"] == pid and
                 names.get((pid, e["tid"]), "").startswith("stream "))
    colls = sorted((e["ts"], e["args"].get("transfer_us", 0.0), e["args"].get("wait_us", 0.0))
                   for e in ev if e.get("cat") == "collective" and e["pid"] == pid and
                   "dur" in e and "args" in e)
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
        fwd_end = fwd[-1]["ts"] + fwd[-1]["dur"] if fwd else t0
        fwd_span = fwd_end - t0
        bwd_end = b[-1]["ts"] + b[-1]["dur"]
        bwd_span = bwd_end - b[0]["ts"]
        calls = sum(e["dur"] for e in fwd + b)
        k = [d for ts, d in kernels if t0 <= ts < t1]
        c = [(x, w) for ts, x, w in colls if t0 <= ts < t1]
        lag = fidelity.device_lag(dev, t0, t1)
        rows.append({"iteration": t1 - t0, "host until sync": sync[-1]["ts"] - t0,
                     "launch calls": calls, "gaps": fwd_span + bwd_span - calls,
                     "hand-off": b[0]["ts"] - fwd_end,
                     "after backward": sync[-1]["ts"] - bwd_end, "sync wait": sync[-1]["dur"],
                     "kernels": len(k), "kernel time": sum(k),
                     "transfer": sum(x for x, _ in c), "collective wait": sum(w for _, w in c),
                     "host after device": lag[0] if lag else 0.0,
                     "stall": stall_us(fwd) + stall_us(b) + stall_us(post)})
    return rows


def median(xs):
    return fidelity.median(xs) if xs else float("nan")


def slowed(rows):
    """(iterations of rows longer than their tenth percentile by STALL_US or more, all of
    them): how many carry a stall that the fastest ones do not. Where about half do, the
    median iteration lies between the two modes and moves by a stall's length with the
    share (docs/fidelity.md, "Pair 26 decomposed")."""
    t = sorted(r["iteration"] for r in rows)
    if not t:
        return 0, 0
    floor = t[len(t) // 10]
    return sum(x > floor + STALL_US for x in t), len(t)


def compare(runs):
    """Prints, per rank, the medians (and means) of iterations()'s figures and the stalls
    of each timeline in runs: a list of (label, (events, names))."""
    for pid in sorted({e["pid"] for e in runs[0][1][0] if e.get("cat") == "iteration"}):
        its = [iterations(ev, names, pid) for _, (ev, names) in runs]
        print("rank %d (%s iterations), medians (means) us, %s:" % (
            pid, " / ".join(str(len(a)) for a in its), " / ".join(label for label, _ in runs)))
        for k in ("iteration", "host until sync", "launch calls", "gaps", "hand-off",
                  "after backward", "sync wait", "kernels", "kernel time", "transfer",
                  "collective wait", "host after device"):
            x = [median([r[k] for r in a]) for a in its]
            mean = [sum(r[k] for r in a) / max(1, len(a)) for a in its]
            print("  %-16s %s, median %+.1f" % (k, " -> ".join(
                "%8.1f (%8.1f)" % v for v in zip(x, mean)), x[-1] - x[0]))
        print("  host stalls over %d us: %s" % (STALL_US, " -> ".join(
            "in %d of %d iterations, %.1f us an iteration" % (
                sum(r["stall"] > 0 for r in a), len(a), sum(r["stall"] for r in a) / max(1, len(a)))
            for a in its)))
        print("  host after device over %d us: %s" % (STALL_US, " -> ".join(
            "in %d of %d iterations" % (sum(r["host after device"] > STALL_US for r in a), len(a))
            for a in its)))
        print("  iterations over the fastest tenth's + %d us: %s" % (STALL_US, " -> ".join(
            "%d of %d" % slowed(a) for a in its)))


def main(argv):
    what_if = "--what-if" in argv
    if (what_if and (len(argv) != 6 or argv[2] != "--what-if" or argv[4] != "--batch")) or \
            (not what_if and len(argv) not in (2, 3)):
        print(__doc__, file=sys.stderr)
        return 2
    base, new = argv[:2]
    own = replay(new, [])
    runs = [("recorded", timeline(base))]
    if what_if:
        j, predicted = optimize_what_if(base, argv[3], argv[5])
        top = j["strategies"][0]
        print("prediction of %s from %s: median %.1f us, mean %.1f us" % (
            argv[3], base, top["predicted_median_iter_us"], top["predicted_iter_us"]))
        runs.append(("predicted", predicted))
        # the medians alone: the optimizer's typical prediction adds no wait at the
        # collectives, so neither does the side it is compared with
        t = own["typical_replay"]
        typ = t.get("medians_only_predicted_iter_us", t["predicted_iter_us"])
        typ_pred = top["predicted_typical_iter_us"]
        print("typical iteration (each operation's median, each thread's typical stall): "
              "predicted %.1f us, the changed run's own %.1f us (%+.1f %%)" % (
                  typ_pred, typ, 100.0 * (typ - typ_pred) / typ_pred))
    else:
        f = argv[2] if len(argv) == 3 else "0.5"
        pred = replay(base, ["--what-if-scale-kernels", f])["what_if"]
        print("prediction from %s: median %.1f us, mean %.1f us" % (
            base, pred["predicted_median_iter_us"], pred["predicted_iter_us"]))
    print("replay of %s: median %.1f us, mean %.1f us (measured mean %.1f us)" % (
        new, own["simulated_median_iter_us"], own["simulated_iter_us"], own["measured_iter_us"]))
    runs.append(("changed", timeline(new)))
    compare(runs)
    for label, d in (("recorded", base), ("changed", new)):
        h = fidelity.host_share(d, own["world_size"], own["world_size"])
        if h is None:
            print("host share of the %s run: none (the trace has no CPU samples)" % label)
            continue
        print("host share of the %s run: CPU %.3f a rank, host busy %.3f, load %.3f, "
              "stalls %.1f a second (timeslice %.0f us)" % (
                  label, h["mean_demand"], h["mean_host_busy"], h["load_traced"],
                  h["traced_stalls_per_s"], h["timeslice_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
