#!/usr/bin/env python3
"""test_torch_fsdp.py: FSDP2 (fully_shard, backend nccl) on the simulated device: 2 ranks
under simrun train tests/torch/fsdp_train.py twice in one job (reshard_after_forward with
no prefetch; no resharding with explicit forward and backward prefetch of one block).
Each rank builds its model from a seed of its own: its local shards must differ from the
other rank's, and the full parameters it gathers (full_tensor) must agree with the other
rank's, which they do only when the all-gathers moved the shards.  Then 6 steps under
dpro-run: dpro-replay finds the steady steps from the kernel sequence's period and
dpro-optimize recognises FSDP and advises in its terms, offering to keep the parameters
unsharded (reshard_after_forward=False: the backward re-gathers).  Skips (77) without
venv/ (make venv) or with DPRO_TORCH=0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (BUILD, DPRO_RUN as dpro_run, SIMRUN as simrun,  # noqa: E402
                      VENV_PY as venv_py, check, finish, require_torch,
                      sanitizer_env)

dpro_replay = os.path.join(BUILD, "tools", "dpro-replay")
dpro_optimize = os.path.join(BUILD, "tools", "dpro-optimize")
require_torch(simrun, dpro_run, dpro_replay, dpro_optimize)


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

    # under the collector, 6 steps, no markers: the steady steps from the kernel period
    # (the closing barrier's all-reduce left out), replayed; advice in FSDP's terms
    trace = os.path.join(tmp, "trace")
    r = subprocess.run([dpro_run, "-o", trace, "--", simrun, "-n", "2", "--timeout", "150",
                        "--", venv_py, os.path.join(HERE, "fsdp_train.py"), "--steps", "6"],
                       env=sanitizer_env(env), capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "FSDP2 under dpro-run (rc %d): %s" % (r.returncode, r.stderr[-4000:]))
    rp = subprocess.run([dpro_replay, trace, "--json"], capture_output=True, text=True,
                        timeout=120)
    if check(rp.returncode == 0, "dpro-replay (rc %d): %s" % (rp.returncode, rp.stderr[-2000:])):
        j = json.loads(rp.stdout)
        methods = [q["iteration_method"] for q in j["per_rank"]]
        check(methods == ["kernel-period"] * 2, "iterations from the kernel period: %s" % methods)
        check(j["iterations"] >= 2, "at least 2 steady iterations of 6 steps: %d"
              % j["iterations"])
        check(j["simulated_iter_us"] > 0 and "no iterations found" not in rp.stderr,
              "dpro-replay: %s" % rp.stderr[-500:])
        print("replay: %d iterations (kernel period), measured %.0f us, simulated %.0f us"
              % (j["iterations"], j["measured_iter_us"], j["simulated_iter_us"]))
    op = subprocess.run([dpro_optimize, trace, "--json", "--quiet"], capture_output=True,
                        text=True, timeout=120)
    if check(op.returncode == 0, "dpro-optimize (rc %d): %s" % (op.returncode, op.stderr[-2000:])):
        j = json.loads(op.stdout)
        check(j["framework"]["name"] == "pytorch-fsdp", "framework: %s" % j["framework"])
        top = j["strategies"][0] if j["strategies"] else {}
        check(top.get("knobs", {}).get("torch_args") and "torch" in top.get("advice", ""),
              "advice in PyTorch's terms: %s" % top)
        # FSDP's own knobs: the backward re-gathers (reshard_after_forward=True), so
        # keeping the parameters unsharded is offered, in fully_shard's terms
        check("fsdp" not in j["unavailable"], "FSDP strategies: %s" % j["unavailable"])
        keep = [s for s in j["strategies"] if "fsdp_no_reshard" in s["kind"]]
        check(keep and "reshard_after_forward=False" in keep[0]["knobs"]["torch_args"] and
              "fully_shard" in keep[0]["advice"], "keep unsharded offered: %s"
              % [s["kind"] for s in j["strategies"]])
        print("optimize: %s: %s" % (top.get("kind"), top.get("knobs", {}).get("torch_args")))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
