"""test_optimize_fold: dpro-optimize on folded rank classes gives the explicit answer,
and the screened explicit search the full one's.

dpro-optimize folds alike ranks into weighted classes as dpro-replay does (the default;
--no-fold simulates every rank, --full-search every plan of its search). On each job the
folded run must make fewer classes where the ranks are alike (JSON rank_classes) and give
--no-fold --full-search's answer: the same strategies
in the same order with the same kinds, descriptions, advice and knobs, every predicted
time and the baseline within 0.5 % (or 1 us), and every other key alike (numbers within
0.5 %), but for these, by design:
- search_s and evaluations_per_s: the search's speed (what folding buys);
- rank_classes: what is compared;
- framework.evidence: it counts the kernels of the loaded events, and a folded rank keeps
  only its markers, closing calls and collectives (the framework recognised is compared);
- models.contention_*: the contention fit is made on the representatives' samples (as
  dpro-replay's, whose sample counts test_replay_fold sets aside); off by default, it
  changes no plan here.

--no-fold without --full-search screens the plans on the folded graph and simulates the
best of them on every rank (search.h, search_options.screen; JSON screen): on these jobs it
must give the full explicit search's --json exactly but for the search's speed and size
(search_s, evaluations_per_s, evaluations, proposals) and the screen's own key, and it
must screen where the traced ranks fold to a quarter or less ("alike", "allocs", "jitter").
It must also screen where they do not fold at 0.2 % but do at the screen's 2 % (bench_scale
--jitter 2: "drift" with a straggler, which stands apart, "drift-even" without one, whose
folded predictions are off the explicit ones: the margin widens), with the same answer.
With a --budget-s shorter than one simulation ("jitter", 1 ms) both still report the
baseline.

The jobs: tests/replay/gen_traces (8 alike ranks with clock skew; 6 ranks with a straggler
and 5 gradient buckets; 3 ranks without markers; 8 ranks with an allocation trace, whose
memory estimate the screen analyses a copy of), tests/replay/bench_scale's generator
(16 ranks whose host calls jitter, a straggler among them), and the multi-rank Kineto
traces of ../shared imported (skipped without them). The best plans of the first two
capture the step, whose description states the host calls it takes off per rank: a
folded rank's main thread is its representative's, and the representative's graph
launches were once kept for each rank of its class (44 calls a rank where --no-fold
says 51 on "alike", 51 against 54 on "straggler").
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replay"))
from replay_testlib import (BUILD, IMPORT, KINETO, check, exit_status,  # noqa: E402
                            missing)
from test_replay_fold import diff  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
SET_ASIDE = {"search_s", "evaluations_per_s", "rank_classes"}
SCREEN_ASIDE = {"search_s", "evaluations_per_s", "evaluations", "proposals", "screen"}


def optimize(d, evals, *extra):
    out = subprocess.run([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", evals,
                          "--budget-s", "10000", "-q"] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    return json.loads(out.stdout)


def comparable(js):
    """js without the keys set aside (see above)."""
    rest = {k: v for k, v in js.items() if k not in SET_ASIDE}
    rest["framework"] = {k: v for k, v in js["framework"].items() if k != "evidence"}
    rest["models"] = {k: v for k, v in js["models"].items() if not k.startswith("contention")}
    return rest


def compare(name, d, evals, folds=True, all_traced=True):
    """Checks the folded run of d against --no-fold (folds: the ranks must fold; all_traced:
    every rank of the job has a trace)."""
    folded = optimize(d, evals)
    explicit = optimize(d, evals, "--no-fold", "--full-search")
    screened = optimize(d, evals, "--no-fold")
    check(explicit["screen"] is None, "%s: --full-search screens nothing" % name)
    if folded["rank_classes"] * 4 <= explicit["rank_classes"]:
        scr = screened["screen"]
        check(scr is not None and scr["verified"] >= 1
              and screened["evaluations"] == scr["verified"] + 1,
              "%s: --no-fold screened on the folded graph, the baseline and %s plans simulated "
              "explicitly (%d)" % (name, scr and scr["verified"], screened["evaluations"]))
    print("%s: screen %s, %d explicit evaluations (full search %d)"
          % (name, screened["screen"], screened["evaluations"], explicit["evaluations"]))
    apart = [k for k in sorted(set(screened) | set(explicit))
             if k not in SCREEN_ASIDE and screened.get(k) != explicit.get(k)]
    check(not apart, "%s: the screened search gives the full one's answer exactly (%s differ)"
          % (name, apart))
    print("%s: %d ranks, %d classes folded, %d explicit; baseline %.3f / %.3f us; best %s"
          % (name, folded["ranks"], folded["rank_classes"], explicit["rank_classes"],
             folded["baseline_iter_us"], explicit["baseline_iter_us"],
             [(s["kind"], round(s["predicted_iter_us"], 3)) for s in folded["strategies"][:2]]))
    if all_traced:
        check(explicit["rank_classes"] == explicit["ranks"],
              "%s: --no-fold simulates every rank (%d classes)" % (name, explicit["rank_classes"]))
    check(folded["rank_classes"] <= explicit["rank_classes"],
          "%s: no more classes folded than explicit" % name)
    if folds:
        check(folded["rank_classes"] < folded["ranks"],
              "%s: alike ranks fold (%d classes of %d ranks)"
              % (name, folded["rank_classes"], folded["ranks"]))
    check([s["description"] for s in folded["strategies"]]
          == [s["description"] for s in explicit["strategies"]]
          and [s.get("advice") for s in folded["strategies"]]
          == [s.get("advice") for s in explicit["strategies"]],
          "%s: the same strategies, described and advised alike" % name)
    for key in ("baseline_iter_us", "predicted_iter_us"):
        pairs = ([(folded[key], explicit[key])] if key in folded else
                 [(a[key], b[key]) for a, b in zip(folded["strategies"], explicit["strategies"])])
        check(all(abs(f - e) <= max(1.0, 0.005 * abs(e)) for f, e in pairs),
              "%s: %s folded within 0.5 %% of --no-fold's (%s)" % (name, key, pairs[:3]))
    out = []
    diff(comparable(folded), comparable(explicit), name, out)
    for line in out[:10]:
        print("  differs: " + line)
    check(not out, "%s: the other JSON keys agree (%d differences)" % (name, len(out)))


def screen_loose(name, d, evals, straggler):
    """A job whose ranks do not fold at the fold's 0.2 % (every rank computes up to 2 %
    slower in each iteration, its own way) but do at the screen's 2 %: the screen is
    made on a quarter of the ranks or fewer, a straggler still its own class, and the
    screened answer is the full search's (but the keys of the search's speed and size).
    Without a straggler the slowest rank of each iteration sets the collectives, which
    the representative does not: the screen's folded predictions are off the explicit
    ones (a gap within the screen's 2 %) and the margin widens by twice the gap."""
    folded = optimize(d, evals)
    explicit = optimize(d, evals, "--no-fold", "--full-search")
    screened = optimize(d, evals, "--no-fold")
    scr = screened["screen"]
    print("%s: %d ranks, %d classes folded; screen %s; %d explicit evaluations (full %d)"
          % (name, folded["ranks"], folded["rank_classes"], scr, screened["evaluations"],
             explicit["evaluations"]))
    check(folded["rank_classes"] * 4 > folded["ranks"],
          "%s: the ranks do not fold at 0.2 %% (%d classes of %d ranks)"
          % (name, folded["rank_classes"], folded["ranks"]))
    check(scr is not None and scr["rank_classes"] * 4 <= screened["ranks"]
          and scr["rank_classes"] == (2 if straggler else 1) and scr["verified"] >= 1
          and screened["evaluations"] == scr["verified"] + 1,
          "%s: screened on %s classes (a straggler apart), the baseline and %s plans "
          "simulated explicitly (%d)" % (name, scr and scr["rank_classes"],
                                         scr and scr["verified"], screened["evaluations"]))
    check(scr is not None and (straggler or scr["largest_gap_pct"] > 0.01)
          and 0 <= scr["largest_gap_pct"] <= 2.0
          and 0.5 <= scr["margin_pct"] <= 0.5 + 2 * scr["largest_gap_pct"] + 1e-6,
          "%s: the gap within the screen's 2 %%, the margin 0.5 %% plus twice a gap seen (%s)"
          % (name, scr))
    apart = [k for k in sorted(set(screened) | set(explicit))
             if k not in SCREEN_ASIDE and screened.get(k) != explicit.get(k)]
    check(not apart, "%s: the screened search gives the full one's answer exactly (%s differ)"
          % (name, apart))


def budget_cut(d):
    """A --budget-s shorter than one simulation of the job: the baseline is still simulated
    and reported, screened and not (the search failed when the budget ran out before it)."""
    for extra in ([], ["--full-search"]):
        r = subprocess.run([OPTIMIZE, d, "--json", "-q", "--no-fold", "--budget-s", "0.001"]
                           + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check(r.returncode == 0 and js["baseline_iter_us"] > 0 and js["evaluations"] >= 1,
              "--no-fold %s--budget-s 0.001: exit 0 (%d), the baseline reported (%s)"
              % ("--full-search " if extra else "", r.returncode,
                 r.stderr.decode(errors="replace").strip()[-200:]))


def full_search_alone(d):
    """--full-search without --no-fold: a usage error (exit 2) that names --no-fold, not an
    option accepted and ignored."""
    r = subprocess.run([OPTIMIZE, d, "--json", "-q", "--full-search"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2 and "--no-fold" in err and not r.stdout,
          "--full-search without --no-fold: exit 2 (%d), stderr names --no-fold (%s)"
          % (r.returncode, err.strip()[-200:]))


def main():
    if missing((OPTIMIZE, GEN, BENCH_SCALE)):
        return 77
    with tempfile.TemporaryDirectory(prefix="dpro-optfold-") as tmp:
        jobs = [("alike", [GEN, "--ranks", "8", "--iters", "6", "--skew", "3:200", "--skew",
                           "6:-90"], True),
                ("straggler", [GEN, "--ranks", "6", "--iters", "8", "--straggler", "2:1.3",
                               "--buckets", "5"], True),
                ("no-markers", [GEN, "--ranks", "3", "--iters", "8", "--no-markers"], True),
                ("allocs", [GEN, "--ranks", "8", "--iters", "6", "--allocs"], True),
                ("jitter", [BENCH_SCALE, "gen", "@", "16", "4000", "10"], True)]
        for name, gen, folds in jobs:
            d = os.path.join(tmp, name)
            cmd = [d if a == "@" else a for a in gen] if "@" in gen else [gen[0], d] + gen[1:]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            compare(name, d, "80", folds)
        for name, extra in (("drift", []), ("drift-even", ["--no-straggler"])):
            d = os.path.join(tmp, name)
            subprocess.run([BENCH_SCALE, "gen", d, "16", "4000", "10", "--jitter", "2"] + extra,
                           check=True, stdout=subprocess.DEVNULL)
            screen_loose(name, d, "80", not extra)
        budget_cut(os.path.join(tmp, "jitter"))
        full_search_alone(os.path.join(tmp, "jitter"))
        if os.path.isdir(KINETO) and not missing((IMPORT,)):
            for prefix, folds in (("128rank-sampled", False), ("a100-2rank", False)):
                files = sorted(f for f in os.listdir(KINETO) if f.startswith(prefix))
                if not files:
                    continue
                d = os.path.join(tmp, "kineto-" + prefix)
                subprocess.run([IMPORT, "kineto"] + [os.path.join(KINETO, f) for f in files]
                               + ["-o", d, "-q"], check=True)
                compare("kineto-" + prefix, d, "40", folds, all_traced=False)
        else:
            print("skip (part): %s is missing" % KINETO)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
