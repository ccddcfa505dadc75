#!/usr/bin/env python3
"""bench_torch_overhead.py (make bench): the collector's overhead on a torch DDP
iteration.  tests/torch/traced_train.py (2 ranks, simple physics, one NVTX range per step,
no operator ranges) runs PAIRS times plain and PAIRS times under dpro-run, interleaved
AB BA ... so that a load drifting across the benchmark weighs on both; per run, the
medians over rank 0's steps after WARMUP of the step's wall time and of the process's CPU
time in it (all threads: the collector's writer thread counts; the CPU time moves less
with other jobs' load than the wall time does).  Prints each run, the median of each
pair's ratio (traced / plain) of both, and the load average, and exits 0: a figure to
read, not a test.  Skips (exit 0, saying so) without venv/.  To compare two collectors
(before and after a change), run it once with each: DPRO_COLLECTOR=/path/libdpro-collector.so
picks the one dpro-run preloads (docs/figures.md, the collector's overhead)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (DPRO_RUN as dpro_run, SIMRUN as simrun, VENV_PY as venv_py,  # noqa: E402
                      BUILD)

PAIRS = int(os.environ.get("BENCH_PAIRS", "3"))
STEPS = int(os.environ.get("BENCH_STEPS", "60"))
WARMUP = 10


def run(traced, tmp, n):
    out = os.path.join(tmp, "run%d" % n)
    os.mkdir(out)
    cmd = [simrun, "-n", "2", "--timeout", "300", "--", venv_py,
           os.path.join(HERE, "traced_train.py"), "--steps", str(STEPS), "--no-emit-nvtx",
           "--out", out]
    if traced:
        cmd = [dpro_run, "-o", os.path.join(tmp, "trace%d" % n), "--"] + cmd
    env = dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="120")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    if r.returncode != 0:
        sys.exit("bench_torch_overhead: run failed (rc %d): %s" % (r.returncode, r.stderr[-2000:]))
    with open(os.path.join(out, "rank0.json")) as f:
        rec = json.load(f)
    return (statistics.median(rec["step_s"][WARMUP:]),
            statistics.median(rec["step_cpu_s"][WARMUP:]))


def main():
    if not os.path.exists(os.path.join(BUILD, "venv", ".dpro-torch-stamp")):
        print("bench_torch_overhead: skipped: no venv with torch in the build tree (make venv)")
        return
    ratios, cpu_ratios = [], []
    with tempfile.TemporaryDirectory(prefix="dpro-bench-torch-") as tmp:
        n = 0
        for pair in range(PAIRS):
            order = (False, True) if pair % 2 == 0 else (True, False)
            t = {}
            for traced in order:
                t[traced] = run(traced, tmp, n)
                n += 1
                print("pair %d %-6s median step %.3f ms, CPU %.3f ms"
                      % (pair, "traced" if traced else "plain", t[traced][0] * 1e3,
                         t[traced][1] * 1e3), flush=True)
            ratios.append(t[True][0] / t[False][0])
            cpu_ratios.append(t[True][1] / t[False][1])
    load = os.getloadavg()
    for what, rs in (("wall time", ratios), ("CPU time", cpu_ratios)):
        print("torch DDP (2 ranks, %d steps, %d measured), collector overhead per iteration, "
              "%s: median %+.1f %% (pairs: %s)"
              % (STEPS, STEPS - WARMUP, what, (statistics.median(rs) - 1) * 100,
                 ", ".join("%+.1f %%" % ((r - 1) * 100) for r in rs)))
    print("load average %.1f %.1f %.1f" % load)


if __name__ == "__main__":
    main()
