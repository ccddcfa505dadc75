#!/usr/bin/env python3
"""Peak memory of the fidelity suite's memory pairs (DPRO_FIDELITY_SEED 20261202, the quiet
run of 6 December 2026: docs/fidelity.md): dpro-optimize's prediction from a recording of
the job against the peak ddp-sim reports for the changed job. 2 ranks, the simple
physics, 3 measured iterations: the peak is the caching allocator's, which neither the
physics nor the machine's load changes, so the figures are those of the suite's worlds.
Not a test (no bound): a measurement.

usage (from the build directory): measure_memest_pairs.py [PAIR,PAIR...]"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

B = os.environ.get("top_builddir", os.getcwd())
SIMRUN, DDP_SIM, DPRO_RUN, OPTIMIZE = (os.path.join(B, p) for p in (
    "tests/simgpu/simrun", "tests/simgpu/ddp-sim", "tools/dpro-run", "tools/dpro-optimize"))
# (pair, the recorded job, the change), as the suite drew them
PAIRS = [(34, "--preset resnet50 --layers 4 --batch 16 --dtype fp32",
          "--bucket-mb 0.25 --first-bucket-mb 2 --fuse-small --cuda-graph --recompute 0,3,6,9"),
         (5, "--preset resnet50 --layers 4 --batch 32 --dtype bf16", "--recompute 0-11"),
         (17, "--preset resnet50 --layers 4 --batch 128 --dtype bf16", "--recompute 0-2"),
         (29, "--preset resnet50 --layers 3 --batch 128 --dtype tf32", "--recompute 0-1"),
         (6, "--preset gpt --layers 3 --batch 8 --dtype fp32", "--accum-steps 4 --batch 2"),
         (18, "--preset bert-large --layers 3 --batch 16 --dtype tf32", "--accum-steps 2 --batch 8"),
         (30, "--preset gpt --layers 2 --batch 8 --dtype bf16", "--accum-steps 2 --batch 4"),
         (10, "--preset resnet50 --layers 4 --batch 32 --dtype fp32",
          "--fuse-small --cuda-graph --accum-steps 2 --batch 16"),
         (22, "--preset resnet50 --layers 3 --batch 64 --dtype bf16",
          "--fuse-small --cuda-graph --accum-steps 2 --batch 32")]
MIB = 1048576.0


def env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}
    e["SIMRUN_SIMGPU_LIBDIR"] = os.path.join(B, "tests", "simgpu", ".libs")
    e.pop("LD_PRELOAD", None)
    return e


def peak(args, trace=None):
    """ddp-sim's peak bytes (the largest over the ranks) of the job with args."""
    cmd = [SIMRUN, "-n", "2", "--", DDP_SIM, "--iterations", "3", "--warmup", "3"] + args
    if trace:
        cmd = [DPRO_RUN, "-o", trace, "--"] + cmd
    p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300, check=True)
    return max(json.loads(l)["peak_memory_bytes"] for l in p.stdout.splitlines()
               if l.startswith("{"))


def main():
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    tmp = tempfile.mkdtemp(prefix="dpro-measure-memest-")
    try:
        for n, job, change in PAIRS:
            if only and str(n) not in only:
                continue
            trace = os.path.join(tmp, "pair%d" % n)
            base = peak(job.split(), trace)
            real = peak(job.split() + change.split())  # the batch given last wins
            batch = job.split()[job.split().index("--batch") + 1]
            p = subprocess.run([OPTIMIZE, trace, "--json", "-q", "--warmup", "3", "--batch", batch,
                                "--what-if", change], env=env(), capture_output=True, text=True,
                               timeout=300, check=True)
            j = json.loads(p.stdout)
            pred = j["strategies"][0]["peak_memory_bytes"]
            print("pair %2d %-50s recorded %.1f MiB (dpro %.1f), changed: realised %.1f MiB, "
                  "predicted %.1f MiB (%+.1f %%)"
                  % (n, change[:50], base / MIB, j["baseline_peak_memory_bytes"] / MIB, real / MIB,
                     pred / MIB, 100.0 * (real - pred) / pred), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
