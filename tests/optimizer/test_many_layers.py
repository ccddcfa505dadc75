"""test_many_layers: dpro-optimize on a trace of more than 512 layers (STRATEGY_MAX_LAYERS:
a plan's recompute flags cover 512). ddp-sim's resnet50 with 180 bottlenecks (542 layers,
one activation each) runs on 2 ranks of the simulated device under the collector; the
search, given a memory budget that only recomputation and accumulation can meet, runs
twice with one --seed:

- the memory estimator finds more than 512 activation layers (its debug line);
- both runs exit 0 and print the same JSON, the two timing keys (search_s,
  evaluations_per_s) aside: deterministic under --seed;
- the best strategies recompute and fit the budget.

The search is bounded by --max-evals, not by time (--budget-s far above what it takes), so
that load cannot change what it evaluates. In the sanitizer builds it runs too (the
collector's runtime preloaded first): a read past the flags is an ASan report, a failure.
Skips (77) without CUDA headers (no simgpu/collector).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import (  # noqa: E402
    BUILD, COLLECTOR, DDP_SIM, DPRO_RUN, LIBDIR, SIMRUN, SKIP, check, collector_records,
    exit_status, missing, traced_env)

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
BOTTLENECKS = 180  # ddp-sim's resnet50: 3 layers each and 2 more, 542 in all
BUDGET = "4.3G"    # the job's peak is 4.43 GB; parameters and optimizer state take 4.0 GB
TIMING_KEYS = ("search_s", "evaluations_per_s")


def why(stderr):
    """What a failed run said: a sanitizer's report line first, then the end."""
    said = [l for l in stderr.splitlines() if "ERROR: " in l or "runtime error" in l]
    return " / ".join(said[:2] + [stderr[-300:]])


def optimize(trace_dir):
    """One search; returns (the JSON without its timing keys, activation counts, stderr) or
    (None, [], stderr)."""
    env = dict(os.environ, DPRO_LOG="debug")
    p = subprocess.run([OPTIMIZE, trace_dir, "--json", "--seed", "7", "--max-evals", "100",
                        "--budget-s", "1000", "--memory-budget", BUDGET, "-q"],
                       capture_output=True, text=True, timeout=600, env=env)
    layers = [int(n) for n in re.findall(r"(\d+) activations", p.stderr)]
    if p.returncode != 0:
        return None, layers, p.stderr
    j = json.loads(p.stdout)
    for k in TIMING_KEYS:
        j.pop(k, None)
    return j, layers, p.stderr


def main():
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM, OPTIMIZE)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-many-layers-")
    try:
        env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR)
        trace = os.path.join(tmp, "trace")
        collector_records(trace, [SIMRUN, "-n", "2", "--", DDP_SIM, "--preset", "resnet50",
                                  "--layers", str(BOTTLENECKS), "--batch", "1",
                                  "--iterations", "3", "--warmup", "1"], env)
        first, layers, err1 = optimize(trace)
        second, _, err2 = optimize(trace)
        check(first is not None, "first search exits 0%s" % ("" if first else ": " + why(err1)))
        check(second is not None,
              "second search exits 0%s" % ("" if second else ": " + why(err2)))
        check(len(layers) == 2 and min(layers) > 512,
              "more than 512 activation layers on each rank (%s)" % layers)
        if first is None or second is None:
            return exit_status()
        same = first == second
        check(same, "the same strategies from one --seed twice")
        if not same:
            for k in sorted(set(first) | set(second)):
                if first.get(k) != second.get(k):
                    print("  %s: %s\n  %s: %s" % (k, json.dumps(first.get(k))[:400], k,
                                                  json.dumps(second.get(k))[:400]))
        budget = first["memory_budget_bytes"]
        best = first["strategies"]
        check(bool(best) and not first["baseline_fits_budget"],
              "the baseline (%s bytes) exceeds the budget, strategies found (%d)"
              % (first["baseline_peak_memory_bytes"], len(best)))
        check(all(s["peak_memory_bytes"] <= budget for s in best),
              "every strategy fits the budget (%s)" % [s["peak_memory_bytes"] for s in best])
        check(any("recompute" in s["kind"] for s in best),
              "a strategy recomputes (%s)" % [s["kind"] for s in best])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
