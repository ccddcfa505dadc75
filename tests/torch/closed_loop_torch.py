#!/usr/bin/env python3
"""Closed loop of the optimizer on real PyTorch DDP and FSDP2 (tests/torch/ddp_train.py,
fsdp_train.py; stock torch on the simulated device, 2 ranks under simrun, the collector
through tools/dpro-run).

For each poor configuration: profile it, run dpro-optimize --json, map the top
recommendation's torch_args onto ddp_train.py's options (bucket_cap_mb=X: --bucket-cap-mb
X; no_sync=K micro_batch=M: --accum K --batch M; torch.cuda.graph: --cuda-graph;
torch.compile: --compile default), run both again under the same conditions
(the collector on), and compare the realised iteration time with the predicted one and
the realised speedup with the predicted one, and the peak memory
(torch.cuda.max_memory_reserved) with the budget when one was given. Advice that
ddp_train.py cannot take (checkpointing of chosen layers) fails the configuration, saying
so.

The measurement design and the rule are tests/optimizer/closed_loop.py's (its
one_config): 3 profiled runs, the advice most of them recommend, 5 interleaved AB/BA pairs
of baseline and applied runs, each pair's baseline run optimised for that advice, medians;
the median realised iteration time within 5 % of the median predicted one (from the
pairs' baselines), the median realised speedup at least 0.9 of the median
predicted one (and over 1 where a speedup is predicted), every applied run's peak memory
under the budget; for a bucket plan, the applied run's all-reduces a step (the last pair's
trace, rank 0) are the plan's, their count and bytes (knobs buckets, bucket_bytes), which
no load moves. A run's iteration time is the mean over the ranks of the median of its
steps' wall-clock times (ddp_train.py's iter_us: from one synchronisation after the
backward to the next), the first two left out (DDP rebuilds its buckets after the first
step).

Each rank's process is bound to one CPU (simrun --bind-cpus, as mpirun binds ranks to cores;
binds(): when RANKS is no more than the CPUs this process may use), as the fidelity suite
binds its pairs: unbound, the kernel wakes a rank's threads beside the other rank's
spinning host thread, and on a 2-core machine a share of the steps that changes from run
to run waits for a CPU (the DDP memory budget's baseline runs 12.8-31.0 ms unbound against
10.4-18.4 ms bound, three attempts each at a load of 3-8, and its errors -13.0 to +16.6 %
against -10.6 to -5.4 %; docs/figures.md, "Ranks bound to a CPU each"). Bound,
the collector records one CPU per rank (host_cpus), which only dpro-replay's host-share
model reads, under --what-if-ranks: nothing these configurations ask.

Configurations (SIMGPU_PHYSICS=simple, as closed_loop.py):
- tiny buckets: 10 KiB buckets on a network with 1 ms latency per collective;
- huge buckets: one 200 MB bucket (every gradient all-reduced after the backward) of a
  wider model on a 0.25 GB/s network: only smaller buckets overlap it with the backward;
- ddp memory budget: a transformer of --seq 128 --dim 256 at batch 16 (158 MiB reserved)
  under a 140 MiB budget (--strategies memory --batch 16): the peak-memory estimate takes
  the activations from the caching allocator's segments of the first step
  (optimizer/memest.h), and the advice, no_sync=K micro_batch=B, is applied as
  --accum K --batch B;
- ddp host-bound: 8 transformer blocks of width 64 at batch 2 (about 880 device ops a step,
  each a few microseconds: the host's launches and Python set the step time); dpro-optimize
  --strategies capture (the capture alone) advises
  torch.cuda.graph of the whole step, predicted over that region (optimizer/workload.h:
  WL_CAPTURE_STEP), applied as --cuda-graph (the step with zero_grad and DDP's all-reduces
  captured after 11 eager steps, then replayed);
- ddp host-bound compile: the same job advised with --strategies fusion (operator fusion,
  torch.compile, and the capture): torch.compile is applied as --compile default
  (DDP(torch.compile(model)), its compiling steps untimed; Inductor's and Triton's caches
  in the build tree, tests/torch/compile-cache, as test_torch_compile.py's), with the
  capture as --cuda-graph of the compiled step when advised too. Besides the rule, a
  fusion plan's kernels, launch calls and host calls a step (rank 0, the medians of
  measure_step_calls.py over the last steps of dpro-optimize --what-if --chrome from the
  last pair's baseline) are those of the applied run (dpro-export of the last pair's
  applied trace), each within 5 % (counts no load moves);
- fsdp memory budget: fsdp_train.py's MLP at --dim 256, batch 4096, without resharding
  after the forward (162 MiB reserved) under a 140 MiB budget: the same advice, applied
  as --accum K --batch B (set_requires_gradient_sync(False) on all micro-batches but the
  last);
- fsdp reshard budget: fsdp_train.py's MLP at --dim 1024, batch 256, without resharding
  (336 MiB reserved, 64 MiB of it the gathered parameters) under a 320 MiB budget:
  resharding after the forward (reshard_after_forward=True, applied as
  --reshard-after-forward 1) frees the gathered parameters, accumulation the activations;
- fsdp poor prefetch: fsdp_train.py's MLP at --dim 256, batch 1024, resharding after the
  forward and without explicit prefetch, on a network with 2 ms latency per collective
  (--strategies fsdp: FSDP's own knobs only); the advice, reshard_after_forward=False
  and/or prefetch=1, is applied as --reshard-after-forward 0 / --prefetch 1.

Not in make check (about 13 traced runs of 5-10 s per configuration on a loaded 2-core
machine): `make closed-loop-torch`. Skips (77) without the venv, as the torch tests do.
Environment: CLOSED_LOOP_ONLY=name, CLOSED_LOOP_KEEP=dir, CLOSED_LOOP_PROFILES=N and
CLOSED_LOOP_PAIRS=N as closed_loop.py; CLOSED_LOOP_BIND=0 or 1 leaves the ranks unbound or
binds them whatever the CPUs."""
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "optimizer"))
from torchlib import (BUILD, DPRO_RUN, SIMRUN, VENV_PY, require_torch,  # noqa: E402
                      sanitizer_env, step_allreduces)
import closed_loop  # noqa: E402
import measure_step_calls  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
EXPORT = os.path.join(BUILD, "tools", "dpro-export")
MAX_COUNT_PCT = 5.0  # a fusion plan's counts a step against the applied run's (check_fusion)
RANKS = 2
STEPS = 20
WARM_STEPS = 2  # step times left out: DDP rebuilds its buckets after the first step
# Inductor's and Triton's caches in the build tree (test_torch_compile.py's): the first
# --compile run compiles, later ones load
COMPILE_CACHE = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(BUILD, "tests", "torch", "compile-cache",
                                                         "inductor"),
                 "TRITON_CACHE_DIR": os.path.join(BUILD, "tests", "torch", "compile-cache",
                                                  "triton")}

# name, ddp_train.py arguments, environment, dpro-optimize arguments
CONFIGS = [
    ("ddp tiny buckets", ["--bucket-cap-mb", "0.01"], {"SIMGPU_NCCL_LAT_US": "1000"},
     ["--strategies", "tensor"]),
    ("ddp huge buckets", ["--bucket-cap-mb", "200", "--dim", "256"], {"SIMGPU_NCCL_BW_GBPS": "0.25"},
     ["--strategies", "tensor"]),
    ("ddp memory budget", ["--batch", "16", "--seq", "128", "--dim", "256"], {},
     ["--strategies", "memory", "--memory-budget", "140M", "--batch", "16"]),
    ("ddp host-bound", ["--layers", "8", "--batch", "2"], {},
     ["--strategies", "capture", "--batch", "2"]),
    ("ddp host-bound compile", ["--layers", "8", "--batch", "2"], {},
     ["--strategies", "fusion", "--batch", "2"]),
]
# name, fsdp_train.py arguments, environment, dpro-optimize arguments
FSDP_CONFIGS = [
    ("fsdp memory budget", ["--batch", "4096", "--dim", "256", "--reshard-after-forward", "0"],
     {}, ["--strategies", "memory", "--memory-budget", "140M", "--batch", "4096"]),
    ("fsdp reshard budget", ["--batch", "256", "--dim", "1024", "--reshard-after-forward", "0"],
     {}, ["--strategies", "memory", "--memory-budget", "320M", "--batch", "256"]),
    ("fsdp poor prefetch", ["--batch", "1024", "--dim", "256", "--reshard-after-forward", "1",
                            "--prefetch", "0"],
     {"SIMGPU_NCCL_LAT_US": "2000"}, ["--strategies", "fsdp"]),
]


def median(xs):
    return closed_loop.median(xs)


def binds():
    """Whether each rank's process is bound to one CPU (simrun --bind-cpus; the module's
    docstring says why): CLOSED_LOOP_BIND=1 or 0 when set, else when RANKS is no more than
    the CPUs this process may use."""
    env = os.environ.get("CLOSED_LOOP_BIND")
    if env in ("0", "1"):
        return env == "1"
    return RANKS <= len(os.sched_getaffinity(0))


class TorchDdpJob:
    """ddp_train.py as closed_loop.one_config runs it (closed_loop.DdpSimJob)."""
    args_key = "torch_args"
    train = os.path.join(HERE, "ddp_train.py")
    common = ["--steps", str(STEPS), "--fill-mib", "0"]
    # the advice's options and the script's
    opts = {"bucket_cap_mb": "--bucket-cap-mb", "no_sync": "--accum", "micro_batch": "--batch"}
    values = {}  # the advice's values the script spells otherwise
    # the advice's options without a value
    flags = {"torch.cuda.graph": ["--cuda-graph"], "torch.compile": ["--compile", "default"]}

    @classmethod
    def run(cls, args, env_extra, trace_dir):
        """Runs ddp_train.py on RANKS ranks under the collector; returns (iter us: the mean
        over ranks of their median step, peak memory: the largest max_memory_reserved)."""
        env = dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60")
        env.update(COMPILE_CACHE)
        env.update(env_extra)
        env = sanitizer_env(env)
        out = trace_dir + "-out"  # the ranks' results (their stdout lines may interleave)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        # a --compile run's first start in a build tree compiles into the empty cache (132 s
        # on a quiet 2-core machine, 31 s once the cache holds it); its steps are timed alike
        limit = 600 if "--compile" in args else 150
        cmd = ([SIMRUN, "-n", str(RANKS), "--timeout", str(limit)]
               + (["--bind-cpus"] if binds() else [])
               + ["--", DPRO_RUN, "-o", trace_dir, "--", VENV_PY, cls.train] + cls.common + args
               + ["--out", out])
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=limit + 50)
        if p.returncode != 0:
            raise RuntimeError("job failed (%d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                           p.stderr[-2000:]))
        runs = []
        for r in range(RANKS):
            with open(os.path.join(out, "rank%d.json" % r)) as f:
                runs.append(json.load(f)["runs"][0])
        iter_us = sum(median(r["iter_us"][WARM_STEPS:]) for r in runs) / RANKS
        return iter_us, max(r["max_memory_reserved"] for r in runs)

    @classmethod
    def check_plan(cls, name, knobs, trace_dir):
        """A bucket plan's all-reduces a step (knobs buckets, bucket_bytes) against those of
        the applied run traced in trace_dir (rank 0's last step); a fusion plan's
        (torch.compile) kernels, launches and host calls a step against the applied run's
        (check_fusion); returns the failures."""
        if knobs.get("fuse_small"):
            return check_fusion(name, knobs[cls.args_key], trace_dir)
        if "bucket_bytes" not in knobs:
            return []
        files = sorted(glob.glob(os.path.join(trace_dir, "rank0*.dpro")))
        real = step_allreduces(files[0]) if files else None
        pred = knobs["bucket_bytes"]
        print("%s: all-reduces a step: predicted %d (%s), realised %s (%s)"
              % (name, knobs["buckets"], pred, len(real) if real is not None else "?", real))
        if real is None:
            return ["%s: no steady step of all-reduces in %s" % (name, trace_dir)]
        if knobs["buckets"] != len(real) or (knobs["buckets"] <= 64 and pred != real):
            return ["%s: the plan's all-reduces %s, the applied run's %s" % (name, pred, real)]
        return []

    @classmethod
    def apply(cls, advice):
        """The script's options for torch_args; ValueError for what it cannot take."""
        out = []
        for tok in advice.split():
            if tok in cls.flags:
                out += cls.flags[tok]
                continue
            key, _, val = tok.partition("=")
            if key not in cls.opts or not val:
                raise ValueError("%s has no option for '%s'" % (os.path.basename(cls.train), tok))
            out += [cls.opts[key], cls.values.get(val, val)]
        return out


class TorchFsdpJob(TorchDdpJob):
    """fsdp_train.py (FSDP2): accumulation through set_requires_gradient_sync(False)."""
    train = os.path.join(HERE, "fsdp_train.py")
    common = ["--steps", str(STEPS)]
    opts = {"no_sync": "--accum", "micro_batch": "--batch",
            "reshard_after_forward": "--reshard-after-forward", "prefetch": "--prefetch"}
    values = {"False": "0", "True": "1"}
    flags = {}


def step_counts(chrome):
    """Rank 0's kernels, launch calls and host calls a step (the medians over the last steps of
    tests/torch/measure_step_calls.py, from a Chrome timeline): counts no load moves."""
    st = measure_step_calls.steps(chrome, 0)
    if not st:
        return None
    kernels = [sum(n for (t, _), n in s[3].items() if t.startswith("stream")) for s in st]
    launches = [sum(n for (t, c), n in s[3].items() if not t.startswith("stream")
                    and "Launch" in c) for s in st]
    calls = [sum(n for (t, _), n in s[3].items() if not t.startswith("stream")) for s in st]
    return median(kernels), median(launches), median(calls)


def check_fusion(name, advice, trace_dir):
    """The plan of advice, simulated from the last pair's baseline run (dpro-optimize --what-if
    --chrome), against the applied run traced in trace_dir (dpro-export): rank 0's kernels,
    launches and host calls a step, each within MAX_COUNT_PCT; returns the failures."""
    base = trace_dir[:trace_dir.rindex("-B")] + "-A" + trace_dir[trace_dir.rindex("-B") + 2:]
    plan, real, was = trace_dir + "-plan.json", trace_dir + "-real.json", base + "-base.json"
    runs = [[OPTIMIZE, base, "--quiet", "--seed", "1", "--what-if", advice, "--chrome", plan],
            [EXPORT, trace_dir, "--chrome", real], [EXPORT, base, "--chrome", was]]
    for cmd in runs:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            return ["%s: %s failed: %s" % (name, " ".join(cmd), p.stderr[-500:])]
    got, want, was = step_counts(real), step_counts(plan), step_counts(was)
    print("%s: rank 0 a step (kernels, launches, host calls): baseline %s, plan %s, applied %s"
          % (name, was, want, got))
    if got is None or want is None:
        return ["%s: no steps in the timelines %s, %s" % (name, plan, real)]
    return ["%s: %s a step: the plan's %g, the applied run's %g" % (name, what, w, g)
            for what, w, g in zip(("kernels", "launches", "host calls"), want, got)
            if abs(g - w) > MAX_COUNT_PCT / 100.0 * w]


def main():
    require_torch(SIMRUN, DPRO_RUN, OPTIMIZE)
    if os.environ.get("DPRO_SANITIZERS") == "1":
        print("closed loop: skipped (sanitizer build: a timed test)")
        return 77
    print("load average at the start: %.2f %.2f %.2f; ranks %s" % (os.getloadavg() + (
        "bound to a CPU each (simrun --bind-cpus)" if binds() else "unbound",)))
    after = lambda name: print("load average after %s: %.2f %.2f %.2f"  # noqa: E731
                               % ((name,) + os.getloadavg()))
    rc = closed_loop.run_configs(CONFIGS, "dpro-closed-loop-torch-", TorchDdpJob, after=after)
    rc_fsdp = closed_loop.run_configs(FSDP_CONFIGS, "dpro-closed-loop-fsdp-", TorchFsdpJob,
                                      after=after)
    return rc or rc_fsdp


if __name__ == "__main__":
    sys.exit(main())
