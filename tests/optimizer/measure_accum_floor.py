#!/usr/bin/env python3
"""Kernel time per micro-batch of the fidelity suite's accumulation pairs
(DPRO_FIDELITY_SEED 20261202: pairs 6, 18 and 30), from the traces a run of the suite kept
(FIDELITY_KINDS=accumulation FIDELITY_KEEP=DIR), or from the same jobs recorded in another
physics under the same names (KEEP_DIR/NN-accumulation-base and -new): the forward and
backward kernels (all but the optimizer's and the collectives) of the changed run per
micro-batch, against the batch share alone, n c0 + (T - n c0) / k over the recorded run's
n kernels of total T (every one longer than c0), and against dpro's model (docs/models.md:
accumulation, with the weight floors): the same kernels in the simulated timeline of the
plan (dpro-optimize --what-if ... --chrome), which holds every iteration of the recording.
Per optimizer step and rank; both runs have the same steps. Device time, which the
machine's load does not change. Not a test (no bound): a measurement.

usage (from the build directory): measure_accum_floor.py KEEP_DIR"""
import json
import os
import subprocess
import sys
import tempfile

B = os.environ.get("top_builddir", os.getcwd())
INFO, OPTIMIZE = (os.path.join(B, p) for p in ("tools/dpro-info", "tools/dpro-optimize"))
# (pair, recorded batch, k, forward and backward kernels per step and rank of the preset)
PAIRS = [("06", 8, 4, 102), ("18", 16, 2, 106), ("30", 8, 2, 73)]


def fwd_bwd(name, communication):
    """A forward or backward kernel: not a collective's, not the optimizer's."""
    return not communication and "adam" not in name


def traced_name(e):
    """A Chrome slice's kernel name as traced (the export shows kernels shortened)."""
    return e.get("args", {}).get("full_name", e["name"])


def kernels(trace):
    """Forward and backward kernels of a trace directory: (count, total us)."""
    out = subprocess.run([INFO, "--kernels=50", "--json", trace], capture_output=True,
                         text=True, check=True).stdout
    n = total = 0
    for rank in json.loads(out)["kernels"]["per_rank"]:
        for k in rank["top_kernels"]:
            if fwd_bwd(k["name"], k["communication"]):
                n += k["count"]
                total += k["total_us"]
    return n, total


def model(base, batch, k):
    """dpro's plan of accumulation over k from the recording base: (its models, the
    forward and backward kernels' total us in its simulated timeline)."""
    with tempfile.TemporaryDirectory() as tmp:
        chrome = os.path.join(tmp, "plan.json")
        out = subprocess.run([OPTIMIZE, base, "--json", "--quiet", "--warmup", "3", "--batch",
                              str(batch), "--what-if",
                              "--accum-steps %d --batch %d" % (k, batch // k), "--chrome",
                              chrome], capture_output=True, text=True, check=True).stdout
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
    total = sum(e["dur"] for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"
                and fwd_bwd(traced_name(e), traced_name(e).startswith("nccl")))
    return json.loads(out)["models"], total


def per_micro_batch(base, new, batch, k, per_step):
    """Kernel us per micro-batch, optimizer step and rank of accumulation over k from the
    recording base (batch, per_step forward and backward kernels a step and rank) to the
    changed run new: (the batch share, dpro's model, realised)."""
    models, planned = model(base, batch, k)
    nb, tb = kernels(base)
    _, tn = kernels(new)
    steps = nb / per_step
    c0 = models["kernel_fixed_us"]
    return (nb * c0 + (tb - nb * c0) / k) / steps, planned / steps, tn / k / steps


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    keep = sys.argv[1]
    print("| pair | k | batch share | model | realised | error: batch share | error: model |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for pair, batch, k, per_step in PAIRS:
        share, floor, real = per_micro_batch(os.path.join(keep, pair + "-accumulation-base"),
                                             os.path.join(keep, pair + "-accumulation-new"),
                                             batch, k, per_step)
        print("| %s | %d | %.0f | %.0f | %.0f | %+.1f %% | %+.1f %% |"
              % (pair, k, share, floor, real, 100 * (real - share) / share,
                 100 * (real - floor) / floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
