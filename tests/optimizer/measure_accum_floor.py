#!/usr/bin/env python3
"""Kernel time per micro-batch of the fidelity suite's accumulation pairs
(DPRO_FIDELITY_SEED 20261202: pairs 6, 18 and 30), from the traces a run of the suite kept
(FIDELITY_KINDS=accumulation FIDELITY_KEEP=DIR): the forward and backward kernels (all but
the optimizer's and the collectives) of the changed run per micro-batch, against the two
models of docs/models.md: the batch share alone, n c0 + (T - n c0) / k over the recorded
run's n kernels of total T (every one longer than c0), and with the weight floors, which
add w (1 - 1/k) per kernel: dpro-optimize's models.weight_floor_us x (1 - 1/k) per
iteration and rank. Per optimizer step and rank; both runs have the same steps. Device
time, which the machine's load does not change. Not a test (no bound): a measurement.

usage (from the build directory): measure_accum_floor.py KEEP_DIR"""
import json
import os
import subprocess
import sys

B = os.environ.get("top_builddir", os.getcwd())
INFO, OPTIMIZE = (os.path.join(B, p) for p in ("tools/dpro-info", "tools/dpro-optimize"))
# (pair, recorded batch, k, forward and backward kernels per step and rank of the preset)
PAIRS = [("06", 8, 4, 102), ("18", 16, 2, 106), ("30", 8, 2, 73)]


def kernels(trace):
    """Forward and backward kernels of a trace directory: (count, total us)."""
    out = subprocess.run([INFO, "--kernels=50", "--json", trace], capture_output=True,
                         text=True, check=True).stdout
    n = total = 0
    for rank in json.loads(out)["kernels"]["per_rank"]:
        for k in rank["top_kernels"]:
            if not k["communication"] and "adam" not in k["name"]:
                n += k["count"]
                total += k["total_us"]
    return n, total


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    keep = sys.argv[1]
    print("| pair | k | batch share | weight floor | realised | error: batch share | error: floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for pair, batch, k, per_step in PAIRS:
        base = os.path.join(keep, pair + "-accumulation-base")
        new = os.path.join(keep, pair + "-accumulation-new")
        out = subprocess.run([OPTIMIZE, base, "--json", "--quiet", "--warmup", "3", "--batch",
                              str(batch), "--what-if",
                              "--accum-steps %d --batch %d" % (k, batch // k)],
                             capture_output=True, text=True, check=True).stdout
        models = json.loads(out)["models"]
        nb, tb = kernels(base)
        _, tn = kernels(new)
        steps = nb / per_step
        c0 = models["kernel_fixed_us"]
        share = (nb * c0 + (tb - nb * c0) / k) / steps
        floor = share + models["weight_floor_us"] * (1 - 1 / k)
        real = tn / k / steps
        print("| %s | %d | %.0f | %.0f | %.0f | %+.1f %% | %+.1f %% |"
              % (pair, k, share, floor, real, 100 * (real - share) / share,
                 100 * (real - floor) / floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
