"""test_replay_simgpu: end to end on the simulated GPU. ddp-sim runs under simrun with
the collector preloaded (dpro-run); dpro-replay must simulate an iteration time within 3 %
of ddp-sim's own measured iter_us (mean over ranks), on 2 and 4 ranks, with small and
large gradient buckets and with a straggler, and the straggler must be named. Clock
offsets: all ranks share one host clock here, so the recovered offsets must be within
20 us of 0 (simgpu has no knob to skew a rank's clock; skew recovery is tested on
synthetic traces in test_replay_traces.py).

Skips (77) without CUDA headers (no simgpu/collector) or when the collector cannot be
preloaded (sanitizer builds).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
BUILD = os.environ.get("top_builddir", ".")
COLLECTOR = os.path.join(BUILD, "collector", ".libs", "libdpro-collector.so")
DPRO_RUN = os.path.join(BUILD, "tools", "dpro-run")
SIMRUN = os.path.join(BUILD, "tests", "simgpu", "simrun")
DDP_SIM = os.path.join(BUILD, "tests", "simgpu", "ddp-sim")
LIBDIR = os.path.join(BUILD, "tests", "simgpu", ".libs")
REPLAY = os.path.join(BUILD, "tools", "dpro-replay")
failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def run_case(tmp, name, ranks, ddp_args, straggler=None, warmup=2):
    out_dir = os.path.join(tmp, name)
    cmd = [DPRO_RUN, "-o", out_dir, "--", SIMRUN, "-n", str(ranks)]
    if straggler:
        cmd += ["--straggler", straggler]
    cmd += ["--", DDP_SIM, "--warmup", str(warmup)] + ddp_args
    env = dict(os.environ)
    env["SIMRUN_SIMGPU_LIBDIR"] = LIBDIR
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        check(False, "%s: job failed (%d): %s" % (name, p.returncode, p.stderr[-500:]))
        return None
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if len(lines) != ranks:
        check(False, "%s: %d JSON lines from ddp-sim" % (name, len(lines)))
        return None
    truth = sum(l["mean_iter_us"] for l in lines) / len(lines)
    r = subprocess.run([REPLAY, out_dir, "--json", "--warmup", str(warmup)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        check(False, "%s: dpro-replay failed: %s" % (name, r.stderr))
        return None
    j = json.loads(r.stdout)
    err_truth = 100.0 * (j["simulated_iter_us"] - truth) / truth
    print("%s: ddp-sim %.1f us, measured %.1f us, simulated %.1f us, error vs ddp-sim %.2f%%, "
          "vs trace %.2f%%" % (name, truth, j["measured_iter_us"], j["simulated_iter_us"],
                               err_truth, j["error_pct"]))
    check(j["ranks"] == ranks, "%s: %d ranks" % (name, ranks))
    check(abs(err_truth) < 3.0, "%s: simulated within 3%% of ddp-sim (%.2f%%)" % (name, err_truth))
    check(abs(j["error_pct"]) < 3.0, "%s: simulated within 3%% of the trace (%.2f%%)" % (name, j["error_pct"]))
    for pr in j["per_rank"]:
        check(abs(pr["clock_offset_us"]) < 20, "%s: rank %d offset %.2f us (one host clock)"
              % (name, pr["rank"], pr["clock_offset_us"]))
    return j


def main():
    for path in (COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM):
        if not os.path.exists(path):
            print("skip: %s not built" % path)
            return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-e2e-")
    try:
        probe = os.path.join(tmp, "probe")
        env = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=LIBDIR)
        subprocess.run([DPRO_RUN, "-o", probe, "--", SIMRUN, "-n", "1", "--", DDP_SIM,
                        "--iterations", "1", "--warmup", "0"], capture_output=True, timeout=60, env=env)
        if not os.path.isdir(probe) or not any(f.endswith(".dpro") for f in os.listdir(probe)):
            print("skip: the collector wrote no trace (sanitizer build?)")
            return SKIP
        run_case(tmp, "2ranks", 2, ["--iterations", "6"])
        run_case(tmp, "4ranks-small-buckets", 4, ["--iterations", "5", "--bucket-mb", "2"])
        run_case(tmp, "4ranks-big-buckets", 4, ["--iterations", "5", "--bucket-mb", "100"])
        j = run_case(tmp, "3ranks-straggler", 3, ["--iterations", "5"], straggler="1:1.5")
        if j:
            check([s["rank"] for s in j["stragglers"]] == [1],
                  "straggler: rank 1 named (%s)" % j["stragglers"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
