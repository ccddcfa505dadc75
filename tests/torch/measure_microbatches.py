#!/usr/bin/env python3
"""measure_microbatches.py [--case NAME] [--what-if ADVICE] KEEP_DIR...: a case of the closed
loop (closed_loop_torch.py; default the DDP memory budget and its advice), pair by pair and
pooled over several runs whose traces were kept (CLOSED_LOOP_KEEP=KEEP_DIR); the parts,
per micro-batch, for an advice that accumulates.

Per pair j of each KEEP_DIR: the realised iteration times of its baseline run (A) and its
applied run (B), the loop's statistic (the mean over the ranks of the median step, the
first two left out), and the prediction from A (`dpro-optimize A --json --what-if ADVICE`
with the case's optimizer arguments, as the loop's pair_prediction). Then the parts, from
Chrome timelines (`dpro-export`, and the plan's `dpro-optimize --what-if --chrome`, which
holds the plan's iteration without its extra micro-batches, added analytically; the
timelines are written beside the traces, DIR.json and A's DIR-plan.json): each
micro-batch runs from a batch copy (a cudaMemcpyAsync of at least 1 MiB by the main thread;
a step without a backward, the checksum's copies, is left out) to the next or to the step's
end; its forward span runs from that copy to the main
thread's last call before the backward thread's first, its backward span over the
backward thread's calls. Medians over each rank's last steps (measure_step_calls.py's), the
mean over the ranks. Printed per pair: A's forward and backward spans, the plan's, B's for
each micro-batch, and the plan's extra micro-batch (its predicted median less the median
step of its timeline).

Pooled over every pair of every KEEP_DIR (the rule's statistics, tests/optimizer/
closed_loop.py): the median predicted and realised iteration, the error, the median
predicted and realised speedup and their ratio; and ratios that say which part of the
prediction differs, each a median over the pairs: the plan's extra micro-batch and the
applied run's no_sync() micro-batch against the step's forward and backward (the plan's
against A's, the applied run's against its own synchronised micro-batch: within one run,
so the machine's load cancels), and B's synchronised micro-batch against A's forward and
backward (across two runs: the load does not cancel).

Then each step cut at its batch copies (step_parts; the same timelines): the time to the
first copy (the optimizer and the host making the batch), from each copy to the next
(a whole micro-batch with the next batch's making) and from the last copy to the step's
end (the synchronised micro-batch with its all-reduce and the copies back), and the
longest call of the last micro-batch's backward thread (the backward's stall, if any):
for A, for the plan's iteration (whose extra micro-batches are added analytically, so the
plan's extra micro-batch is set against B's copy-to-copy part) and for B; pooled, the
plan's synchronised micro-batch against B's and the plan's extra against B's no_sync()
one (docs/figures.md, "Where the DDP memory budget's prediction is long").

Needs the build tree (top_builddir, default the working directory) for dpro-optimize and
dpro-export. Written for the DDP memory-budget case (docs/figures.md, "Three runs in a row,
pooled"). Not a test."""
import argparse
import json
import os
import statistics
import subprocess
import sys

import closed_loop_torch
import measure_step_calls

BUILD = os.environ.get("top_builddir", os.getcwd())
OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
EXPORT = os.path.join(BUILD, "tools", "dpro-export")
BATCH_COPY_BYTES = 1 << 20
WARM_STEPS = 2  # closed_loop_torch.py's


def split_step(inside, names):
    """A step's calls: (the main thread's, the backward thread's, the start times of the
    main thread's batch copies)."""
    main = [e for e in inside if names.get(e["tid"], "").startswith("python") and e["dur"] > 0]
    bwd = [e for e in inside if names.get(e["tid"], "").startswith("pt_autograd") and e["dur"] > 0]
    copies = [e["ts"] for e in main if e["name"] == "cudaMemcpyAsync"
              and e.get("args", {}).get("bytes", 0) >= BATCH_COPY_BYTES]
    return main, bwd, copies


def micro_batches(path, pid):
    """Per micro-batch of rank pid's steps (the medians over the steps that have the most
    common count of batch copies): (forward span, backward span) in us, and the median
    step."""
    rows, steps = [], []
    for dur, inside, names in measure_step_calls.step_events(path, pid):
        main, bwd, copies = split_step(inside, names)
        if not copies or not main:
            continue  # not a training step (the checksum's copies, the teardown)
        ends = copies[1:] + [main[-1]["ts"] + main[-1]["dur"]]
        row = []
        for a, b in zip(copies, ends):
            back = [e for e in bwd if a <= e["ts"] < b]
            fwd = [e for e in main if back and a <= e["ts"] < back[0]["ts"]]
            if not back or not fwd:
                break
            row.append((fwd[-1]["ts"] + fwd[-1]["dur"] - a,
                        back[-1]["ts"] + back[-1]["dur"] - back[0]["ts"]))
        else:
            rows.append(row)
            steps.append(dur)
    if not rows:
        return None, None
    n = statistics.mode(len(r) for r in rows)
    keep = [r for r in rows if len(r) == n]
    return ([tuple(statistics.median(r[i][q] for r in keep) for q in (0, 1)) for i in range(n)],
            statistics.median(s for r, s in zip(rows, steps) if len(r) == n))


def parts(path):
    """micro_batches of both ranks, averaged: ([(fwd, bwd) per micro-batch], step)."""
    got = [micro_batches(path, pid) for pid in (0, 1)]
    if any(g[0] is None for g in got) or len(got[0][0]) != len(got[1][0]):
        return None, None
    mbs = [tuple((got[0][0][i][q] + got[1][0][i][q]) / 2 for q in (0, 1))
           for i in range(len(got[0][0]))]
    return mbs, (got[0][1] + got[1][1]) / 2


def step_parts(path):
    """Per step of both ranks (medians over the steps with the most common count of batch
    copies, then the mean over the ranks): [the step, the time to its first batch copy, from
    each copy to the next, from the last copy to the step's end, the longest call of the
    backward thread after the last copy] in us; None without steps that copy a batch."""
    got = []
    for pid in (0, 1):
        rows = []
        for dur, inside, names in measure_step_calls.step_events(path, pid):
            main, bwd, copies = split_step(inside, names)
            last = [e["dur"] for e in bwd if copies and e["ts"] >= copies[-1]]
            if not copies or not last:
                continue  # not a training step
            # the step's start: its closing synchronize's end (step_events' boundary) less
            # its length; the first event inside starts later (host time with no call)
            t0 = max(e["ts"] + e["dur"] for e in inside if e["name"] == "cudaDeviceSynchronize"
                     and names.get(e["tid"]) == "python") - dur
            rows.append([dur, copies[0] - t0] + [b - a for a, b in zip(copies, copies[1:])]
                        + [t0 + dur - copies[-1], max(last)])
        if not rows:
            return None
        n = statistics.mode(len(r) for r in rows)
        keep = [r for r in rows if len(r) == n]
        got.append([statistics.median(r[i] for r in keep) for i in range(n)])
    if len(got[0]) != len(got[1]):
        return None
    return [(a + b) / 2 for a, b in zip(*got)]


def realised(out_dir):
    """The loop's statistic for one run: the mean over the ranks of the median step."""
    meds = []
    for r in (0, 1):
        with open(os.path.join(out_dir, "rank%d.json" % r)) as f:
            meds.append(statistics.median(json.load(f)["runs"][0]["iter_us"][WARM_STEPS:]))
    return sum(meds) / len(meds)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), p.stderr[-500:]))
    return p.stdout


def pair(base, opt_args, advice):
    """One pair (base: KEEP_DIR/CASE-@j, @ the run's letter): a dict of its figures, its
    parts None where a timeline shows no batch copy or the applied run one micro-batch (an
    advice without accumulation); None without both runs or a prediction."""
    a, b = base.replace("@", "A"), base.replace("@", "B")
    if not (os.path.isdir(a) and os.path.isdir(b)):
        return None
    plan_json = a + "-plan.json"
    rep = json.loads(run([OPTIMIZE, a, "--json", "--quiet", "--seed", "1", "--what-if", advice,
                          "--chrome", plan_json, "--force"] + opt_args))
    top = [s for s in rep["strategies"] if advice in s["knobs"].values()]
    if not top or top[0]["predicted_median_iter_us"] <= 0:
        return None
    pred = top[0]["predicted_median_iter_us"]
    out = dict(a_us=realised(a + "-out"), b_us=realised(b + "-out"), pred_us=pred,
               pred_x=rep["baseline_median_iter_us"] / pred, parts=None)
    run([EXPORT, a, "--chrome", a + ".json", "--force"])
    run([EXPORT, b, "--chrome", b + ".json", "--force"])
    pa, _ = parts(a + ".json")
    pp, plan_step = parts(plan_json)
    pb, _ = parts(b + ".json")
    if pa and pp and pb and len(pb) >= 2:
        out["parts"] = dict(micro=pred - plan_step, a=pa[0], plan=pp[0], b1=pb[0], b2=pb[-1])
    sa, sp, sb = step_parts(a + ".json"), step_parts(plan_json), step_parts(b + ".json")
    if sa and sp and sb and len(sb) >= 5:
        out["steps"] = dict(a=sa, plan=sp, b=sb, micro=pred - sp[0])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="ddp memory budget")
    ap.add_argument("--what-if", default="no_sync=2 micro_batch=8")
    ap.add_argument("keep", nargs="+")
    args = ap.parse_args()
    cases = {c[0]: c[3] for c in closed_loop_torch.CONFIGS + closed_loop_torch.FSDP_CONFIGS}
    opt_args = cases[args.case]
    rows = []
    fb = lambda x: "%5.0f+%5.0f" % x  # noqa: E731
    for keep in args.keep:
        for j in range(1, 100):
            base = os.path.join(keep, "%s-@%d" % (args.case.replace(" ", "_"), j))
            if not os.path.isdir(base.replace("@", "A")):
                break
            p = pair(base, opt_args, args.what_if)
            if p is None:
                print("%s pair %d: no figures" % (keep, j))
                continue
            rows.append(p)
            line = ("%s pair %d: A %.1f us, B %.1f us (x%.3f), predicted %.1f us (x%.3f)"
                    % (keep, j, p["a_us"], p["b_us"], p["a_us"] / p["b_us"], p["pred_us"],
                       p["pred_x"]))
            q = p["parts"]
            if q:
                line += (", extra micro-batch %.0f us | fwd+bwd us: A %s, plan %s, B no_sync %s, "
                         "B sync %s" % (q["micro"], fb(q["a"]), fb(q["plan"]), fb(q["b1"]),
                                        fb(q["b2"])))
            print(line)
            t = p.get("steps")
            if t:
                print("  step parts us: A %.0f (to copy %.0f, copy to end %.0f, longest backward "
                      "call %.0f); plan %.0f (to copy %.0f, copy to end %.0f) + extra micro-batch "
                      "%.0f; B %.0f (to copy %.0f, copy to copy %s, last copy to end %.0f, its "
                      "longest backward call %.0f)"
                      % (t["a"][0], t["a"][1], t["a"][-2], t["a"][-1], t["plan"][0], t["plan"][1],
                         t["plan"][-2], t["micro"], t["b"][0], t["b"][1],
                         " ".join("%.0f" % x for x in t["b"][2:-2]), t["b"][-2], t["b"][-1]))
    if not rows:
        return 1
    med = statistics.median
    pred_us, real_us = med(r["pred_us"] for r in rows), med(r["b_us"] for r in rows)
    pred_x, real_x = med(r["pred_x"] for r in rows), med(r["a_us"] / r["b_us"] for r in rows)
    print("pooled over %d pairs: median predicted %.1f us, realised %.1f us, error %+.1f %%; "
          "median speedup predicted %.3f, realised %.3f, ratio %.3f"
          % (len(rows), pred_us, real_us, 100 * (real_us / pred_us - 1), pred_x, real_x,
             real_x / pred_x))
    s = lambda x: x[0] + x[1]  # noqa: E731
    q = [r["parts"] for r in rows if r["parts"]]
    for what, xs in (("plan: extra micro-batch / the plan's forward+backward",
                      [r["micro"] / s(r["plan"]) for r in q]),
                     ("applied: no_sync() micro-batch / its synchronised one",
                      [s(r["b1"]) / s(r["b2"]) for r in q]),
                     ("plan: forward+backward / A's", [s(r["plan"]) / s(r["a"]) for r in q]),
                     ("applied: synchronised forward+backward / A's (across runs)",
                      [s(r["b2"]) / s(r["a"]) for r in q]),
                     ("applied: synchronised forward / A's (across runs)",
                      [r["b2"][0] / r["a"][0] for r in q]),
                     ("applied: synchronised backward / A's (across runs)",
                      [r["b2"][1] / r["a"][1] for r in q])):
        if xs:
            print("  %-60s median %.3f (%.2f-%.2f)" % (what, med(xs), min(xs), max(xs)))
    t = [r["steps"] for r in rows if r.get("steps")]
    for what, xs in (("plan: synchronised micro-batch (copy to end) / B's",
                      [r["plan"][-2] / r["b"][-2] for r in t]),
                     ("plan: extra micro-batch / B's no_sync() one (copy to copy)",
                      [r["micro"] / r["b"][2] for r in t]),
                     ("plan: to the first copy / B's", [r["plan"][1] / r["b"][1] for r in t]),
                     ("A's longest backward call / B's synchronised one's",
                      [r["a"][-1] / r["b"][-1] for r in t])):
        if xs:
            print("  %-60s median %.3f (%.2f-%.2f)" % (what, med(xs), min(xs), max(xs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
