#!/usr/bin/env python3
"""Consistency check (simple physics, SIMGPU_PHYSICS=simple): a collective across 4
ranks completes only when the slowest rank arrives, and then on every rank at about the
same time; grouped send/recv and split work.  The stand-in moves no data here
(SIMGPU_NCCL_DATA=0): copying 4 MiB through the shared segment takes real host time (350-430
ms per all-reduce on 4 ranks in the ThreadSanitizer build), which would be measured as
collective time; test_nccl_data.sh checks the data."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests", "simgpu"))
from simgpu_test import CONSISTENCY, SIMGPU, SIMRUN, check, simrun, skip_unless_built  # noqa: E402

TEST_COLL = os.path.join(SIMGPU, "test_coll")
skip_unless_built(SIMRUN, TEST_COLL)

SLOW, DELAY = 2, 300.0
rc, rows, err = simrun(4, [TEST_COLL, str(SLOW), str(DELAY)],
                       env={"SIMGPU_NCCL_LAT_US": "20", "SIMGPU_NCCL_BW_GBPS": "20",
                            "SIMGPU_NCCL_DATA": "0"},
                       physics=CONSISTENCY)
check(rc == 0 and len(rows) == 4, "test_coll failed: rc %d\n%s" % (rc, err))
late = rows[SLOW]["enqueue_ms"]
for r in rows:
    check(r["done_ms"] >= late, "rank %d finished before the slow rank arrived" % r["rank"])
    if r["rank"] != SLOW:
        check(late - r["enqueue_ms"] > DELAY * 0.8, "rank %d did not wait" % r["rank"])
    # 4 MiB all-reduce: 2*3/4*4 MiB / 20 GB/s ~ 0.3 ms after the last arrival.
    check(r["done_ms"] - late < 100, "rank %d finished %.1f ms after the last arrival"
          % (r["rank"], r["done_ms"] - late))
ends = [r["done_ms"] for r in rows]
check(max(ends) - min(ends) < 50, "ranks finished %.1f ms apart" % (max(ends) - min(ends)))
print("ok: slow rank arrived at +%.1f ms, all done within %.2f ms"
      % (late - min(r["enqueue_ms"] for r in rows), max(ends) - min(ends)))
