#!/usr/bin/env python3
"""ddp-sim's iteration time and counters move as its options say: a straggler
slows every rank; bigger buckets give fewer all-reduces; accumulation, fusion
and recomputation change what they should.  Ratios with generous margins."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests", "simgpu"))
from simgpu_test import DDP_SIM, SIMRUN, check, ddp, skip_unless_built  # noqa: E402

skip_unless_built(SIMRUN, DDP_SIM)
BASE = ["--preset", "resnet50", "--layers", "4", "--iterations", "4", "--warmup", "1"]


def mean(rows):
    return sum(r["mean_iter_us"] for r in rows) / len(rows)


base = ddp(2, BASE)
check(all(r["world"] == 2 for r in base), "world size")
strag = ddp(2, BASE, extra=["--straggler", "1:2.0"])
for r in strag:
    check(r["mean_iter_us"] > 1.25 * mean(base),  # 2x kernels on rank 1: loose on a busy machine
          "rank %d not slowed by the straggler: %.0f vs %.0f us" % (r["rank"], r["mean_iter_us"], mean(base)))

small = ddp(2, BASE + ["--bucket-mb", "1"])
big = ddp(2, BASE + ["--bucket-mb", "100"])
check(small[0]["allreduces_per_iter"] > big[0]["allreduces_per_iter"] >= 1,
      "bucket size does not change the number of all-reduces")

accum = ddp(2, BASE + ["--accum-steps", "2"])
check(accum[0]["allreduces_per_iter"] == base[0]["allreduces_per_iter"], "accumulation all-reduces")
check(accum[0]["kernels_per_iter"] > 1.6 * base[0]["kernels_per_iter"], "accumulation kernels")
check(mean(accum) > 1.3 * mean(base), "accumulation time")

fused = ddp(2, BASE + ["--fuse-small"])
check(fused[0]["kernels_per_iter"] < 0.8 * base[0]["kernels_per_iter"], "fusion launches")
check(mean(fused) < 1.05 * mean(base), "fusion made it slower")

rec = ddp(2, BASE + ["--recompute", "all"])
check(rec[0]["peak_memory_bytes"] < 0.8 * base[0]["peak_memory_bytes"], "recomputation memory")
check(mean(rec) > 1.1 * mean(base), "recomputation time")

graph = ddp(2, BASE + ["--cuda-graph"])
check(len(graph[0]["iter_us"]) == 4, "cuda graph run")
print("ok: base %.0f us, straggler %.0f us, accum %.0f us, fused %.0f us, recompute %.0f us, graph %.0f us"
      % (mean(base), mean(strag), mean(accum), mean(fused), mean(rec), mean(graph)))
