#!/usr/bin/env python3
"""test_torch_memest_window.py: the memory estimate (optimizer/memest.h) that dpro-optimize
builds from the window `-n N -w W` reads, against the estimate from every event, on real
PyTorch traces: torch DDP (ddp_train.py's transformer, --seq 128 --dim 256, batch 16) and
FSDP2 (fsdp_train.py's MLP, --dim 256 without resharding, batch 4096), 2 ranks under
simrun and dpro-run (SIMGPU_PHYSICS=simple), 8 steps in NVTX ranges "step <i>"
(--step-ranges: iteration markers, so that -n takes a window): DDP's from step 0 on (the
first step the first marked iteration), FSDP2's from step 1 on (the first step unmarked,
as where a profiler starts after it). The caching allocator reserves its segments (2 MiB,
20 MiB, 32 MiB) in the first step: the estimate takes the activations from them
(memest.segments), which a window that started at the compared iterations would lose;
dpro-optimize's window starts at the trace's start where the traces hold allocations.

- memest_dump (tests/optimizer/memest_dump.c): at -n/-w of dpro-optimize's defaults (0, -1:
  every iteration, no window) and 2/-1, 1/2 and 3/1 (the last two read fewer events; 2/-1
  too unless the warm-up detected puts its iterations at the trace's end), every field of
  the windowed estimate is the full read's; the compared iterations are too where -w is
  given (with the warm-up detected they may differ: the window's first pass detects it on
  the step ranges' ends, the full read on the last host call within each, and the
  detection is on wall-clock step times).
- dpro-optimize --json --strategies memory --memory-budget 140M (the closed loop's
  memory-budget cases, closed_loop_torch.py) with -n 2 and with -n 1 -w 2 against the
  same without -n (every event read): the baseline's peak, the predicted peak of each plan
  listed in both (by its torch_args; which plans are listed, the best by time, may
  differ) and the advice (the top plan) are the same, and the baseline's
  peak is max_memory_reserved() (with the first step marked, 24 % under it where the
  estimate read that step as an ordinary iteration: its backward's segments left out).
- the estimate against what torch reported (the job's rank<R>.json of the estimate's
  rank): the measured peak is torch.cuda.max_memory_reserved(), the static bytes at least
  memory_reserved() before the steps, and the static bytes and the activations (the
  first step's segments) at most memory_reserved() after the first step. Each figure is
  printed (docs/models.md has them).

Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (BUILD, DPRO_RUN, SIMRUN, VENV_PY, check, finish,  # noqa: E402
                      require_torch, sanitizer_env)

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
DUMP = os.path.join(BUILD, "tests", "optimizer", "memest_dump")
require_torch(SIMRUN, DPRO_RUN, OPTIMIZE, DUMP)
STEPS = 8
# (name, script, its arguments, per-rank batch, memory budget, the first step in a range)
JOBS = [("ddp", "ddp_train.py", ["--seq", "128", "--dim", "256", "--fill-mib", "0"], 16,
         "140M", 0),
        ("fsdp", "fsdp_train.py", ["--dim", "256", "--reshard-after-forward", "0"], 4096,
         "140M", 1)]
# (N, W) of -n N -w W; (0, -1) is dpro-optimize's default; W -1: detected
WINDOWS = [(0, -1), (2, -1), (1, 2), (3, 1)]
# dpro-optimize's windows against its full read
OPT_WINDOWS = [["-n", "2"], ["-n", "1", "-w", "2"]]
MIB = 1048576.0

env = sanitizer_env(dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60"))


def trace_job(tmp, name, script, args, batch, ranges_from):
    """The job traced on 2 ranks into tmp/name, steps ranges_from on in step ranges;
    returns (trace folder, [rank0.json's run, rank1.json's]) or None (a failure is
    reported)."""
    out, trace = os.path.join(tmp, name + "-out"), os.path.join(tmp, name)
    os.makedirs(out)
    cmd = [SIMRUN, "-n", "2", "--timeout", "150", "--", DPRO_RUN, "-o", trace, "--", VENV_PY,
           os.path.join(HERE, script)] + args + [
               "--batch", str(batch), "--steps", str(STEPS), "--step-ranges", str(ranges_from),
               "--out", out]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    if not check(r.returncode == 0, "%s ran (rc %d): %s" % (name, r.returncode,
                                                          r.stderr[-3000:])):
        return None
    runs = []
    for rank in range(2):
        with open(os.path.join(out, "rank%d.json" % rank)) as f:
            runs.append(json.load(f)["runs"][0])
    return trace, runs


def dump(trace, n, w, full):
    """memest_dump's fields of trace read with -n n -w w (every event when full), or {}."""
    p = subprocess.run([DUMP, trace, str(n), str(w)] + (["full"] if full else []),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "memest_dump %s %d %d%s exits 0: %s"
          % (trace, n, w, " full" if full else "", p.stderr[-300:]))
    return json.loads(p.stdout) if p.returncode == 0 else {}


def optimize(trace, batch, budget, extra):
    """dpro-optimize's memory advice as (baseline peak, {torch_args: predicted peak}, top
    plan's torch_args), or None."""
    cmd = [OPTIMIZE, trace, "--json", "--quiet", "--strategies", "memory", "--memory-budget",
           budget, "--batch", str(batch)] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if not check(r.returncode == 0, "dpro-optimize %s (rc %d): %s"
                 % (" ".join(extra), r.returncode, r.stderr[-2000:])):
        return None
    rep = json.loads(r.stdout)
    plans = {s["knobs"].get("torch_args", s["description"]): s["peak_memory_bytes"]
             for s in rep["strategies"]}
    top = rep["strategies"][0]["knobs"].get("torch_args") if rep["strategies"] else None
    return rep["baseline_peak_memory_bytes"], plans, top


def windows(name, trace):
    """memest_dump's windowed estimates against the full reads; returns the full read of
    dpro-optimize's default window (or {})."""
    base = {}
    for n, w in WINDOWS:
        win, full = dump(trace, n, w, False), dump(trace, n, w, True)
        if not win or not full:
            continue
        if (n, w) == (0, -1):
            base = full
        elif w >= 0:  # with the warm-up detected the window may reach the trace's end
            check(win["events"] < full["events"], "%s -n %d -w %d: the window holds fewer "
                  "events (%d) than the trace (%d)" % (name, n, w, win["events"],
                                                       full["events"]))
        check(win["segments"] == 1 and win["n_layers"] > 0,
              "%s -n %d -w %d: the activations are the first step's segments (segments %d, "
              "%d of them)" % (name, n, w, win["segments"], win["n_layers"]))
        skip = {"events"} | ({"iter_first", "iter_last"} if w < 0 else set())
        d = sorted(k for k in set(win) | set(full) if k not in skip and win.get(k) != full.get(k))
        check(not d, "%s -n %d -w %d: every field of the windowed estimate is the full read's "
              "(differing: %s)" % (name, n, w, ", ".join(d) or "none"))
        print("%s -n %d -w %d: %d of %d events read, iterations %d-%d (full read: %d-%d), "
              "fields %s" % (name, n, w, win["events"], full["events"], win["iter_first"],
                             win["iter_last"], full["iter_first"], full["iter_last"],
                             "equal" if not d else "differ"))
    return base


def against_torch(name, est, runs):
    """The estimate's fields against what torch reported on the estimate's rank."""
    run = runs[est["rank"]]
    reserved, before = run["max_memory_reserved"], run["before_steps"]["reserved"]
    after_first = run["first_step"]["reserved"]
    acts = sum(est["act_bytes"])
    print("%s (rank %d): peak %.1f MiB, max_memory_reserved %.1f MiB; static %.1f MiB, "
          "memory_reserved before the steps %.1f MiB; activations %.1f MiB in %d segments "
          "%s, workspace %.1f MiB, other %.1f MiB; memory_reserved after the first step "
          "%.1f MiB (max_memory_allocated %.1f MiB)"
          % (name, est["rank"], est["peak_bytes"] / MIB, reserved / MIB,
             est["static_bytes"] / MIB, before / MIB, acts / MIB, est["n_layers"],
             [a / MIB for a in est["act_bytes"]], est["workspace_bytes"] / MIB,
             est["other_bytes"] / MIB, after_first / MIB, run["max_memory_allocated"] / MIB))
    check(est["peak_bytes"] == reserved, "%s: the measured peak (%d) is max_memory_reserved "
          "(%d)" % (name, est["peak_bytes"], reserved))
    check(est["static_bytes"] >= before, "%s: the static bytes (%d) hold what was reserved "
          "before the steps (%d)" % (name, est["static_bytes"], before))
    check(est["static_bytes"] + acts <= after_first, "%s: the static bytes and the "
          "activations (%d) were reserved by the first step's end (%d)"
          % (name, est["static_bytes"] + acts, after_first))


def advice(name, trace, batch, budget, runs):
    """dpro-optimize's memory advice with -n against the full read; its baseline peak
    against max_memory_reserved() (the ranks' largest)."""
    full = optimize(trace, batch, budget, [])
    if not full:
        return
    reserved = max(r["max_memory_reserved"] for r in runs)
    check(full[0] == reserved, "%s: dpro-optimize's baseline peak (%d) is max_memory_reserved "
          "(%d)" % (name, full[0], reserved))
    print("%s: dpro-optimize (every event): baseline peak %.1f MiB, advice %s, plans %s"
          % (name, full[0] / MIB, full[2],
             {k: round(v / MIB, 1) for k, v in sorted(full[1].items())}))
    check(full[2] is not None, "%s: a plan under the %s budget" % (name, budget))
    for extra in OPT_WINDOWS:
        win = optimize(trace, batch, budget, extra)
        if not win:
            continue
        both = sorted(set(win[1]) & set(full[1]))
        differ = [k for k in both if win[1][k] != full[1][k]]
        check(win[0] == full[0] and win[2] == full[2] and both and not differ,
              "%s: dpro-optimize %s: the baseline's peak, the advice and the peak of every "
              "plan listed in both are the full read's (%s against %s; differing: %s)"
              % (name, " ".join(extra), win, full, differ))
        only = sorted(set(win[1]) ^ set(full[1]))
        if only:  # the plans listed are those ranked best by time, which the window moves
            print("%s: dpro-optimize %s: plans listed in one read only: %s"
                  % (name, " ".join(extra), only))


tmp = tempfile.mkdtemp(prefix="dpro-torch-memest-window-")
try:
    for name, script, args, batch, budget, ranges_from in JOBS:
        got = trace_job(tmp, name, script, args, batch, ranges_from)
        if not got:
            continue
        trace, runs = got
        est = windows(name, trace)
        if est:
            against_torch(name, est, runs)
        advice(name, trace, batch, budget, runs)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
