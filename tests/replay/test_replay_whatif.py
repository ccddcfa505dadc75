"""test_replay_whatif: a what-if prediction checked against the real thing on the
simulated GPU. ddp-sim (2 ranks, resnet50) is profiled under the collector;
`dpro-replay --what-if-scale-kernels F` predicts its iteration time if every kernel took
F times as long; ddp-sim then runs with SIMGPU_SLOWDOWN=F on every rank (the device's
kernels F times as long, collectives and host time unchanged) and the prediction must
be close to ddp-sim's own iteration time, for F = 0.5 (a device twice as fast) and F = 2.

The prediction depends on the wake-ups between host threads (replay/build.c): ddp-sim's
backward thread sleeps until the main thread has launched the forward, and the main
thread sleeps until the backward thread is done, as PyTorch's autograd engine does.
Without them both threads keep their measured gaps and a faster device predicts no
speedup at all.

Timing on a shared host is noisy (two ranks and their host threads share the CPUs with
whatever else runs), so each factor is measured in 5 attempts, every one printed, and
each attempt is made so that the load weighs on both sides alike:
  - the same statistic on both sides: the median iteration (ddp-sim's ranks' median of
    their measured iterations, averaged; dpro-replay's predicted_median_iter_us), which an
    iteration that another job stalled does not move (the means did: a stall in the profile
    was carried into the prediction, one in a realised run into the realised mean);
  - the same conditions: the realised runs are traced as the profile is (under load the
    collector's writer thread takes its share of the cores from the job's host threads:
    untraced, the realised runs at F = 0.5 were faster than every prediction of a test
    run twice, by 3.8 to 20.0 % at load 9-16);
  - realised twice, before the profile and after the prediction, and compared with the
    two runs' mean, which a load drifting across the attempt weighs on alike; their spread
    |A - B| / mean is how far the machine moved the job between them.
Rule: the median of the 5 errors' magnitudes under the factor's bound plus half the
attempts' median spread (a realised time known only within that at the profile's
moment), the allowance at most the bound itself (a machine moving the job by more than
twice the bound says nothing of the prediction; the test is then one to rerun quieter);
on a quiet machine the spread is small and the bound is the factor's own:
5 % for F = 2, 10 % for F = 0.5, where 9 attempts on a quiet machine (load 0.02-1, 2
cores) gave -3.9 -5.0 -5.3 -4.1 -2.8 +3.0 -0.4 -5.4 +6.7 %: the faster device's
prediction is not reproducibly within 5 % (a replay without the wake-ups misses by about
half). With the means, one untraced realised run and no spread, the test failed at load
7-13 (realised runs spreading -68 to +84 %); docs/figures.md gives the failure rates
before and after under load. Skips (77) without CUDA headers (no simgpu/collector), in
a sanitizer build (a timed test: the instrumentation of the host side would be measured
as the job's own time), or when the collector cannot be preloaded.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    missing, collector_records, exit_status, SKIP, COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM,
    LIBDIR, REPLAY, check, traced_env)

RANKS = 2
JOB = ["--preset", "resnet50", "--iterations", "10", "--warmup", "2"]


def job_env(slowdown=None):
    env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple")
    env.pop("SIMGPU_SLOWDOWN", None)
    if slowdown is not None:
        env["SIMGPU_SLOWDOWN"] = repr(slowdown)
    return env


def median_iter_us(stdout):
    """ddp-sim's ranks' median iteration (of their measured ones), averaged over the ranks:
    the statistic of dpro-replay's predicted_median_iter_us."""
    lines = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    if len(lines) != RANKS:
        return None
    return sum(statistics.median(l["iter_us"]) for l in lines) / len(lines)


def profile(out_dir):
    """Profiles the job; returns ddp-sim's median iteration time or None."""
    shutil.rmtree(out_dir, ignore_errors=True)
    p = subprocess.run([DPRO_RUN, "-o", out_dir, "--", SIMRUN, "-n", str(RANKS), "--", DDP_SIM]
                       + JOB, capture_output=True, text=True, timeout=180, env=job_env())
    if p.returncode != 0:
        check(False, "profiled job failed (%d): %s" % (p.returncode, p.stderr[-500:]))
        return None
    return median_iter_us(p.stdout)


def predict(out_dir, factor):
    """dpro-replay's simulated iteration and its predicted median iteration, or None."""
    r = subprocess.run([REPLAY, out_dir, "--json", "--warmup", "2", "--what-if-scale-kernels",
                        repr(factor)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        check(False, "dpro-replay failed: %s" % r.stderr[-500:])
        return None
    j = json.loads(r.stdout)
    if "what_if" not in j:
        check(False, "dpro-replay gave no what_if: %s" % j.get("diagnostics"))
        return None
    return j["simulated_median_iter_us"], j["what_if"]["predicted_median_iter_us"]


def realise(factor, out_dir):
    """ddp-sim's median iteration time with every kernel `factor` times as long, traced
    into out_dir as the profiled run is (the collector's writer thread takes the same share
    of the cores on both sides: on a loaded machine it lengthens the host's time)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    p = subprocess.run([DPRO_RUN, "-o", out_dir, "--", SIMRUN, "-n", str(RANKS), "--", DDP_SIM]
                       + JOB, capture_output=True, text=True, timeout=180, env=job_env(factor))
    shutil.rmtree(out_dir, ignore_errors=True)
    if p.returncode != 0:
        check(False, "job with SIMGPU_SLOWDOWN=%g failed: %s" % (factor, p.stderr[-500:]))
        return None
    return median_iter_us(p.stdout)


def attempt(tmp, factor, k):
    """One attempt: the job realised, profiled and predicted, realised again. Returns the
    error of the prediction against the two realised runs' mean and their spread (|A - B|
    over their mean), in %, or None."""
    base_dir = os.path.join(tmp, "base-%g-%d" % (factor, k))
    real_a = realise(factor, base_dir + "-real")
    base = profile(base_dir) if real_a is not None else None
    if base is None:
        return None
    pr = predict(base_dir, factor)
    real_b = realise(factor, base_dir + "-real")
    if pr is None or real_b is None:
        return None
    sim, pred = pr
    real = (real_a + real_b) / 2
    err, spread = 100.0 * (pred - real) / real, 100.0 * abs(real_a - real_b) / real
    print("F=%g attempt %d: profiled %.1f us (replayed %.1f us); predicted %.1f us, "
          "realised %.1f and %.1f us (spread %.2f%%): error %+.2f%%"
          % (factor, k, base, sim, pred, real_a, real_b, spread, err))
    return err, spread


ATTEMPTS = 5
BOUND_PCT = {0.5: 10.0, 2.0: 5.0}  # the median attempt's error, by factor


def main():
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM, REPLAY)):
        return SKIP
    if os.environ.get("DPRO_SANITIZERS") == "1":
        print("skip: sanitizer build (a timed test: the host-side instrumentation would be "
              "measured as the job's time)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-whatif-")
    try:
        collector_records(os.path.join(tmp, "probe"),
                          [SIMRUN, "-n", "1", "--", DDP_SIM, "--iterations", "1", "--warmup",
                           "0"], job_env())
        for factor in (0.5, 2.0):
            errs = []
            for k in range(1, ATTEMPTS + 1):
                e = attempt(tmp, factor, k)
                if e is None:
                    break
                errs.append(e)
            if len(errs) < ATTEMPTS:
                continue  # the failed step was reported by check()
            listed = " ".join("%+.2f%%" % e for e, _ in errs)
            med = statistics.median(abs(e) for e, _ in errs)
            half = min(statistics.median(sp for _, sp in errs) / 2, BOUND_PCT[factor])
            check(med < BOUND_PCT[factor] + half, "F=%g: the median attempt predicted within "
                  "%g%% + %.2f%% (half the realised runs' median spread, at most the bound) "
                  "of the realised iteration time (%.2f%%; attempts %s)"
                  % (factor, BOUND_PCT[factor], half, med, listed))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
