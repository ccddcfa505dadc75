#!/usr/bin/env python3
"""Consistency check (simple physics, SIMGPU_PHYSICS=simple): ddp-sim's counters and
iteration time move as its options say.

Counters (exact, from the job's own counts): bigger buckets give fewer all-reduces;
accumulation keeps the all-reduces and doubles the kernels; fusion launches fewer
kernels; recomputation launches more kernels and lowers the peak memory; a CUDA graph
run measures every iteration.  Fusion's effect on time (3 us per fused kernel) is within
the run-to-run noise of shared cores, so it is checked on the launches only.

Times, for effects many times the run-to-run spread (figures of 10 paired runs on a
2-core machine at load 2.4: the ratio's median and standard deviation): a straggler
(rank 1's kernels 2x) slows the job (1.92, sd 0.07); accumulating 2 micro-batches
(1.97, sd 0.14) and recomputing every layer at batch 64, where the device bounds the
step (1.33, sd 0.05), lengthen the iteration.  Rule: each effect is measured in 5
attempts, an attempt being a fresh base run and the variant run right after it (so a
change of load touches both); its ratio is the variant's iteration time over the base's
(the mean over ranks of each rank's median iteration).  Every attempt is printed, and
the check fails when the median of the 5 ratios is under the bound: 1.5 for the
straggler and accumulation, 1.15 for recomputation.  Not under the sanitizers, whose
instrumentation of the host side would be measured as the job's time."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests", "simgpu"))
from simgpu_test import CONSISTENCY, DDP_SIM, SIMRUN, check, ddp, skip_unless_built  # noqa: E402

skip_unless_built(SIMRUN, DDP_SIM)
BASE = ["--preset", "resnet50", "--layers", "4", "--iterations", "4", "--warmup", "1"]
ATTEMPTS = 5


def iter_us(rows):
    """Mean over ranks of each rank's median iteration."""
    return sum(statistics.median(r["iter_us"]) for r in rows) / len(rows)


def timed_effect(what, base_args, args, bound, extra=()):
    """Measures variant/base in ATTEMPTS paired attempts, prints each, and checks that
    the median ratio is at least bound."""
    ratios = []
    for k in range(1, ATTEMPTS + 1):
        b = iter_us(ddp(2, base_args, physics=CONSISTENCY))
        v = iter_us(ddp(2, args, extra=extra, physics=CONSISTENCY))
        ratios.append(v / b)
        print("%s attempt %d: base %.0f us, variant %.0f us, ratio %.3f" % (what, k, b, v, v / b))
    med = statistics.median(ratios)
    print("%s: median ratio %.3f of %d attempts (bound %.2f)" % (what, med, ATTEMPTS, bound))
    check(med >= bound, "%s: median ratio %.3f under %.2f (attempts %s)"
          % (what, med, bound, " ".join("%.3f" % r for r in ratios)))


base = ddp(2, BASE)
check(all(r["world"] == 2 for r in base), "world size")

small = ddp(2, BASE + ["--bucket-mb", "1"])
big = ddp(2, BASE + ["--bucket-mb", "100"])
check(small[0]["allreduces_per_iter"] > big[0]["allreduces_per_iter"] >= 1,
      "bucket size does not change the number of all-reduces")

accum = ddp(2, BASE + ["--accum-steps", "2"])
check(accum[0]["allreduces_per_iter"] == base[0]["allreduces_per_iter"], "accumulation all-reduces")
check(accum[0]["kernels_per_iter"] > 1.6 * base[0]["kernels_per_iter"], "accumulation kernels")

# fusion saves launches (batch 8: host-bound, where they would bound the step)
HOST_BOUND = BASE + ["--batch", "8", "--iterations", "8"]
unfused = ddp(2, HOST_BOUND)
fused = ddp(2, HOST_BOUND + ["--fuse-small"])
check(fused[0]["kernels_per_iter"] < 0.8 * unfused[0]["kernels_per_iter"],
      "fusion launches: %d vs %d" % (fused[0]["kernels_per_iter"], unfused[0]["kernels_per_iter"]))

rec = ddp(2, BASE + ["--recompute", "all"])
check(rec[0]["peak_memory_bytes"] < 0.8 * base[0]["peak_memory_bytes"], "recomputation memory")
check(rec[0]["kernels_per_iter"] > base[0]["kernels_per_iter"],
      "recomputation launches: %d vs %d" % (rec[0]["kernels_per_iter"], base[0]["kernels_per_iter"]))

graph = ddp(2, BASE + ["--cuda-graph"])
check(len(graph[0]["iter_us"]) == 4, "cuda graph run")
print("ok: counters; base %.0f us, batch 8 %.0f us, fused %.0f us (not checked), graph %.0f us"
      % (iter_us(base), iter_us(unfused), iter_us(fused), iter_us(graph)))

if os.environ.get("DPRO_SANITIZERS") == "1":
    print("timed effects not checked: sanitizer build (its host-side instrumentation is "
          "measured as the job's time)")
    sys.exit(0)
timed_effect("straggler", BASE, BASE, 1.5, extra=["--straggler", "1:2.0"])
timed_effect("accumulation", BASE, BASE + ["--accum-steps", "2"], 1.5)
BIG = BASE + ["--batch", "64"]
timed_effect("recomputation", BIG, BIG + ["--recompute", "all"], 1.15)
print("ok: timed effects")
