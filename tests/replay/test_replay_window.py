"""test_replay_window: the replay reads only the compared iterations' window, and ranks
load in parallel, without changing the answer.

Jobs written by tests/replay/gen_traces (clock skew, a straggler, a trace cut short,
no markers) are loaded by test_replay_window (the C half): with 1 and 4 threads the same
events and warnings; comparing a few iterations from their window alone and from every
event, the same figures bit for bit, the window taken where the markers allow it and
not where they do not (no markers: iterations come from the kernel period, which needs
the whole trace) or where it would hold everything. Then dpro-replay --json and
dpro-optimize --json with --jobs 1 and --jobs 4 must print the same JSON (the search's
timing keys aside), on those jobs and on the real Kineto traces of ../shared imported
(skipped without them). A batch damaged outside the window is still found (the first
pass reads every batch): the replay fails without --partial and names it with it.
dpro-optimize -n 2 -w 3 on a job with allocations before its first iteration reads its
window from the trace's start: its memory estimate holds them.
"""
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, IMPORT, KINETO, REPLAY, check, exit_status  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
WINDOW = os.path.join(BUILD, "tests", "replay", "test_replay_window")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
TIMING = {"search_s", "evaluations_per_s"}

# (name, gen_traces arguments, [(iterations, warmup, window expected)])
JOBS = [
    ("skew-straggler", ["--ranks", "8", "--iters", "30", "--skew", "3:150", "--skew", "6:-80",
                        "--straggler", "5:1.3"],
     [(3, -1, 1), (4, 10, 1), (2, 0, 1), (1, 29, 1), (27, 2, 1), (28, 1, 1), (29, 1, 0), (100, -1, 0)]),
    ("cut", ["--ranks", "4", "--iters", "20", "--cut", "1:0.6", "--skew", "2:40"],
     [(3, 2, 1), (2, -1, 1)]),
    ("device-collectives", ["--ranks", "4", "--iters", "12", "--device-collectives",
                            "--skew", "1:25"],
     [(2, 3, 1)]),
    ("allocs", ["--ranks", "4", "--iters", "12", "--allocs"], [(2, 3, 1), (3, 1, 1)]),
    ("no-markers", ["--ranks", "4", "--iters", "12", "--no-markers"], [(2, 3, 0)]),
]


def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def same_for_jobs(cmd, what):
    """cmd + --jobs 1 and + --jobs 4 print the same JSON and the same status."""
    out = []
    for n in ("1", "4"):
        p = subprocess.run(cmd + ["--jobs", n], capture_output=True, text=True, timeout=300)
        out.append((p.returncode, clean(json.loads(p.stdout)) if p.stdout.strip() else None,
                    p.stderr))
    check(out[0] == out[1], "%s: --jobs 1 and --jobs 4 give the same answer" % what)


def damage_outside_window(tmp):
    """The last batch of one rank zeroed: far from the window of iterations 3-4."""
    d = os.path.join(tmp, "damaged")
    subprocess.run([BENCH_SCALE, "gen", d, "4", "100000", "20"], check=True)
    db = sqlite3.connect(os.path.join(d, "rank2.dpro"))
    last = db.execute("SELECT id FROM batches ORDER BY first_ns DESC LIMIT 1").fetchone()[0]
    db.execute("UPDATE batches SET data = zeroblob(length(data)) WHERE id = ?", (last,))
    db.commit()
    db.close()
    p = subprocess.run([REPLAY, d, "-n", "2", "-w", "3"], capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == 1 and "1 damaged batches" in p.stderr,
          "damage outside the window: status 1 without --partial (%d)" % p.returncode)
    p = subprocess.run([REPLAY, d, "-n", "2", "-w", "3", "--partial"], capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == 0 and "batch %d" % last in p.stderr,
          "damage outside the window: named with --partial (%d)" % p.returncode)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        damage_outside_window(tmp)
        dirs, folded = [], 0
        for name, args, cases in JOBS:
            d = os.path.join(tmp, name)
            subprocess.run([GEN, d] + args, check=True, stdout=subprocess.DEVNULL)
            dirs.append(d)
            for n, w, expect in cases:
                p = subprocess.run([WINDOW, d, str(n), str(w), str(expect)], capture_output=True,
                                   text=True, timeout=300)
                sys.stdout.write(p.stdout)
                folded += sum(int(m) for m in re.findall(r": (\d+) of \d+ ranks folded", p.stdout))
                check(p.returncode == 0, "%s -n %d -w %d: window and every event agree%s"
                      % (name, n, w, "" if p.returncode == 0 else ": " + p.stderr[-1500:]))
        check(folded > 0, "folding while read, ranks held compact: %d folded in the jobs above"
              % folded)
        # dpro-optimize's window starts at the trace's start where it holds allocations:
        # the memory estimate sees the 64 MiB before the first iteration and the 4 MiB in it
        p = subprocess.run([OPTIMIZE, os.path.join(tmp, "allocs"), "--json", "-q", "--seed", "1",
                            "--max-evals", "20", "-n", "2", "-w", "3"], capture_output=True,
                           text=True, timeout=300)
        peak = json.loads(p.stdout).get("baseline_peak_memory_bytes") if p.returncode == 0 else None
        check(peak == 68 << 20, "dpro-optimize -n 2 -w 3 reads the allocations before its "
              "window: peak %s bytes (68 MiB expected)" % peak)
        if os.path.isdir(KINETO):
            files = sorted(f for f in os.listdir(KINETO) if f.endswith(".json.gz"))
            two = [f for f in files if f.startswith("128rank-sampled")]
            for group in [[f] for f in files if f not in two] + [two]:
                d = os.path.join(tmp, "kineto-" + group[0].split(".")[0])
                subprocess.run([IMPORT, "kineto"] + [os.path.join(KINETO, f) for f in group]
                               + ["-o", d, "-q"], check=True)
                dirs.append(d)
        else:
            print("skip (part): %s is missing" % KINETO)
        for d in dirs:
            name = os.path.basename(d)
            same_for_jobs([REPLAY, d, "--json", "--critical-path"], "dpro-replay " + name)
            same_for_jobs([REPLAY, d, "--json", "-n", "1"], "dpro-replay -n 1 " + name)
            same_for_jobs([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "60"],
                          "dpro-optimize " + name)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
