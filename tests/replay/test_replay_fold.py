"""test_replay_fold: alike ranks fold into weighted classes without changing the answer.

The folded replay of the straggler job, and of bench_scale's job without markers, is
the same with --jobs 1, 2 and 4 (the waves of ranks read at once differ). --chrome of the folded alike job, and of the job without
markers, names its folded ranks (no tracks of their own), counts
them in otherData.folded_ranks and says so on stderr; --no-fold writes every rank.

Each job is replayed by dpro-replay --json folded (the default) and with --no-fold; the
folded replay must make fewer classes where the ranks are alike, give the explicit
iteration time within 0.5 %, and print the same JSON otherwise: the same keys
everywhere (rank_classes aside), every string and boolean equal, every number within
0.5 % (or 1 us). Two figures are the class's, not the rank's, by design: in the explicit
job whichever of the alike ranks arrives last is charged, folded the class shares it.
others_waited_us_per_iter is compared summed over each class; arrived_last is not
compared (who arrives last among ranks within the fold tolerance of each other is a
tie broken by microseconds: 21 vs 7 explicit, 0 vs 28 folded on the straggler job, with
the same waiting time). The contention fit's sample counts are the representatives'
(its factors are compared like every other number).

The jobs: tests/replay/gen_traces (8 alike ranks with clock skew; one with a straggler,
which must stay a class of its own and be named the straggler as in the explicit
replay; iterations from the kernel period, no markers; a rank whose trace ends early,
a class of its own), tests/replay/bench_scale's generator (16 ranks whose host calls jitter per rank,
a straggler among them) and the multi-rank Kineto traces of ../shared imported (skipped
without them).

Early leaving (docs/models.md, "The replay", step 6): ranks leave a collective at
different times, and the replay lets each leave at the share it left early in the trace.
A folded class leaves at the share of its last member to leave (dfg_fold: its members
being alike, the last of them is the one the next collective waits for). Two gen_traces
jobs of 8 ranks where rank 7 is slower and leaves each iteration's last all-reduce half
its transfer early (--leave 7:0.5; it stands apart by its timing): "leave", the 7 others
leaving together; "leave-ring", the others leaving 0.05 % to 0.3 % of it early, one
after the other, within the fold tolerance, where the folded iteration must be the
explicit one within 0.01 % (the class leaving at its members' mean share instead gave
1763.87 us against 1765.00 us, 0.06 %, with twice these shares). Before the classes had
their leavings, every participant of a group with a folded rank left at its end:
"leave" and "leave-ring" each replayed 1809.4 us folded against 1765.0 us explicit
(2.5 %). Jobs of the
hidden physics (SIMGPU_PHYSICS=world, seeds 1 to 3: ddp-sim on 4 ranks under the
collector; skipped without tests/simgpu) are compared too; in them no rank folds (their
host calls differ by milliseconds from rank to rank, and their collectives' ends by more
than the tolerance), so each rank is a class of its own and the two replays must agree.

Ranks are folded while read (job.h) where the iterations come from markers or from the
kernel period (the cut shared across ranks agreed from the first pass): a class's
read_folded counts its ranks reduced as they were read; on the jobs marked so (with
markers, and without: gen_traces --no-markers, bench_scale --no-markers) every rank but
the representative of the alike ranks' class must be. Memory then follows the classes:
on a 64-rank job of bench_scale (4,000 events a rank, 10 iterations), with markers and
without, the folded replay's peak RSS (the child's ru_maxrss from wait4) must stay under
half the explicit one's (with markers 19 and 126 MiB when written, 92 MiB folded when the
full graph was built before folding; without markers 14.3 and 49.4 MiB by /usr/bin/time
when added, 49.4 MiB folded before the kernel period's cut was agreed while reading).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    BUILD, COLLECTOR, DDP_SIM, DPRO_RUN, IMPORT, KINETO, LIBDIR, REPLAY, SIMRUN, check,
    exit_status, missing, traced_env)

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
CLASS_KEYS = {"others_waited_us_per_iter", "arrived_last"}
SAMPLE_KEYS = {"samples", "informative"}  # under "contention": counted on the representatives


def replay(d, *extra):
    out = subprocess.run([REPLAY, d, "--json", "--perturb", "3"] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    return json.loads(out.stdout)


def peak_kib(cmd):
    """Runs cmd (output discarded) and returns its peak RSS in KiB (ru_maxrss of wait4)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    check(p.returncode == 0, "%s exits 0 (%d)" % (" ".join(cmd), p.returncode))
    return ru.ru_maxrss


def diff(a, b, path, out):
    """Appends to out where a and b differ (numbers beyond 0.5 % or 1 unit)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append("%s: keys %s vs %s" % (path, sorted(set(a) ^ set(b)), ""))
        for k in a:
            if k in b and k not in CLASS_KEYS and not (".contention." in path + "."
                                                       and k in SAMPLE_KEYS):
                diff(a[k], b[k], path + "." + k, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d vs %d entries" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
    elif isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        if a != b:
            out.append("%s: %r vs %r" % (path, a, b))
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if abs(a - b) > max(1.0, 0.005 * max(abs(a), abs(b))):
            out.append("%s: %r vs %r" % (path, a, b))
    elif a != b:
        out.append("%s: %r vs %r" % (path, a, b))


def class_sums(js, classes, key):
    by_rank = {p["rank"]: p[key] for p in js["per_rank"]}
    return [sum(by_rank[r] for r in c["ranks"]) for c in classes]


def compare(name, d, expect_classes=None, straggler=None, read_folded=None):
    """Checks the folded replay of d against --no-fold; returns both iteration times."""
    folded, explicit = replay(d), replay(d, "--no-fold")
    classes = folded["rank_classes"]
    print("%s: %d ranks, classes %s" % (name, folded["ranks"],
                                       [(c["ranks"], c["apart"]) for c in classes]))
    check(sum(c["weight"] for c in classes) == folded["ranks"]
          and sorted(r for c in classes for r in c["ranks"]) == [p["rank"] for p in
                                                                 explicit["per_rank"]],
          "%s: the classes' weights and ranks cover every rank once" % name)
    check(len(explicit["rank_classes"]) == explicit["ranks"]
          and all(c["weight"] == 1 for c in explicit["rank_classes"]),
          "%s: --no-fold keeps every rank a class of its own" % name)
    if expect_classes is not None:
        check(len(classes) == expect_classes,
              "%s: %d classes (expected %d)" % (name, len(classes), expect_classes))
    f, e = folded["simulated_iter_us"], explicit["simulated_iter_us"]
    check(e > 0 and abs(f - e) <= 0.005 * e,
          "%s: folded iteration %.3f us within 0.5 %% of the explicit %.3f us" % (name, f, e))
    rest_f = {k: v for k, v in folded.items() if k != "rank_classes"}
    rest_e = {k: v for k, v in explicit.items() if k != "rank_classes"}
    out = []
    diff(rest_f, rest_e, name, out)
    for line in out[:10]:
        print("  differs: " + line)
    check(not out, "%s: the other JSON keys agree (%d differences)" % (name, len(out)))
    for key in ["others_waited_us_per_iter"]:
        sf, se = class_sums(folded, classes, key), class_sums(explicit, classes, key)
        check(all(abs(x - y) <= max(1.0, 0.005 * max(abs(x), abs(y))) for x, y in zip(sf, se)),
              "%s: %s summed over each class agrees (%s vs %s)" % (name, key, sf, se))
    if read_folded is not None:
        got = [c["read_folded"] for c in classes]
        want = [c["weight"] - 1 if c["weight"] > 1 else 0 for c in classes]
        check((got == want) if read_folded else not any(got),
              "%s: ranks folded while read per class %s (expected %s)"
              % (name, got, want if read_folded else "none"))
        check(not any(c["read_folded"] for c in explicit["rank_classes"]),
              "%s: --no-fold folds nothing while reading" % name)
    if straggler is not None:
        alone = [c for c in classes if straggler in c["ranks"]]
        check(alone and alone[0]["ranks"] == [straggler] and alone[0]["apart"] in
              ("straggler", "timing", "structure"),
              "%s: straggler rank %d stays a class of its own" % (name, straggler))
        check([s["rank"] for s in folded["stragglers"]] == [straggler]
              and [s["rank"] for s in explicit["stragglers"]] == [straggler],
              "%s: rank %d is the straggler, folded and explicit" % (name, straggler))
    return f, e


def chrome_check(name, d, tmp):
    """--chrome of a folded replay names the folded ranks (only their iterations track: no
    node of their own) and says so; --no-fold none."""
    for extra, folded in (([], True), (["--no-fold"], False)):
        path = os.path.join(tmp, "%s%s.json" % (name, "".join(extra)))
        r = subprocess.run([REPLAY, d, "--chrome", path] + extra, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, universal_newlines=True)
        check(r.returncode == 0, "%s %s: --chrome exits 0" % (name, extra))
        with open(path) as f:
            tr = json.load(f)
        names = {e["pid"]: e["args"]["name"] for e in tr["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        tracked = {e["pid"] for e in tr["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") != "iteration"}
        marked = sorted(p for p, n in names.items() if "[folded: as rank" in n)
        n_fold = tr["otherData"].get("folded_ranks", 0)  # written only when some are
        if folded:
            check(n_fold > 0 and marked == sorted(set(names) - tracked) and len(marked) == n_fold
                  and "--no-fold writes every rank" in r.stderr,
                  "%s: the folded Chrome trace names its %d folded ranks %s, the ranks "
                  "without tracks, and says so" % (name, n_fold, marked))
        else:
            check(n_fold == 0 and not marked and tracked == set(names),
                  "%s --no-fold: the Chrome trace has tracks for every rank" % name)


def memory(tmp, extra):
    """The folded replay's peak RSS under half the explicit one's on a 64-rank job of
    bench_scale (extra: its generator's options)."""
    name = "memory" + "".join(extra)
    d = os.path.join(tmp, name)
    subprocess.run([BENCH_SCALE, "gen", d, "64", "4000", "10"] + extra, check=True,
                   stdout=subprocess.DEVNULL)
    folded = peak_kib([REPLAY, d, "--json"])
    explicit = peak_kib([REPLAY, d, "--json", "--no-fold"])
    print("%s: 64 ranks, peak RSS folded %.1f MiB, explicit %.1f MiB"
          % (name, folded / 1024.0, explicit / 1024.0))
    if os.environ.get("DPRO_SANITIZERS") == "1":
        # ASan's shadow memory and its quarantine of freed blocks (which keeps what the
        # folding frees) are in the RSS: the ratio says nothing there.
        print("%s: not compared in a sanitizer build (ASan's shadow and quarantine are in "
              "the peak RSS)" % name)
    else:
        check(folded < 0.5 * explicit,
              "%s: the folded replay's peak (%d KiB) under half the explicit one's (%d KiB)"
              % (name, folded, explicit))


def leaving(tmp):
    """The jobs whose ranks leave the last all-reduce unevenly (gen_traces --leave)."""
    d = os.path.join(tmp, "leave")
    subprocess.run([GEN, d, "--ranks", "8", "--iters", "8", "--straggler", "7:1.2", "--leave",
                    "7:0.5"], check=True, stdout=subprocess.DEVNULL)
    compare("leave", d, expect_classes=2)
    d = os.path.join(tmp, "leave-ring")
    ring = [a for r in range(1, 7) for a in ("--leave", "%d:%g" % (r, 0.0005 * r))]
    subprocess.run([GEN, d, "--ranks", "8", "--iters", "8", "--straggler", "7:1.2", "--leave",
                    "7:0.5"] + ring, check=True, stdout=subprocess.DEVNULL)
    f, e = compare("leave-ring", d, expect_classes=2)
    check(abs(f - e) <= 1e-4 * e, "leave-ring: the class leaves with its last member: folded "
          "%.3f us within 0.01 %% of the explicit %.3f us" % (f, e))


def world_jobs(tmp):
    """ddp-sim on 4 ranks in the hidden physics, a few seeds, folded against --no-fold."""
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM)):
        print("skip (part): no simulated device for the world jobs")
        return
    for seed in (1, 2, 3):
        d = os.path.join(tmp, "world%d" % seed)
        env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="world",
                         SIMGPU_WORLD_SEED=str(seed))
        env.pop("DPRO_TEST_CLOCK_OFFSET_NS", None)
        p = subprocess.run([DPRO_RUN, "-o", d, "--", SIMRUN, "-n", "4", "--", DDP_SIM,
                            "--layers", "4", "--warmup", "1", "--iterations", "5"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300, env=env)
        check(p.returncode == 0, "world seed %d: the job ran" % seed)
        if p.returncode != 0:
            print(p.stderr[-300:])
        else:
            compare("world%d" % seed, d)


def main():
    with tempfile.TemporaryDirectory(prefix="dpro-fold-") as tmp:
        d = os.path.join(tmp, "alike")
        subprocess.run([GEN, d, "--ranks", "8", "--iters", "6", "--skew", "3:200",
                        "--skew", "6:-90"], check=True, stdout=subprocess.DEVNULL)
        compare("alike", d, expect_classes=1, read_folded=True)
        chrome_check("alike", d, tmp)
        d = os.path.join(tmp, "straggler")
        subprocess.run([GEN, d, "--ranks", "6", "--iters", "8", "--straggler", "2:1.3",
                        "--skew", "4:120"], check=True, stdout=subprocess.DEVNULL)
        compare("straggler", d, expect_classes=2, straggler=2)
        by_jobs = [replay(d, "--jobs", str(n)) for n in (1, 2, 4)]
        check(by_jobs[0] == by_jobs[1] == by_jobs[2],
              "straggler: the folded --json is the same with --jobs 1, 2 and 4 (ranks folded "
              "while read wave by wave)")
        d = os.path.join(tmp, "no-markers")
        subprocess.run([GEN, d, "--ranks", "3", "--iters", "8", "--no-markers"], check=True,
                       stdout=subprocess.DEVNULL)
        compare("no-markers", d, expect_classes=1, read_folded=True)
        chrome_check("no-markers", d, tmp)
        d = os.path.join(tmp, "no-markers-straggler")
        subprocess.run([GEN, d, "--ranks", "6", "--iters", "8", "--no-markers", "--straggler",
                        "2:1.3", "--skew", "4:120"], check=True, stdout=subprocess.DEVNULL)
        compare("no-markers-straggler", d, straggler=2, read_folded=True)
        d = os.path.join(tmp, "cut")
        subprocess.run([GEN, d, "--ranks", "4", "--iters", "20", "--cut", "1:0.6", "--skew",
                        "2:40"], check=True, stdout=subprocess.DEVNULL)
        compare("cut", d, expect_classes=2)
        d = os.path.join(tmp, "jitter")
        subprocess.run([BENCH_SCALE, "gen", d, "16", "4000", "10"], check=True,
                       stdout=subprocess.DEVNULL)
        compare("jitter", d, expect_classes=2, straggler=1, read_folded=True)
        d = os.path.join(tmp, "jitter-no-markers")
        subprocess.run([BENCH_SCALE, "gen", d, "16", "4000", "10", "--no-markers"], check=True,
                       stdout=subprocess.DEVNULL)
        compare("jitter-no-markers", d, expect_classes=2, straggler=1, read_folded=True)
        by_jobs = [replay(d, "--jobs", str(n)) for n in (1, 2, 4)]
        check(by_jobs[0] == by_jobs[1] == by_jobs[2],
              "jitter-no-markers: the folded --json is the same with --jobs 1, 2 and 4 (the "
              "period's cut agreed from every rank's scan, whatever the threads)")
        leaving(tmp)
        world_jobs(tmp)
        for extra in ([], ["--no-markers"]):
            memory(tmp, extra)
        if os.path.isdir(KINETO):
            two = sorted(f for f in os.listdir(KINETO) if f.startswith("128rank-sampled"))
            if two:
                d = os.path.join(tmp, "kineto-128rank")
                subprocess.run([IMPORT, "kineto"] + [os.path.join(KINETO, f) for f in two]
                               + ["-o", d, "-q"], check=True)
                compare("kineto-128rank", d)
        else:
            print("skip (part): %s is missing" % KINETO)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
