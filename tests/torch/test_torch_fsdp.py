#!/usr/bin/env python3
"""test_torch_fsdp.py: FSDP2 (fully_shard, backend nccl) on the simulated device: 2 ranks
under simrun train tests/torch/fsdp_train.py twice in one job (reshard_after_forward with
no prefetch; no resharding with explicit forward and backward prefetch of one block).
Each rank builds its model from a seed of its own: its local shards must differ from the
other rank's, and the full parameters it gathers (full_tensor) must agree with the other
rank's, which they do only when the all-gathers moved the shards.  Skips (77) without
venv/ (make venv) or with DPRO_TORCH=0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import SIMRUN as simrun, VENV_PY as venv_py, require_torch  # noqa: E402

require_torch(simrun)
failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + msg)
    return cond


env = dict(os.environ)
env["SIMGPU_PHYSICS"] = "simple"
env["SIMGPU_NCCL_TIMEOUT_S"] = "60"
tmp = tempfile.mkdtemp(prefix="dpro-torch-fsdp-")
try:
    r = subprocess.run([simrun, "-n", "2", "--timeout", "150", "--", venv_py,
                        os.path.join(HERE, "fsdp_train.py"), "--runs", "1:0;0:1", "--out", tmp],
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "FSDP2 on 2 ranks (rc %d): %s" % (r.returncode, r.stderr[-4000:]))
    recs = []
    for rank in range(2):
        path = os.path.join(tmp, "rank%d.json" % rank)
        if check(os.path.exists(path), "rank %d wrote %s" % (rank, path)):
            with open(path) as f:
                recs.append(json.load(f))
    if len(recs) == 2:
        a, b = recs[0]["runs"], recs[1]["runs"]
        check(len(a) == 2 and len(b) == 2, "2 runs on each rank: %d, %d" % (len(a), len(b)))
        for x, y in zip(a, b):
            name = "reshard_after_forward=%s prefetch=%d" % (x["reshard"], x["prefetch"])
            check(x["shards"] != y["shards"], "%s: the ranks' shards are alike" % name)
            check(x["params"] == y["params"], "%s: gathered parameters differ across ranks: "
                  "%d vs %d" % (name, x["params"], y["params"]))
            print("%s: shards differ, gathered parameters agree" % name)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    sys.exit(1)
print("PASS")
