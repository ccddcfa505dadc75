"""fig_typical_replay: the typical-duration replay's figures (docs/figures.md), not a test.

Prints two tables of dpro-replay's typical_replay (each operation's median over the
compared iterations with the ranks' wait at each collective, the medians alone, with
means, and the drawn replay, each rank's iterations' own values in an order drawn per
rank; replay.h, replay_typical) against the measured mean iteration:
- the ddp-sim jobs of test_replay_simgpu.py on the simulated device (same cases, same
  options, no clock skew: skew does not enter this figure), with ddp-sim's own mean
  iteration beside the trace's, and its median (each rank's median iteration, averaged
  over the ranks: what the medians can reach where the mean carries rare slow ones);
- every real Kineto trace of ../shared/traces/kineto (the 128rank pair imported together).
The simulated jobs run in real time on this machine's cores, so their iterations carry the
machine's scheduling noise: the load average is printed with the table. They run in the
physics SIMGPU_PHYSICS names (default: the device's own default, world), printed with the
table (docs/figures.md says which physics each table was measured in).

Run from the build directory: top_builddir=. top_srcdir=.. python3 ../tests/replay/fig_typical_replay.py
With FIG_TYPICAL_KEEP=DIR the simulated jobs' traces are kept in DIR/CASE (DIR must not
hold them yet), to replay them again with another build.
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
    DDP_SIM, DPRO_RUN, IMPORT, KINETO, LIBDIR, REPLAY, SIMRUN, missing)

SIM_CASES = [
    ("2ranks", 2, ["--iterations", "6"], None, 2),
    ("4ranks-small-buckets", 4, ["--iterations", "5", "--bucket-mb", "2"], None, 2),
    ("4ranks-big-buckets", 4, ["--iterations", "5", "--bucket-mb", "100"], None, 2),
    ("3ranks-straggler", 3, ["--iterations", "5"], "1:1.5", 2),
    ("8ranks-small-model", 8, ["--layers", "4", "--iterations", "4", "--bucket-mb", "4"],
     None, 1),
]
KINETO_CASES = [
    ("v100-1rank-training", ["v100-1rank-training"]),
    ("a100-2rank-allreduce-rank0", ["a100-2rank-allreduce-rank0"]),
    ("a100-alexnet-1rank", ["a100-alexnet-1rank"]),
    ("a100-event-sync-multistream", ["a100-event-sync-multistream"]),
    ("128rank-sampled", ["128rank-sampled-rank0", "128rank-sampled-rank1"]),
]


def replay(out_dir, extra):
    r = subprocess.run([REPLAY, out_dir, "--json"] + extra, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        print("dpro-replay %s failed: %s" % (out_dir, r.stderr[-300:]))
        return None
    return json.loads(r.stdout)


def row(name, j, truth=None):
    """truth: ddp-sim's own mean and median iteration (each rank's, averaged), or None."""
    t = j.get("typical_replay")
    if not t or t["iterations"] < 2:
        what = "one compared iteration" if t else "no iterations found"
        print("| %s | %s | %.1f us | - | - | - | - | - | - | - | - |%s" % (
            name, what, j["measured_iter_us"], " - | - |" if truth is not None else ""))
        return
    cells = ("| %s | %d | %.1f us | %.1f us | %+.2f %% | %.1f us | %+.2f %% | %+.2f %% | %.1f us "
             "| %+.2f %% | %d of %d |") % (
        name, t["iterations"], t["measured_iter_us"], t["predicted_iter_us"], t["error_pct"],
        t["rank_wait_us"], t["medians_only_error_pct"], t["mean_error_pct"],
        t["drawn_predicted_iter_us"], t["drawn_error_pct"], t["operations_matched"],
        t["operations"])
    if truth is not None:
        cells += " %.1f us | %.1f us |" % truth
    print(cells)


def main():
    if missing((IMPORT, REPLAY)):
        return 77
    tmp = tempfile.mkdtemp(prefix="dpro-fig-typical-")
    try:
        if not missing((DPRO_RUN, SIMRUN, DDP_SIM)):
            physics = os.environ.get("SIMGPU_PHYSICS", "world (the default)")
            print("simulated device, physics %s (load average %.1f %.1f %.1f):"
                  % ((physics,) + os.getloadavg()))
            print("| case | iterations | measured mean | typical replay | error | ranks' wait "
                  "| medians alone | with means | drawn replay | error | matched "
                  "| ddp-sim's own mean | its median |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for name, ranks, args, strag, warm in SIM_CASES:
                out = os.path.join(os.environ.get("FIG_TYPICAL_KEEP") or tmp, name)
                cmd = [DPRO_RUN, "-o", out, "--", SIMRUN, "-n", str(ranks)]
                cmd += (["--straggler", strag] if strag else []) + ["--", DDP_SIM, "--warmup",
                                                                    str(warm)] + args
                env = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=LIBDIR)
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
                lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
                j = replay(out, ["--warmup", str(warm)]) if p.returncode == 0 else None
                if j and lines:
                    row(name, j, (statistics.mean(x["mean_iter_us"] for x in lines),
                                  statistics.mean(statistics.median(x["iter_us"]) for x in lines)))
                else:
                    print("| %s | job or replay failed |" % name)
            print("(load average after: %.1f %.1f %.1f)" % os.getloadavg())
            print()
        print("real Kineto traces:")
        print("| trace | iterations | measured mean | typical replay | error | ranks' wait "
              "| medians alone | with means | drawn replay | error | matched |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, files in KINETO_CASES:
            srcs = [os.path.join(KINETO, f + ".json.gz") for f in files]
            if not all(os.path.exists(s) for s in srcs):
                print("| %s | missing |" % name)
                continue
            out = os.path.join(tmp, name)
            p = subprocess.run([IMPORT, "kineto"] + srcs + ["-o", out], capture_output=True,
                               text=True, timeout=300)
            j = replay(out, []) if p.returncode == 0 else None
            if j:
                row(name, j)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
