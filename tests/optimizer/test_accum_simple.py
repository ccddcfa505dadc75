"""test_accum_simple: accumulation's micro-batch in the simple physics, where a GEMM takes
its FLOPs' time alone (tests/simgpu/README.md): a consistency check of the weight floor
(docs/models.md: accumulation).

ddp-sim's gpt (3 blocks, batch 8) and bert-large (3 blocks, batch 16) run on 2 ranks of
the simulated device under the collector; dpro-optimize predicts the job under
`--accum-steps K --batch B/K` (K 4 and 2, the fidelity suite's pairs 6 and 18 in this
physics) and ddp-sim runs it. The figure is the forward and backward kernels' time per
micro-batch, step and rank (measure_accum_floor.py): the changed run's against the same
kernels in dpro's simulated timeline of the plan. The simple physics has no kernel-time
noise and the machine's load does not move device time, so the bound is tight: within
1 %. Its kernels scale with the batch; the weight floor added to the blocks' GEMMs, whose
time is over their bytes' at the optimizer kernels' bandwidth, made gpt -2.7 % and
bert-large -1.6 % (this test, before the floor was kept to the kernels bound by their
bytes). bert-large reads -0.5 %: its embedding's GEMM took its weights' time
(87 us against a pass of 83 us), which a trace of one batch cannot tell from a kernel
bound by its bytes.

Skips (77) without CUDA headers (no simgpu/collector).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replay"))
sys.path.insert(0, HERE)
from replay_testlib import (  # noqa: E402
    BUILD, COLLECTOR, DDP_SIM, DPRO_RUN, LIBDIR, SIMRUN, SKIP, check, exit_status, missing,
    traced_env)
import measure_accum_floor  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
INFO = os.path.join(BUILD, "tools", "dpro-info")
# preset, blocks, batch, k, forward and backward kernels per step and rank
CASES = [("gpt", 3, 8, 4, 102), ("bert-large", 3, 16, 2, 106)]
BOUND_PCT = 1.0


def record(args, trace, env):
    """Runs ddp-sim with args on 2 ranks under the collector into trace; True when it ran."""
    cmd = [DPRO_RUN, "-o", trace, "--", SIMRUN, "-n", "2", "--", DDP_SIM, "--iterations", "4",
           "--warmup", "3"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    ran = p.returncode == 0 and len(rows) == 2
    check(ran, "ddp-sim %s ran (status %d)%s" % (" ".join(args), p.returncode,
                                                 "" if ran else ": " + p.stderr[-300:]))
    return ran


def main():
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM, OPTIMIZE, INFO)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-accum-simple-")
    try:
        env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple")
        for preset, blocks, batch, k, per_step in CASES:
            job = ["--preset", preset, "--layers", str(blocks), "--batch", str(batch)]
            base, new = (os.path.join(tmp, "%s-%s" % (preset, s)) for s in ("base", "new"))
            if not (record(job, base, env) and
                    record(job + ["--accum-steps", str(k), "--batch", str(batch // k)], new,
                           env)):
                continue
            share, model, real = measure_accum_floor.per_micro_batch(base, new, batch, k,
                                                                     per_step)
            err = 100.0 * (real - model) / model
            check(abs(err) <= BOUND_PCT,
                  "%s L%d batch %d over %d micro-batches: kernels per micro-batch predicted "
                  "%.0f us, realised %.0f us (%+.2f %%, within %.1f %%; the batch share alone "
                  "%.0f us)" % (preset, blocks, batch, k, model, real, err, BOUND_PCT, share))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
