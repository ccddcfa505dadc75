"""test_replay_p2p: send/recv matching end to end. pipe-sim (a GPipe pipeline: one stage
per rank, activations sent forward and gradients backward with ncclSend/ncclRecv on a
communication stream, NVTX iteration ranges) runs under simrun with the collector
preloaded (dpro-run); dpro-replay must pair every send with its peer's recv, simulate an
iteration time within 3 % of pipe-sim's own measured iter_us (mean over ranks) and of the
trace, and, with a clock skew per rank (DPRO_TEST_CLOCK_OFFSET_NS, as in
test_replay_simgpu.py), recover the offsets within 20 us from the send/recv alone (the
job makes no collective).

Also: grouped calls (ncclGroupStart/End: one kernel carries a send and a recv) are all
matched; an all-reduce on the same communicator after each step (the ranks made different
send/recv calls before it) is matched across ranks; a missing stage's trace leaves its peers' transfers unmatched with a diagnostic
and a partial replay; the imported 128-rank Kineto pair of ../shared (SendRecv kernels
without peer or direction, launched inside nccl:all_to_all, nccl:all_reduce and
nccl:_all_gather_base) gives collectives of those operations, no peerless send/recv.

Skips (77) without CUDA headers (no simgpu/collector). Runs in the sanitizer builds too
(the collector's runtime preloaded first: replay_testlib.traced_env).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    missing, collector_records, exit_status, shared_path, SKIP, BUILD, COLLECTOR, DPRO_RUN, SIMRUN,
    LIBDIR, REPLAY, IMPORT, KINETO, check, skew_wrapper, traced_env)

PIPE_SIM = os.path.join(BUILD, "tests", "replay", "pipe-sim")
TABLE = []


def replay(out_dir, warmup=None):
    cmd = [REPLAY, out_dir, "--json"] + (["--warmup", str(warmup)] if warmup is not None else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr
    return json.loads(r.stdout), r.stderr


def run_case(tmp, name, ranks, args, skews=None, warmup=2, tol=3.0):
    out_dir = os.path.join(tmp, name)
    skews = skews or [0] * ranks
    cmd = [DPRO_RUN, "-o", out_dir, "--", SIMRUN, "-n", str(ranks), "--"]
    cmd += skew_wrapper(skews) + [PIPE_SIM, "--warmup", str(warmup)] + args
    env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple")
    env.pop("DPRO_TEST_CLOCK_OFFSET_NS", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    if p.returncode != 0:
        check(False, "%s: job failed (%d): %s" % (name, p.returncode, p.stderr[-500:]))
        return None
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if len(lines) != ranks:
        check(False, "%s: %d JSON lines from pipe-sim" % (name, len(lines)))
        return None
    truth = sum(l["mean_iter_us"] for l in lines) / len(lines)
    ends = sum(l["sends"] + l["recvs"] for l in lines)
    j, err = replay(out_dir, warmup)
    if j is None:
        check(False, "%s: dpro-replay failed: %s" % (name, err))
        return None
    p2p = j["p2p"]
    check(p2p["ends"] == ends and p2p["matched"] == ends and p2p["unmatched"] == 0,
          "%s: all %d send/recv ends matched (%s)" % (name, ends, p2p))
    check(p2p["unmodelled_pairs"] == 0, "%s: every pair modelled" % name)
    allreduces = lines[0]["allreduces"]
    check(j["collectives"] == p2p["exchanges"] + allreduces,
          "%s: %d all-reduces matched besides the exchanges (%d groups)"
          % (name, allreduces, j["collectives"]))
    check(not [d for d in j["diagnostics"] if "collective" in d],
          "%s: no collective diagnostics (%s)" % (name, j["diagnostics"]))
    err_truth = 100.0 * (j["simulated_iter_us"] - truth) / truth
    check(abs(err_truth) < tol, "%s: simulated within %g%% of pipe-sim (%.2f%%)"
          % (name, tol, err_truth))
    check(abs(j["error_pct"]) < tol, "%s: simulated within %g%% of the trace (%.2f%%)"
          % (name, tol, j["error_pct"]))
    # aligned = local + offset: rank r's offset to rank 0 undoes its skew
    off = {pr["rank"]: pr["clock_offset_us"] for pr in j["per_rank"]}
    worst = 0.0
    for rk in range(ranks):
        want = (skews[0] - skews[rk]) / 1000.0
        got = off.get(rk, float("nan")) - off.get(0, float("nan"))
        worst = max(worst, abs(got - want)) if got == got else float("inf")
        check(abs(got - want) < 20, "%s: rank %d offset %.2f us, injected skew %.2f us"
              % (name, rk, got, -want))
    TABLE.append((name, ranks, ends, p2p["exchanges"], p2p["wide_exchanges"],
                  max(abs(v) for v in skews) / 1000.0, worst, truth, j["simulated_iter_us"],
                  err_truth, j["error_pct"]))
    return out_dir


def missing_rank(tmp, src):
    """Stage 1's trace removed: its peers' transfers stay unmatched, with a diagnostic."""
    d = os.path.join(tmp, "missing-stage")
    shutil.copytree(src, d)
    for f in glob.glob(os.path.join(d, "rank1-*")):
        os.unlink(f)
    j, err = replay(d, 2)
    if j is None:
        check(False, "missing stage: dpro-replay failed: %s" % err)
        return
    diag = " ".join(j["diagnostics"])
    check(j["ranks"] == 3, "missing stage: 3 ranks replayed")
    check(j["p2p"]["unmatched"] > 0 and "no matching end" in diag,
          "missing stage: unmatched transfers reported (%d)" % j["p2p"]["unmatched"])
    check(j["p2p"]["exchanges"] > 0, "missing stage: the other stages still paired")


def kineto_sendrecv(tmp):
    """The 128-rank Kineto pair: its SendRecv kernels are the collectives of the host ranges
    their launches lie in (the importer's), not peerless send/recv."""
    files = [os.path.join(KINETO, "128rank-sampled-rank%d.json.gz" % r) for r in (0, 1)]
    if not all(shared_path(f, whole=False) for f in files):
        return
    if not os.path.exists(IMPORT):
        check(False, "kineto: %s not built" % IMPORT)
        return
    d = os.path.join(tmp, "k128")
    p = subprocess.run([IMPORT, "kineto"] + files + ["-o", d], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        check(False, "kineto: import failed: %s" % p.stderr[-300:])
        return
    j, err = replay(d)
    if j is None:
        check(False, "kineto: dpro-replay failed: %s" % err)
        return
    diag = " ".join(j["diagnostics"])
    check(j["p2p"]["no_peer"] == 0 and j["p2p"]["exchanges"] == 0,
          "kineto: no SendRecv kernel left a send/recv without a peer (%s)" % j["p2p"])
    check("name no peer" not in diag, "kineto: no diagnostic for send/recv without a peer")
    ops = {m["op"] for m in j["collective_model"]}
    check(j["collectives"] > 0 and {"alltoall", "allreduce", "allgather"} <= ops,
          "kineto: all-to-all, all-reduce and all-gather collectives (%d: %s)"
          % (j["collectives"], sorted(ops)))


def main():
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, PIPE_SIM)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-p2p-")
    try:
        collector_records(os.path.join(tmp, "probe"),
                          [SIMRUN, "-n", "2", "--", PIPE_SIM, "--iterations", "1", "--warmup",
                           "0", "--micro", "1"],
                          traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple"))
        ms, sec = 1000000, 1000000000
        four = run_case(tmp, "4stages", 4, ["--iterations", "5", "--micro", "4"],
                        skews=[0, 1234567, -2 * ms - 345678, 5 * sec // 2])
        run_case(tmp, "2stages-8micro", 2, ["--iterations", "5", "--micro", "8",
                                             "--act-kb", "512", "--fwd-us", "200"],
                 skews=[-700000, 12 * ms + 345678])
        run_case(tmp, "3stages-grouped", 3, ["--iterations", "5", "--micro", "4", "--grouped"],
                 skews=[3300000, -1100000, 470000])
        run_case(tmp, "3stages-allreduce", 3, ["--iterations", "5", "--micro", "3",
                                                "--allreduce-kb", "4096"],
                 skews=[0, -sec // 3, 777777])
        if four:
            missing_rank(tmp, four)
        kineto_sendrecv(tmp)
        print("\n%-18s %5s %6s %9s %5s %12s %10s %12s %12s %8s %8s" % (
            "case", "ranks", "ends", "exchanges", "wide", "max skew us", "offset err",
            "pipe-sim us", "simulated", "err", "vs trace"))
        for t in TABLE:
            print("%-18s %5d %6d %9d %5d %12.1f %10.2f %12.1f %12.1f %7.2f%% %7.2f%%" % t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
