"""test_perturbation: the perturbation check of the replay graph on every real Kineto trace
of ../shared/traces/kineto (imported with dpro-import; the two 128rank files together).

dpro-replay --perturb 5 shortens each of the five kernel names with the most time, one at
a time, to half, in the exact replay. For each, the dependency structure says:
- the prediction never falls below the replay with that class at zero time (the critical
  path without it), and never rises above the exact replay (up to 0.1 % of the
  iteration): the simulation is a longest-path computation, monotone in every duration;
- it never saves more than half the class's time per iteration (a path holds each kernel
  once), up to 0.1 % of the iteration: the iteration is delimited on the host, the device
  may lag behind it (v100-1rank-training runs about 1,022 operations behind its host), and
  the kernels that run between the two boundaries are not exactly the ones the host
  launched in between;
- the stale waits stay under 1 % of the time the class gives back, + 1 us: host calls that
  can wait (synchronisations, synchronous copies, launches and cudaFree that took longer
  than usual) are not predicted to stay blocked once their rank has no more device work
  pending than when the measured call stopped waiting (replay.h, replay_perturbation).
  With the edges they are 0 on every trace.

The first two hold for any graph the simulator runs, with every edge or none: they catch
a simulator that is not monotone or counts a kernel twice, not missing dependencies. The
third is the one a graph missing edges fails: DPRO_TEST_DROP_EDGES=1 (test only) drops
every dependency edge before the timing fit, the fit absorbs the waits into fixed host
durations (the exact replay still matches the measurement), and shortening a class then
leaves those waits in place: the stale waits are then the part of the saving they
withhold. The check must fail that way on v100-1rank-training (its launch-queue edges),
a100-alexnet-1rank and a100-event-sync-multistream (their synchronisations). On
a100-2rank-allreduce-rank0 and 128rank-sampled, host-bound, the edge-less graph predicts
what the full one does for every class (no saving either way), so no check of these
perturbations can tell them apart; the test prints it.

The typical-duration replay (typical_replay: each operation's median over the compared
iterations) is checked here too, on the traces with two or more compared iterations
(v100-1rank-training, a100-2rank-allreduce-rank0): within the issue's 3 % of the measured
mean, with its keys; one traced rank each, so no wait at the collectives (rank_wait_us 0)
and the figure is the medians alone. Without the edges it is printed (v100-1rank-training: +5.6 %: the queue waits its
launch calls absorbed, taken at their medians, no longer follow the device's pace).

On the first trace the options themselves: --what-if-class NAME with
--what-if-scale-kernels 0.5 predicts what --perturb predicts for that class; a name no
kernel has is bad input (exit 1); --what-if-class alone, --perturb 0 and a
DPRO_TEST_DROP_EDGES outside (0, 1] are usage errors (exit 2).

Where the shared traces are not beside the source tree: a failure when CI=true, else a
skip (77).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    IMPORT, KINETO, REPLAY, SKIP, check, exit_status, missing, shared_path)

TRACES = {
    "v100-1rank-training": ["v100-1rank-training"],
    "a100-2rank-allreduce-rank0": ["a100-2rank-allreduce-rank0"],
    "a100-alexnet-1rank": ["a100-alexnet-1rank"],
    "a100-event-sync-multistream": ["a100-event-sync-multistream"],
    "128rank-sampled": ["128rank-sampled-rank0", "128rank-sampled-rank1"],
}
# traces whose edges carry host waits: without them the check must fail
MUST_FAIL_WITHOUT_EDGES = ("v100-1rank-training", "a100-alexnet-1rank",
                           "a100-event-sync-multistream")
TOP = 5


def perturb(out_dir, drop):
    """dpro-replay --perturb's JSON object (drop: DPRO_TEST_DROP_EDGES=1), or None."""
    env = dict(os.environ)
    env.pop("DPRO_TEST_DROP_EDGES", None)
    if drop:
        env["DPRO_TEST_DROP_EDGES"] = "1"
    r = subprocess.run([REPLAY, out_dir, "--json", "--perturb", str(TOP)],
                       capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        check(False, "dpro-replay --perturb %s failed: %s" % (out_dir, r.stderr[-500:]))
        return None
    return json.loads(r.stdout)


def options(out_dir, j):
    """The what-if and perturbation options on an imported trace (j: its --perturb JSON)."""
    c = j["perturbation"]["classes"][0]
    r = subprocess.run([REPLAY, out_dir, "--json", "--what-if-scale-kernels", "0.5",
                        "--what-if-class", c["name"]], capture_output=True, text=True,
                       timeout=300)
    w = json.loads(r.stdout).get("what_if", {}) if r.returncode == 0 else {}
    check(w.get("kernel_class") == c["name"] and
          abs(w.get("predicted_iter_us", -1) - c["predicted_iter_us"]) < 1e-6,
          "--what-if-class predicts what --perturb does for %s (%.1f us, %s us)"
          % (c["name"][:40], c["predicted_iter_us"], w.get("predicted_iter_us")))
    for args, env, want in (
            (["--what-if-scale-kernels", "0.5", "--what-if-class", "no such kernel"], {}, 1),
            (["--what-if-class", c["name"]], {}, 2),
            (["--perturb", "0"], {}, 2),
            ([], {"DPRO_TEST_DROP_EDGES": "1.5"}, 2)):
        r = subprocess.run([REPLAY, out_dir] + args, capture_output=True, text=True,
                           timeout=300, env=dict(os.environ, **env))
        check(r.returncode == want and "error" in r.stderr,
              "dpro-replay %s %s: exit %d (%d) with a message"
              % (" ".join(args), env or "", want, r.returncode))


def violations(j):
    """The bounds the perturbed predictions break, as text lines."""
    p = j["perturbation"]
    base, scale = p["baseline_iter_us"], p["scale"]
    out = []
    for c in p["classes"]:
        name = c["name"][:60]
        given = (1 - scale) * c["total_us"]
        if c["predicted_iter_us"] < c["without_class_iter_us"] - 1e-6 * base:
            out.append("%s: predicted %.1f us below the replay without it %.1f us"
                       % (name, c["predicted_iter_us"], c["without_class_iter_us"]))
        if c["saving_us"] < -1e-3 * base:
            out.append("%s: shortening it makes the iteration %.1f us longer"
                       % (name, -c["saving_us"]))
        if c["saving_us"] > c["max_saving_us"] + 1e-3 * base:
            out.append("%s: saves %.1f us, more than the class gives back %.1f us"
                       % (name, c["saving_us"], c["max_saving_us"]))
        if c["stale_wait_us"] > 0.01 * given + 1.0:
            out.append("%s: stale waits %.1f us, over 1 %% of the %.1f us it gives back + 1 us"
                       % (name, c["stale_wait_us"], given))
    return out


def main():
    shared_path(KINETO)
    if missing((IMPORT, REPLAY)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-perturbation-")
    try:
        for case, files in TRACES.items():
            srcs = [os.path.join(KINETO, f + ".json.gz") for f in files]
            absent = [s for s in srcs if not os.path.exists(s)]
            if absent:
                check(False, "%s is missing" % absent[0])
                continue
            out = os.path.join(tmp, case)
            p = subprocess.run([IMPORT, "kineto"] + srcs + ["-o", out], capture_output=True,
                               text=True, timeout=300)
            if p.returncode != 0:
                check(False, "import of %s failed: %s" % (case, p.stderr[-500:]))
                continue
            full = perturb(out, False)
            if full is None:
                continue
            if case == "v100-1rank-training":
                options(out, full)
            n = len(full["perturbation"]["classes"])
            check(n >= 1, "%s: %d kernel classes perturbed" % (case, n))
            for c in full["perturbation"]["classes"]:
                print("  %-62s saves %9.1f us (at most %9.1f), without %11.1f us, "
                      "stale %8.1f us" % (c["name"][:62], c["saving_us"], c["max_saving_us"],
                                          c["without_class_iter_us"], c["stale_wait_us"]))
            t = full.get("typical_replay")
            if case in ("v100-1rank-training", "a100-2rank-allreduce-rank0"):
                keys = ("iterations", "operations", "operations_matched", "measured_iter_us",
                        "predicted_iter_us", "error_pct", "rank_wait_us",
                        "medians_only_predicted_iter_us", "medians_only_error_pct",
                        "mean_predicted_iter_us", "mean_error_pct")
                check(t is not None and all(k in t for k in keys) and t["iterations"] >= 2,
                      "%s: typical_replay with its keys, over 2 or more iterations" % case)
                # one traced rank each: no collective of all the ranks, so no wait, and
                # the figure is the medians alone
                check(t is not None and t.get("rank_wait_us") == 0 and
                      t.get("medians_only_predicted_iter_us") == t["predicted_iter_us"],
                      "%s: no ranks' wait, the medians alone are the figure (%r)"
                      % (case, t and t.get("rank_wait_us")))
            if t and t["iterations"] >= 2:
                check(abs(t["error_pct"]) <= 3.0,
                      "%s: typical-duration replay within 3 %% of the measured mean (%+.2f %%, "
                      "%d iterations)" % (case, t["error_pct"], t["iterations"]))
            bad = violations(full)
            for line in bad:
                print("  " + line)
            check(not bad, "%s: the perturbed predictions keep the bounds" % case)
            cut = perturb(out, True)
            if cut is None:
                continue
            check(abs(cut["error_pct"]) < 0.01,
                  "%s without edges: the exact replay still matches (%.3f %%)"
                  % (case, cut["error_pct"]))
            t = cut.get("typical_replay")
            if t and t["iterations"] >= 2:
                print("info: %s without edges: typical-duration replay %+.2f %%"
                      % (case, t["error_pct"]))
            bad = violations(cut)
            for line in bad:
                print("  without edges: " + line)
            if case in MUST_FAIL_WITHOUT_EDGES:
                check(bool(bad), "%s without edges: the check fails (%d violations)"
                      % (case, len(bad)))
            else:
                print("info: %s without edges: %d violations" % (case, len(bad)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
