#!/usr/bin/env python3
"""Closed loop of the optimizer on the simulated device (tests/simgpu).

For each poor configuration of ddp-sim: profile it (2 ranks under simrun, the collector
through tools/dpro-run), run dpro-optimize --json, apply the top recommendation's
ddp_sim_args on top of the same command line, run both again under the same conditions
(the collector on), and compare the realised iteration time with the predicted one and
the realised speedup with the predicted one, and check the peak memory under the budget
when one was given. Prints every run, and one line per configuration.

Iteration times are ddp-sim's own (iter_us, the wall-clock time between its per-
iteration synchronisations), as a mean over ranks of the median over the measured
iterations (20; 40 for the host-bound one): a one-off stall (a rank descheduled for
milliseconds on shared cores) is not the configuration's iteration time. dpro's figures
are compared as the same statistic: the median of its simulated iterations
(dpro-optimize's baseline_median_iter_us and the plan's predicted_median_iter_us; the
predicted speedup is their ratio), not their mean, which carries a stall recorded in the
profile into every prediction made from it (tests/fidelity/fidelity.py does the same).
The typical prediction (predicted_typical_iter_us: each host call at its place's median
time over the iterations, docs/models.md) is printed beside, not judged.

Measurement design. The machines are shared and noisy (several ranks and engineers on two
cores), and the load drifts over a run of the test, so no figure rests on one run and no
comparison is between runs far apart in time:
- prediction: PROFILES (3) profiled runs of the baseline, each optimised; the advice
  applied is the one most of them recommend (ties: the earliest), and the predicted
  iteration time and speedup are the medians over the profiles that recommend it (one
  slow profiled run moves one prediction, not the median);
- realisation: PAIRS (5) pairs of a baseline run (A) and an applied run (B), interleaved
  in the order AB BA AB BA AB, so that a load that rises or falls across the pairs
  weighs on both sides alike; the realised speedup is the median over the pairs of A/B
  (each ratio of two runs next to each other in time), the realised iteration time the
  median of the B runs. The baseline's drift from the profiles to the pairs is printed
  (a load that changed between the two phases shows there, not as a model error unseen),
  with the profiles' prediction and its error;
- the prediction judged: each pair's baseline run (traced, as the profiles) is optimised
  for the advice chosen (dpro-optimize --what-if, pair_prediction), so that the
  prediction of each pair comes from a run next to its applied run; the predicted
  iteration time and speedup judged are the medians over the pairs (the profiles'
  phase only chooses the advice: a drift between the phases, 29 % for the FSDP memory
  budget once, no longer decides the verdict). Every pair's prediction is printed.
Rule, for each configuration: the median realised iteration time within 5 % of the
median predicted one (from the pairs); the median realised speedup at least 0.9 of the
median predicted one, and over 1 where the advice predicts a speedup (accumulation under a memory budget
is predicted slower, by design); the peak memory of every applied run under the budget
(memory does not depend on the load). The same rule for every configuration but one: a
bound that a configuration misses is a finding about the optimizer's models (or the
machine's quiet), not a reason to widen the bound. The exception is the host-bound one
(many small kernels), whose iteration time is set by how fast two shared cores launch:
its baseline moved 30 % between two adjacent runs (5556 and 8001 us in one quiet run of
this design) and 10 % between the two phases, so its median error is bounded at 15 % and
its realised speedup at 0.7 of the predicted one. Its six runs of this design: errors
-0.4, +7.0, +1.7, -0.1, +8.4 % quiet or lightly loaded and -8.8 % at a load of 4-8;
speedup ratios 0.86-1.04. 13 traced runs and 3 optimisations per
configuration (the earlier design, 7 attempts of profile, optimise and apply, took 14 and
7).

Environment: top_srcdir, top_builddir, HAVE_CUDA (exit 77 when 0). Optional:
CLOSED_LOOP_ONLY=name runs one configuration; CLOSED_LOOP_KEEP=dir keeps the traces;
CLOSED_LOOP_PROFILES=N and CLOSED_LOOP_PAIRS=N change the counts (a quick check that
the loop runs; the rule is stated for 3 and 5).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ.get("top_builddir", os.getcwd())
SIMRUN = os.path.join(BUILD, "tests/simgpu/simrun")
DDP_SIM = os.path.join(BUILD, "tests/simgpu/ddp-sim")
DPRO_RUN = os.path.join(BUILD, "tools/dpro-run")
OPTIMIZE = os.path.join(BUILD, "tools/dpro-optimize")
LIBS = os.path.join(BUILD, "tests/simgpu/.libs")

# name, ddp-sim arguments, environment, dpro-optimize arguments. The host-bound one
# (many small kernels) runs 40 iterations: its iteration time is the median of
# iterations whose closing synchronisation wakes up tens to thousands of microseconds
# late on shared cores, and the prediction takes the lower quartile of those wake-ups.
CONFIGS = [
    ("tiny buckets",
     ["--preset", "resnet50", "--layers", "4", "--bucket-mb", "0.05", "--first-bucket-mb", "0.05"],
     {"SIMGPU_NCCL_LAT_US": "1000"},
     ["--strategies", "tensor"]),
    # one all-reduce of every gradient at the end of the backward, on a slow network:
    # only buckets smaller than the trace's (tensor partition) overlap it
    ("huge buckets",
     ["--preset", "resnet50", "--layers", "4", "--bucket-mb", "200", "--first-bucket-mb", "200"],
     {"SIMGPU_NCCL_BW_GBPS": "2"},
     ["--strategies", "tensor"]),
    ("memory budget 500 MiB",
     ["--preset", "resnet50", "--layers", "4", "--batch", "32"],
     {},
     ["--memory-budget", "500M", "--strategies", "memory", "--batch", "32"]),
    ("many small kernels",
     ["--preset", "resnet50", "--layers", "4", "--batch", "8", "--iterations", "40"],
     {},
     ["--strategies", "fusion", "--batch", "8"]),
]

ITERATIONS = ["--iterations", "20", "--warmup", "2"]
RANKS = 2
PROFILES = int(os.environ.get("CLOSED_LOOP_PROFILES", "3"))
PAIRS = int(os.environ.get("CLOSED_LOOP_PAIRS", "5"))
MAX_ERROR_PCT = 5.0
MIN_SPEEDUP_RATIO = 0.9
# the host-bound configuration's bounds (the docstring says why)
HOST_BOUND = "many small kernels"
HOST_BOUND_MAX_ERROR_PCT = 15.0
HOST_BOUND_MIN_SPEEDUP_RATIO = 0.7


def run_job(args, env_extra, trace_dir):
    """Runs ddp-sim on RANKS ranks under the collector; returns (iter us: the mean over
    ranks of their median iteration, peak memory)."""
    env = dict(os.environ, SIMGPU_PHYSICS="simple")  # the consistency (simple) physics
    env["LD_LIBRARY_PATH"] = LIBS + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(env_extra)
    cmd = [SIMRUN, "-n", str(RANKS), "--", DPRO_RUN, "-o", trace_dir, "--", DDP_SIM] + ITERATIONS + args
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("job failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    ranks = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if len(ranks) != RANKS:
        raise RuntimeError("expected %d JSON lines from ddp-sim, got %d" % (RANKS, len(ranks)))
    medians = []
    for r in ranks:
        it = sorted(r["iter_us"])
        n = len(it)
        medians.append(it[n // 2] if n % 2 else (it[n // 2 - 1] + it[n // 2]) / 2)
    return sum(medians) / len(medians), max(r["peak_memory_bytes"] for r in ranks)


def parse_size(s):
    mul = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    return int(float(s[:-1]) * mul[s[-1]]) if s[-1] in mul else int(s)


class DdpSimJob:
    """What the loop needs of a job: run(args, env_extra, trace_dir) -> (iteration us,
    peak memory bytes), traced; the advice's key in the strategy's knobs, and
    apply(advice) -> the arguments that apply it, raising ValueError for advice the
    job cannot take. tests/torch/closed_loop_torch.py gives one for PyTorch DDP."""
    args_key = "ddp_sim_args"
    run = staticmethod(run_job)
    apply = staticmethod(lambda advice: advice.split())


def profile(work, name, args, env, opt_args, k, job=DdpSimJob):
    """One profiled run of the baseline and its optimisation. Returns (a dict of the run and
    the top advice, or None; list of failures)."""
    trace = os.path.join(work, "%s-profile%d" % (name.replace(" ", "_"), k))
    shutil.rmtree(trace, ignore_errors=True)
    base_us, _ = job.run(args, env, trace)
    p = subprocess.run([OPTIMIZE, trace, "--json", "--quiet", "--seed", "1",
                        "--budget-s", "10"] + opt_args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    if p.returncode != 0:
        return None, ["%s: dpro-optimize failed: %s" % (name, p.stderr[-500:])]
    rep = json.loads(p.stdout)
    if not rep["strategies"]:
        return None, ["%s: no strategy recommended" % name]
    top = rep["strategies"][0]
    base_med, pred_med = rep["baseline_median_iter_us"], top["predicted_median_iter_us"]
    return {"base_us": base_us, "replay_us": base_med, "advice": top["knobs"][job.args_key],
            "pred_us": pred_med, "pred_x": base_med / pred_med if pred_med > 0 else 0.0,
            "pred_peak": top["peak_memory_bytes"], "knobs": top["knobs"]}, []


def pair_prediction(work, name, opt_args, advice, j, job=DdpSimJob):
    """The advice's prediction from pair j's baseline run (its trace, profiled at the time of
    the pair: dpro-optimize --what-if): (predicted median us, predicted speedup, the same two
    of the typical prediction: typical host times), or None."""
    trace = os.path.join(work, "%s-A%d" % (name.replace(" ", "_"), j))
    p = subprocess.run([OPTIMIZE, trace, "--json", "--quiet", "--seed", "1", "--what-if", advice]
                       + opt_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    rep = json.loads(p.stdout) if p.returncode == 0 else {"strategies": []}
    top = [s for s in rep["strategies"] if s["knobs"].get(job.args_key) == advice]
    if not top or top[0]["predicted_median_iter_us"] <= 0:
        return None
    pred, typ = top[0]["predicted_median_iter_us"], top[0]["predicted_typical_iter_us"]
    return (pred, rep["baseline_median_iter_us"] / pred, typ,
            rep["baseline_typical_iter_us"] / typ if typ > 0 else 0.0)


def measure(work, name, args, env, extra, j, applied, job=DdpSimJob):
    """One traced run of the baseline (applied False) or of the advice; returns (iter us,
    peak memory)."""
    trace = os.path.join(work, "%s-%s%d" % (name.replace(" ", "_"), "B" if applied else "A", j))
    shutil.rmtree(trace, ignore_errors=True)
    return job.run(args + (extra if applied else []), env, trace)


def one_config(work, name, args, env, opt_args, job=DdpSimJob):
    """The design of the module's docstring for one configuration (of job: DdpSimJob):
    prints every run and returns the list of failures."""
    why, profiles = [], []
    for k in range(1, PROFILES + 1):
        prof, w = profile(work, name, args, env, opt_args, k, job)
        why.extend(w)
        if prof:
            profiles.append(prof)
            print("%s: profile %d: %.1f us (replay, median %.1f us); advice '%s': predicted "
                  "(median) %.1f us, "
                  "x%.3f, peak %.0f MiB" % (name, k, prof["base_us"], prof["replay_us"],
                                           prof["advice"], prof["pred_us"], prof["pred_x"],
                                           prof["pred_peak"] / 1048576.0))
    if len(profiles) < PROFILES:
        return why
    advices = [p["advice"] for p in profiles]
    advice = max(advices, key=lambda a: (advices.count(a), -advices.index(a)))
    chosen = [p for p in profiles if p["advice"] == advice]
    if len(chosen) < len(profiles):
        print("%s: the profiles recommend %s; applied: '%s' (%d of %d)"
              % (name, sorted(set(advices)), advice, len(chosen), len(profiles)))
    pred_us = median([p["pred_us"] for p in chosen])
    pred_x = median([p["pred_x"] for p in chosen])
    budget = None
    if "--memory-budget" in opt_args:
        budget = parse_size(opt_args[opt_args.index("--memory-budget") + 1])

    try:
        extra = job.apply(advice)
    except ValueError as e:
        return why + ["%s: the advice '%s' cannot be applied: %s" % (name, advice, e)]
    print("%s: applied as %s" % (name, " ".join(extra)))
    ratios, applied_us, base_us, pair_pred = [], [], [], []
    for j in range(1, PAIRS + 1):
        order = (False, True) if j % 2 else (True, False)  # AB BA AB ...
        got = {}
        for applied in order:
            got[applied] = measure(work, name, args, env, extra, j, applied, job)
        (a_us, _), (b_us, b_peak) = got[False], got[True]
        ratios.append(a_us / b_us)
        applied_us.append(b_us)
        base_us.append(a_us)
        pp = pair_prediction(work, name, opt_args, advice, j, job)
        if pp is None:
            why.append("%s: pair %d: no prediction of '%s' from its baseline" % (name, j, advice))
        else:
            pair_pred.append(pp)
        over = budget is not None and b_peak > budget
        print("%s: pair %d (%s): baseline %.1f us, applied %.1f us, x%.3f, peak %.0f MiB%s; "
              "predicted from its baseline %s"
              % (name, j, "AB" if j % 2 else "BA", a_us, b_us, a_us / b_us, b_peak / 1048576.0,
                 " OVER THE BUDGET" if over else "",
                 "%.1f us, x%.3f (typical host times: %.1f us, x%.3f)" % pp if pp else "none"))
        if over:
            why.append("%s: pair %d: peak %d bytes over the budget %d" % (name, j, b_peak, budget))

    # what the job can check of the applied run against the plan (the torch jobs: DDP's
    # all-reduces a step), on the last applied run
    check_plan = getattr(job, "check_plan", None)
    if check_plan:
        last = os.path.join(work, "%s-B%d" % (name.replace(" ", "_"), PAIRS))
        why.extend(check_plan(name, chosen[0]["knobs"], last))

    max_err, min_ratio = ((HOST_BOUND_MAX_ERROR_PCT, HOST_BOUND_MIN_SPEEDUP_RATIO)
                          if name == HOST_BOUND else (MAX_ERROR_PCT, MIN_SPEEDUP_RATIO))
    real_us, real_x = median(applied_us), median(ratios)
    # the machine's drift between the profiles and the pairs, told (not judged): the
    # pairs' median baseline against the profiled runs' median
    drift = 100.0 * (median(base_us) / median([p["base_us"] for p in profiles]) - 1)
    print("%s: from the profiles: median predicted %.1f us (error %+.1f%%), x%.3f (ratio %.3f); "
          "baseline %+.1f%% from the profiles to the pairs"
          % (name, pred_us, 100.0 * (real_us - pred_us) / pred_us, pred_x, real_x / pred_x,
             drift))
    # judged: the predictions from each pair's own baseline run (interleaved with its
    # applied run), so that a drift of the machine between the phases does not decide
    if pair_pred:
        pred_us = median([p[0] for p in pair_pred])
        pred_x = median([p[1] for p in pair_pred])
        # told, not judged: the typical prediction (docs/models.md), a stall that moves
        # from step to step left out of the baseline and the plan
        typ_us, typ_x = median([p[2] for p in pair_pred]), median([p[3] for p in pair_pred])
        if typ_us > 0 and typ_x > 0:
            print("%s: with typical host times: median predicted %.1f us (error %+.1f%%), "
                  "x%.3f (ratio %.3f)" % (name, typ_us, 100.0 * (real_us - typ_us) / typ_us,
                                          typ_x, real_x / typ_x))
    err = 100.0 * (real_us - pred_us) / pred_us
    ratio = real_x / pred_x
    print("%s: median predicted %.1f us, median realised %.1f us, error %+.1f%% (bound %g%%); "
          "median realised speedup %.3f, predicted %.3f, ratio %.3f (bound %g)"
          % (name, pred_us, real_us, err, max_err, real_x, pred_x, ratio, min_ratio))
    if abs(err) > max_err:
        why.append("%s: median realised %.1f us against median predicted %.1f us: error "
                   "%+.1f%% over %g%%" % (name, real_us, pred_us, err, max_err))
    if ratio < min_ratio:
        why.append("%s: median realised / median predicted speedup %.3f under %g (pairs %s)"
                   % (name, ratio, min_ratio, " ".join("%.3f" % r for r in ratios)))
    if pred_x > 1.0 and real_x <= 1.0:
        why.append("%s: advice predicted faster does not make the job faster (median realised "
                   "speedup %.3f)" % (name, real_x))
    return why


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def run_configs(configs, prefix, job=DdpSimJob, after=None):
    """Runs one_config for each (name, args, env, opt_args) of configs (only
    CLOSED_LOOP_ONLY's, when set) in a work folder (CLOSED_LOOP_KEEP, kept; else a temporary
    one named prefix...), calling after(name) after each; prints the failures and returns
    the exit status."""
    only = os.environ.get("CLOSED_LOOP_ONLY")
    keep = os.environ.get("CLOSED_LOOP_KEEP")
    work = keep or tempfile.mkdtemp(prefix=prefix)
    failures = []
    try:
        for name, args, env, opt_args in configs:
            if only and only != name:
                continue
            failures.extend(one_config(work, name, args, env, opt_args, job))
            if after:
                after(name)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    if os.environ.get("HAVE_CUDA", "1") == "0":
        print("closed loop: skipped (built without CUDA headers: no simulated device)")
        return 77
    if os.environ.get("DPRO_SANITIZERS") == "1":
        # a timed test: sanitizer overhead on the host side would be measured as the
        # job's own time, so the loop is meaningful only unsanitized
        print("closed loop: skipped (sanitizer build)")
        return 77
    for exe in (SIMRUN, DDP_SIM, DPRO_RUN, OPTIMIZE):
        if not os.access(exe, os.X_OK):
            print("closed loop: skipped (%s not built)" % exe)
            return 77
    return run_configs(CONFIGS, "dpro-closed-loop-")


if __name__ == "__main__":
    sys.exit(main())
