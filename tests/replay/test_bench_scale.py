#!/usr/bin/env python3
"""test_bench_scale: the scale benchmark's generator and its run, at a small size.

tests/replay/bench_scale (make bench) writes a job of RANKS x EVENTS events through
libdprotrace and replays it. Here: `bench_scale gen DIR 4 2000 6` writes one trace a rank
holding the events its header promises (per iteration K launches and their kernels,
K = (EVENTS / ITERS - 34) / 2; 8 all-reduces, each an event record, a stream wait, the
collective and its kernel; an NVTX range and a synchronisation), dpro-info reads every one of them back, and dpro-replay finds the 6
iterations, folds the 3 alike ranks into one class and keeps rank 1, the straggler, apart,
within 0.5 % of --no-fold. Then the benchmark itself at 4 ranks x 2,000 events: each of
its 4 replays (folded and --no-fold, the job and the job traced 5x longer) and 3
dpro-optimize runs (folded on both jobs; --no-fold on the first, DPRO_BENCH_OPT_EXPLICIT=1)
exits 0 and reports a peak RSS. Bad sizes are refused (exit 2).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, check, exit_status  # noqa: E402

BENCH = os.path.join(BUILD, "tests", "replay", "bench_scale")
INFO = os.path.join(BUILD, "tools", "dpro-info")
OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
RANKS, EVENTS, ITERS, BUCKETS = 4, 2000, 6, 8


def run(args, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, **kw)


def replay(d, *extra):
    p = run([REPLAY, d, "--json", "-n", "2", "-w", "3"] + list(extra))
    check(p.returncode == 0, "dpro-replay %s exits 0 (%s)" % (" ".join(extra), p.stderr[-300:]))
    return json.loads(p.stdout) if p.returncode == 0 else {}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "job")
        p = run([BENCH, "gen", d, str(RANKS), str(EVENTS), str(ITERS)])
        check(p.returncode == 0, "bench_scale gen exits 0 (%s)" % p.stderr.strip())
        names = sorted(os.listdir(d)) if os.path.isdir(d) else []
        check(names == ["rank%d.dpro" % r for r in range(RANKS)], "one trace a rank: %s" % names)
        k = (EVENTS // ITERS - 4 * BUCKETS - 2) // 2
        p = run([INFO, "--json", d])
        info = json.loads(p.stdout) if p.returncode == 0 else {}
        by = info.get("events_by_kind", {})
        per_iter = 2 * k + 4 * BUCKETS + 2
        check(info.get("ranks") == RANKS, "dpro-info: %s ranks" % info.get("ranks"))
        check(info.get("events") == RANKS * ITERS * per_iter,
              "dpro-info: %s events, %d expected" % (info.get("events"), RANKS * ITERS * per_iter))
        n = RANKS * ITERS
        want = {"kernel": n * (k + BUCKETS), "collective": n * BUCKETS, "marker": n,
                "api": n * (k + 2 * BUCKETS + 1)}
        check(all(by.get(kind) == v for kind, v in want.items()),
              "events by kind %s, expected %s" % (by, want))
        check(info.get("dropped") == 0, "nothing dropped")

        folded, explicit = replay(d), replay(d, "--no-fold")
        check(folded.get("ranks") == RANKS and folded.get("iterations") == 2,
              "replay: %s ranks, %s iterations" % (folded.get("ranks"), folded.get("iterations")))
        classes = folded.get("rank_classes", [])
        apart = [c for c in classes if c.get("ranks") == [1]]
        check(len(classes) == 2 and apart and apart[0].get("apart") == "straggler",
              "folded into 2 classes, rank 1 apart as the straggler: %s" % classes)
        check(len(explicit.get("rank_classes", [])) == RANKS, "--no-fold: one class a rank")
        strag = [s.get("rank") for s in folded.get("stragglers", [])]
        check(strag[:1] == [1], "rank 1 named the straggler: %s" % strag)
        a, b = folded.get("simulated_iter_us", 0), explicit.get("simulated_iter_us", -1)
        check(b > 0 and abs(a - b) <= 0.005 * b, "folded %s us, explicit %s us" % (a, b))

        env = dict(os.environ, DPRO_BENCH_SCALE="%d %d 5" % (RANKS, EVENTS),
                   DPRO_BENCH_DIR=os.path.join(tmp, "bench"), DPRO_REPLAY=REPLAY,
                   DPRO_OPTIMIZE=OPTIMIZE, DPRO_BENCH_OPT_EXPLICIT="1")
        p = run([BENCH], env=env)
        print(p.stdout, end="")
        rows = re.findall(r"peak RSS ([0-9.]+) MiB \(status (-?\d+)\)", p.stdout)
        opt = re.findall(r"dpro-optimize .* -n 2 -w 3 .*--max-evals 200 --budget-s 10000"
                         r"( --no-fold)?: ", p.stdout)
        check(p.returncode == 0 and len(rows) == 7 and opt == ["", " --no-fold", ""],
              "bench_scale: 4 replays and 3 optimizations (%s), exit %d" % (opt, p.returncode))
        check(all(st == "0" and float(mib) > 0 for mib, st in rows), "every run exits 0: %s" % rows)
        check("5x longer" in p.stdout, "the job traced 5x longer is replayed")
        check(not os.path.exists(os.path.join(tmp, "bench")) or
              not os.listdir(os.path.join(tmp, "bench")), "bench_scale removes its files")

        for bad in (["0", "2000", "6"], ["4", "10", "6"], ["4", "2000", "0"]):
            p = run([BENCH, "gen", os.path.join(tmp, "bad"), *bad])
            check(p.returncode == 2, "bench_scale gen %s refused (exit %d)" % (" ".join(bad), p.returncode))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
