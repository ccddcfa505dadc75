#!/usr/bin/env python3
"""The all-reduces a bucket plan makes against those real PyTorch DDP makes
(docs/fidelity.md, "Bucket sizes in an unseen protocol"): the transformer of ddp_train.py
(--dim 256: 28 parameters, 6.3 MiB of gradients) is recorded on 2 ranks of the simulated
device under dpro-run with one bucket (bucket_cap_mb=200), and with each target cap;
dpro-optimize --what-if bucket_cap_mb=X predicts each target from the one-bucket trace.
Compared: the plan's buckets (knobs `buckets`, `bucket_bytes`) against the gradient
all-reduces of the applied run's last step (torchlib.step_allreduces). Not a test (no
bound): a measurement; counts and bytes, which load does not move.

usage (from the build directory, with its venv; traces kept in $MEASURE_DIR, default
/tmp/dpro-measure-ddp-buckets):
  measure_ddp_buckets.py "CAPS"      e.g. measure_ddp_buckets.py "0.1 1 5"
"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (BUILD, DPRO_RUN, SIMRUN, VENV_PY, require_torch,  # noqa: E402
                      sanitizer_env, step_allreduces)

DPRO_OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-ddp-buckets")
TRAIN = os.path.join(HERE, "ddp_train.py")


def record(cap, steps):
    """The trace directory of a run with bucket_cap_mb=cap (recorded unless kept)."""
    d = os.path.join(OUT, "b%g" % cap)
    if not os.path.exists(d + ".done"):
        subprocess.run(["rm", "-rf", d, d + "-out"])
        os.makedirs(d + "-out")
        env = sanitizer_env(dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60"))
        r = subprocess.run(["nice", DPRO_RUN, "-o", d, "--", SIMRUN, "-n", "2", "--timeout", "300",
                            "--", VENV_PY, TRAIN, "--runs", "transformer:bucket=%g" % cap,
                            "--steps", str(steps), "--out", d + "-out", "--dim", "256"],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("recording bucket_cap_mb=%g failed: %s" % (cap, r.stderr[-2000:]))
        open(d + ".done", "w").close()
    return d


def main():
    require_torch(SIMRUN, DPRO_RUN, DPRO_OPTIMIZE)
    os.makedirs(OUT, exist_ok=True)
    base = record(200, 8)
    for cap in map(float, sys.argv[1].split()):
        target = record(cap, 3)
        realised = step_allreduces(sorted(glob.glob(os.path.join(target, "rank0*.dpro")))[0])
        op = subprocess.run([DPRO_OPTIMIZE, base, "--json", "--quiet", "--what-if",
                             "bucket_cap_mb=%g" % cap], capture_output=True, text=True)
        j = json.loads(op.stdout)
        knobs = j["strategies"][0]["knobs"] if j["strategies"] else {}
        predicted = knobs.get("bucket_bytes", [])
        print("bucket_cap_mb=%g: plan %s all-reduces %s; DDP %d %s; bytes equal: %s"
              % (cap, knobs.get("buckets"), predicted, len(realised or []), realised,
                 predicted == realised), flush=True)


main()
