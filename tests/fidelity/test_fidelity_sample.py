#!/usr/bin/env python3
"""test_fidelity_sample: a small sample of the fidelity suite (fidelity.py, `make fidelity`)
in make check.

Five pairs of one base seed (SAMPLE_SEED), the first of each kind in SAMPLE_KINDS, at
least 10 measured iterations spanning 50 ms, two attempts per pair (the recorded run first,
then the changed run first). The predicted against realised comparison is
not deterministic: the simulated device runs in real time on this machine's shared cores,
so host time, arrivals at collectives and the overlaps the world's contention follows
depend on the load (only each kernel's base duration and noise are fixed by the world's
seed; the full suite's table gives the spread of a pair's realised runs: up to 157 % at
load 4-9). Bounds on the error or the realised speedup, even loose ones (50 %, "x2 is
slower"), failed here on a loaded machine (load 8.8: recomputation 149 and 187 %, kernels
x0.5 98 %; a recorded run at 2.5x its usual time made kernels x2 read as a 1.66x speedup in
the full suite). So this sample checks no time of a run, only what does not depend on the
load:
- the draw: one seed gives the same pairs, another seed other worlds; dpro's analysis runs
  with no SIMGPU_ setting in its environment (a job's world stays the job's);
- every pair ran, with finite positive times, its row in fidelity.tsv and fidelity.md, and
  the closing line in its format; the row's `runs` gives both attempts' recorded /
  predicted / realised iteration, its times are their medians and its error the median of
  the attempts' own errors; both runs' host stalls a second, as dpro-replay counts them in
  their traces, are given (0 or more);
- peak memory is the caching allocator's: predicted within 25 % of realised where dpro
  predicts it (the full runs: at most 15.3 %), and the memory advice's realised peak under
  its budget;
- dpro's prediction from the recorded trace goes the right way: every kernel x2 predicted
  slower, x0.5 faster;
- the network of a world as the pair across nodes measures it (measure_network, nccl-perf
  on two nodes): a positive busbw under the fastest NIC's line rate, a crossing's latency
  of 0 or more under 1 ms, measured once per world (the second call runs nothing).
The error figures are printed; `make fidelity` measures them.
"""
import math
import os
import re
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402

SAMPLE_SEED = 20261202
SAMPLE_PAIRS = 40  # drawn as the full suite draws them; only SAMPLE_KINDS run
SAMPLE_KINDS = ["recompute", "kernels-x0.5", "kernels-x2", "advice-memory", "bucket-up"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import check, exit_status  # noqa: E402


def first_of_each(pairs):
    """The first pair of each of SAMPLE_KINDS."""
    out, seen = [], set()
    for p in pairs:
        if p["kind"] in SAMPLE_KINDS and p["kind"] not in seen:
            seen.add(p["kind"])
            out.append(p)
    return out


def main():
    if fidelity.missing_programs():
        print("skip: %s not built (no simulated device)" % fidelity.missing_programs()[0])
        return 77
    a = fidelity.draw_pairs(SAMPLE_SEED, SAMPLE_PAIRS)
    b = fidelity.draw_pairs(SAMPLE_SEED, SAMPLE_PAIRS)
    c = fidelity.draw_pairs(SAMPLE_SEED + 1, SAMPLE_PAIRS)
    key = lambda ps: [(p["kind"], p["world_seed"], p["profile"], p["job"]) for p in ps]
    check(key(a) == key(b), "one base seed draws the same pairs")
    check(sum(x != y for x, y in zip(key(a), key(c))) >= SAMPLE_PAIRS - 1,
          "another base seed draws other worlds")
    os.environ["SIMGPU_WORLD_SEED"] = "99"
    check(not any(k.startswith("SIMGPU_") for k in fidelity.dpro_env()),
          "dpro's analysis gets no SIMGPU_ setting")
    check(fidelity.world_env(a[0])["SIMGPU_WORLD_SEED"] == str(a[0]["world_seed"]),
          "the job runs in its pair's world")
    del os.environ["SIMGPU_WORLD_SEED"]
    try:
        net = fidelity.measure_network(a[0])
        print("network of world %d (%s): busbw %.1f GB/s, %.1f us a crossing (small sizes "
              "%.1f us across two nodes, %.1f on one)" % ((a[0]["world_seed"], a[0]["profile"])
                                                           + net))
        check(0 < net[0] < max(fidelity.NIC_GBPS.values()) and 0 <= net[1] < 1000,
              "measure_network: busbw under the NIC's line rate, a crossing's latency >= 0")
        perf, fidelity.NCCL_PERF = fidelity.NCCL_PERF, "/nonexistent/nccl-perf"
        check(fidelity.measure_network(a[0]) == net, "measure_network: once per world")
        fidelity.NCCL_PERF = perf
    except fidelity.PairError as e:
        check(False, "measure_network: %s" % e)

    work = tempfile.mkdtemp(prefix="dpro-fidelity-sample-")
    try:
        rows, why = [], []
        for pair in first_of_each(a):
            try:
                rows.append(fidelity.one_pair(pair, work, 10, 2, 50))
            except (fidelity.PairError, KeyError, ValueError) as e:
                why.append("pair %d (%s): %s" % (pair["pair"], pair["kind"], e))
        for w in why:
            check(False, w)
        check(len(rows) == len(SAMPLE_KINDS), "%d of %d pairs ran" % (len(rows), len(SAMPLE_KINDS)))
        if not rows:
            return 1
        fidelity.write_tables(work, rows, "sample")
        with open(os.path.join(work, "fidelity.tsv")) as f:
            lines = f.read().splitlines()
        check(lines[0].split("\t") == fidelity.COLUMNS and len(lines) == len(rows) + 1,
              "fidelity.tsv: the header and one line per pair")
        with open(os.path.join(work, "fidelity.md")) as f:
            md = f.read()
        line = fidelity.summary(rows)
        print(line)
        check(md.rstrip().endswith(line), "fidelity.md ends with the closing line")
        check(re.fullmatch(r"fidelity: \d+ pairs, mean \|error\| [0-9.]+ %, max [0-9.]+ %, "
                           r"worst realised/predicted speedup \d+ %, slower advice \d+", line)
              is not None, "the closing line's format")
        for r in rows:
            nums = [r[k] for k in ("base_us", "replayed_us", "predicted_us", "realised_us",
                                   "predicted_speedup", "realised_speedup")]
            check(all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in nums),
                  "pair %d %s: times and speedups finite and positive %s"
                  % (r["pair"], r["kind"], nums))
            runs = [[float(x) for x in run.split("/")] for run in r["runs"].split()]
            check(len(runs) == 2 and all(len(x) == 3 for x in runs) and
                  abs(r["realised_us"] - fidelity.median([x[2] for x in runs])) <= 1 and
                  abs(r["base_us"] - fidelity.median([x[0] for x in runs])) <= 1,
                  "pair %d: runs gives both attempts' recorded / predicted / realised us, the "
                  "row their medians to the us (%s)" % (r["pair"], r["runs"]))
            errs = sorted(100.0 * (x[2] - x[1]) / x[1] for x in runs)
            check(abs(r["error_pct"] - (errs[0] + errs[1]) / 2) <= 0.1,
                  "pair %d: error %.2f %% the median of the attempts' own errors %s"
                  % (r["pair"], r["error_pct"], ["%.2f" % e for e in errs]))
            check(r["iterations"] >= 10, "pair %d: %d measured iterations per run (at least 10)"
                  % (r["pair"], r["iterations"]))
            stalls = [r["base_stalls_per_s"], r["realised_stalls_per_s"]]
            check(all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in stalls),
                  "pair %d: host stalls a second of both runs' traces counted %s"
                  % (r["pair"], stalls))
            print("      pair %d %s %s %s: predicted %.1f us, realised %.1f us (%+.1f %%), "
                  "speedup %.3f predicted, %.3f realised"
                  % (r["pair"], r["kind"], r["profile"], r["change"], r["predicted_us"],
                     r["realised_us"], r["error_pct"], r["predicted_speedup"],
                     r["realised_speedup"]))
            if r["peak_error_pct"] is not None:
                check(abs(r["peak_error_pct"]) <= 25, "pair %d %s: peak memory predicted %.0f MiB, "
                      "realised %.0f MiB (within 25 %%)" % (r["pair"], r["kind"],
                                                           r["predicted_peak_mib"],
                                                           r["realised_peak_mib"]))
            if r["budget_mib"] is not None:
                check(r["realised_peak_mib"] <= r["budget_mib"], "pair %d: realised peak %.0f MiB "
                      "under the budget %.0f MiB" % (r["pair"], r["realised_peak_mib"],
                                                     r["budget_mib"]))
            if r["kind"] == "kernels-x2":
                check(r["predicted_speedup"] < 1, "kernels x2: dpro predicts the job slower "
                      "(speedup %.3f)" % r["predicted_speedup"])
            if r["kind"] == "kernels-x0.5":
                check(r["predicted_speedup"] > 1, "kernels x0.5: dpro predicts the job faster "
                      "(speedup %.3f)" % r["predicted_speedup"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
