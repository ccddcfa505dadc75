#!/usr/bin/env python3
"""The world physics' NCCL across processes (SIMGPU_PHYSICS=world): ddp-sim on 2 and 4
ranks under simrun (the last rank a straggler), recorded by the collector; the device
records of its collectives (dpro-export's measured timeline, put back on the shared
CLOCK_MONOTONIC by undoing dpro-replay's fitted clock offsets) must show:
- counts: every rank ran the same collectives (the same sequence numbers, the same
  broadcasts), and allreduces_per_iter x (warm-up + measured iterations) all-reduces;
- synchronisation: no rank leaves a collective before the last rank arrived at it;
- staggered exits, as the world's ring says (tests/simgpu/README.md, NCCL): at every
  all-reduce the ranks leave at different times, the last one being the rank where this
  instance's rotation ends, (seq + n - 1) mod n (nccl_model.c, simgpu_nccl_exit_early_ns);
and, as the contrast that shows those checks can fail, the simple physics (consistency)
ends a collective at one instant on every rank. Device times only: nothing is timed
against the wall clock."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "replay"))
from replay_testlib import (  # noqa: E402
    DDP_SIM, DPRO_RUN, LIBDIR, REPLAY, SIMRUN, check, exit_status, missing, traced_env)

EXPORT = os.path.join(os.path.dirname(REPLAY), "dpro-export")
WARMUP, ITERATIONS = 1, 3
JOB = ["--preset", "resnet50", "--layers", "2", "--bucket-mb", "1", "--first-bucket-mb", "1",
       "--warmup", str(WARMUP), "--iterations", str(ITERATIONS)]
# How far one instant on the device can read apart on two ranks: each rank's CUPTI maps
# device time into the collector's clock by an offset measured from the tightest of a few
# bracketed clock reads (cupti_clock.c, as real CUPTI interpolates), which is off by up to
# half that bracket (seen: 0-10 ns here, more where clock_gettime is slower), plus the
# export's and the offsets' 1 ns resolution. The world's exits are microseconds apart
# (the stagger checked below), so the contrast stays sharp.
CLOCK_US = 0.1


def record(tmp, n, physics):
    """Runs the job on n ranks in physics (a dict of SIMGPU_ settings) under the collector;
    returns (ddp-sim's JSON lines, {rank: [collective records]}, with raw start and end in
    us), or None after a failed check."""
    out = os.path.join(tmp, "%s-%d" % (physics["SIMGPU_PHYSICS"], n))
    env = traced_env({k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")})
    env.update(physics)
    cmd = [SIMRUN, "-n", str(n), "--simgpu-libdir", LIBDIR, "--timeout", "100", "--straggler",
           "%d:1.5" % (n - 1), "--", DPRO_RUN, "-o", out, "--", DDP_SIM] + JOB
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    ok = p.returncode == 0 and len(rows) == n
    check(ok, "%s, %d ranks: ddp-sim ran (status %d, %d lines) %s"
          % (physics["SIMGPU_PHYSICS"], n, p.returncode, len(rows), "" if ok else p.stderr[-800:]))
    if not ok:
        return None
    chrome = os.path.join(tmp, "%s-%d.json" % (physics["SIMGPU_PHYSICS"], n))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}
    e = subprocess.run([EXPORT, out, "--chrome", chrome], env=clean, capture_output=True,
                       text=True, timeout=120)
    r = subprocess.run([REPLAY, out, "--json"], env=clean, capture_output=True, text=True,
                       timeout=120)
    ok = e.returncode == 0 and r.returncode == 0
    check(ok, "dpro-export and dpro-replay read the traces %s %s"
          % (e.stderr[-300:], r.stderr[-300:]))
    if not ok:
        return None
    offset = {x["rank"]: x["clock_offset_us"] for x in json.loads(r.stdout)["per_rank"]}
    with open(chrome) as f:
        events = json.load(f)["traceEvents"]
    colls = {}
    for ev in events:
        if ev.get("cat") == "collective" and ev.get("ph") == "X":
            rank = ev["pid"]
            start = ev["ts"] - offset[rank]  # the export shifts each rank by its offset
            colls.setdefault(rank, []).append({"name": ev["name"], "seq": ev["args"]["seq"],
                                               "start": start, "end": start + ev["dur"]})
    return rows, colls


def check_counts(label, n, rows, colls):
    per_iter = rows[0]["allreduces_per_iter"]
    want = per_iter * (WARMUP + ITERATIONS)
    check(sorted(colls) == list(range(n)), "%s: collective records from every rank" % label)
    seqs = [[c["seq"] for c in sorted(colls.get(r, []), key=lambda c: c["seq"])]
            for r in range(n)]
    check(all(s == seqs[0] for s in seqs), "%s: every rank ran the same collectives (%d)"
          % (label, len(seqs[0])))
    for r in range(n):
        ar = sum(1 for c in colls.get(r, []) if "AllReduce" in c["name"])
        check(ar == want, "%s: rank %d ran %d all-reduces (%d per iteration x %d iterations: "
              "%d)" % (label, r, ar, per_iter, WARMUP + ITERATIONS, want))


def by_seq(colls):
    out = {}
    for r, cs in colls.items():
        for c in cs:
            out.setdefault(c["seq"], {})[r] = c
    return out


def check_world(n, rows, colls):
    label = "world, %d ranks" % n
    check_counts(label, n, rows, colls)
    early_leave, not_staggered, wrong_last, waited, allreduces = 0, 0, 0, 0, 0
    for seq, cs in sorted(by_seq(colls).items()):
        if len(cs) != n:
            continue
        last_arrival = max(c["start"] for c in cs.values())
        early_leave += sum(1 for c in cs.values() if c["end"] < last_arrival - CLOCK_US)
        waited += sum(1 for c in cs.values() if last_arrival - c["start"] > 1.0)
        if "AllReduce" not in cs[0]["name"]:
            continue
        allreduces += 1
        ends = {r: c["end"] for r, c in cs.items()}
        if max(ends.values()) - min(ends.values()) <= CLOCK_US:
            not_staggered += 1
        if max(ends, key=ends.get) != (seq + n - 1) % n:
            wrong_last += 1
    check(early_leave == 0, "%s: no rank left a collective before the last arrival (%d did)"
          % (label, early_leave))
    check(waited > 0, "%s: ranks waited for a later one at %d collective exits" % (label, waited))
    check(allreduces > 0 and not_staggered == 0, "%s: the ranks left each of %d all-reduces at "
          "different times (%d at one instant)" % (label, allreduces, not_staggered))
    check(wrong_last == 0, "%s: the last to leave was rank (seq + n - 1) mod n at every "
          "all-reduce (%d of %d not)" % (label, wrong_last, allreduces))
    spread = [max(c["end"] for c in cs.values()) - min(c["end"] for c in cs.values())
              for cs in by_seq(colls).values() if len(cs) == n and "AllReduce" in
              next(iter(cs.values()))["name"]]
    print("      %s: exits spread %.2f-%.2f us over %d all-reduces"
          % (label, min(spread), max(spread), len(spread)))


def check_simple(n, rows, colls):
    label = "simple, %d ranks" % n
    check_counts(label, n, rows, colls)
    apart = [max(c["end"] for c in cs.values()) - min(c["end"] for c in cs.values())
             for cs in by_seq(colls).values() if len(cs) == n]
    check(apart and max(apart) <= CLOCK_US, "%s (the contrast): every collective ends at one "
          "instant on every rank (at most %.3f us apart)" % (label, max(apart or [0])))
    # what separates them is each rank's clock mapping, one constant per rank: its
    # difference to rank 0 is the same at every collective, to the export's 1 ns
    full = [cs for cs in by_seq(colls).values() if len(cs) == n]
    drift = max((max(cs[r]["end"] - cs[0]["end"] for cs in full) -
                 min(cs[r]["end"] - cs[0]["end"] for cs in full) for r in range(1, n)), default=0)
    check(full and drift <= 0.002 + 1e-6, "%s: each rank's distance to rank 0 at the ends is one "
          "constant (varies by %.3f us)" % (label, drift))


def main():
    if missing((SIMRUN, DDP_SIM, DPRO_RUN, REPLAY, EXPORT)):
        return 77
    tmp = tempfile.mkdtemp(prefix="dpro-world-nccl-")
    try:
        for n in (2, 4):
            got = record(tmp, n, {"SIMGPU_PHYSICS": "world", "SIMGPU_WORLD_SEED": "11",
                                  "SIMGPU_PROFILE": "h100"})
            if got:
                check_world(n, *got)
        got = record(tmp, 4, {"SIMGPU_PHYSICS": "simple"})
        if got:
            check_simple(4, *got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
