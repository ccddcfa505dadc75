#!/usr/bin/env python3
"""Consistency check (simple physics, SIMGPU_PHYSICS=simple): a rank that dies makes the
other ranks fail cleanly (they detect the dead peer in the collective and exit with an
error), never hang."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tests", "simgpu"))
from simgpu_test import CONSISTENCY, DDP_SIM, SIMRUN, check, simrun, skip_unless_built  # noqa: E402

skip_unless_built(SIMRUN, DDP_SIM)
t0 = time.time()
rc, rows, err = simrun(4, [DDP_SIM, "--layers", "2", "--iterations", "6", "--warmup", "1",
                           "--crash-rank", "1", "--crash-iter", "3"],
                       env={"SIMGPU_NCCL_TIMEOUT_S": "15"}, physics=CONSISTENCY)
elapsed = time.time() - t0
check(rc != 0 and rc != 124, "expected a failure, got rc %d" % rc)
check(len(rows) == 0, "some rank finished although a peer died")
check(err.count("exited with status 1\n") == 3, "survivors did not fail cleanly:\n" + err)
check("status 137" in err, "the dying rank was not killed:\n" + err)
check(elapsed < 12, "took %.1f s to fail" % elapsed)
print("ok: survivors failed in %.2f s" % elapsed)
