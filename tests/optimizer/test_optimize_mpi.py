"""test_optimize_mpi: dpro-optimize --mpi under mpirun gives the single-process report.

Jobs written by tests/replay/gen_traces (clock skew; a straggler; no iteration markers;
gradient buckets) and by tests/replay/bench_scale's generator (16 ranks whose host calls
jitter) are optimized by `mpirun --oversubscribe -n P dpro-optimize --mpi DIR --json
--seed S --max-evals N` with P = 2, 3 and 4 (N and the rounds' plans not multiples of
P), and the JSON must be the single-process dpro-optimize's field by field, the search's
two timing keys (search_s, evaluations_per_s) aside; the strategies list byte for byte.
A --memory-budget run on ddp-sim (3 ranks on tests/simgpu under the collector: an
allocation trace; the baseline's peak over the budget) is compared the same way
(skipped without tests/simgpu, saying so). Each run must also
have been shared: every process logs (DPRO_LOG=info) its simulations and the rounds, the
rounds are at most 1.5 x evaluations / P + 2 (the guesses of the next plans mostly
right), and every process simulated some; every process
read its share of the traces and received the graph.

A trace whose events cannot be read (its batches damaged, its header whole), in the share
of the last process, ends every process with a message naming the file and a non-zero
status, within the test's timeout (no hang).

Skips only when MPI is really unavailable (as test_replay_mpi.py: configure found none
and there is no mpicc, or configure was told --without-mpi).
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import (BUILD, COLLECTOR, DDP_SIM, DPRO_RUN, LIBDIR, SIMRUN,  # noqa: E402
                            check, collector_records, exit_status, missing, traced_env)
from test_replay_mpi import ENV, diff, mpi_ready  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
TIMING_KEYS = ("search_s", "evaluations_per_s")
SEARCHED = re.compile(r"search shared by (\d+) MPI processes: (\d+) simulations here in (\d+) "
                      r"rounds, (\d+) evaluations in the search")
SHARE = re.compile(r"read the events of (\d+) of the (\d+) present ranks here")
GRAPH = re.compile(r"graph received from process 0: (\d+) nodes")


def mpirun(n, *cmd):
    return subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-n", str(n)] + list(cmd),
                          env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)


def compare(name, d, nprocs, extra, launch=None):
    """dpro-optimize --mpi started by launch(nprocs, *cmd) (mpirun() unless given) against
    the single process; the single process's JSON, or None when either failed."""
    launch = launch or mpirun
    args = [d, "--json", "--seed", "7", "--budget-s", "1000"] + extra
    one = subprocess.run([OPTIMIZE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=ENV, timeout=600)
    label = "%s %s-n %d" % (name, " ".join(extra) + " " if extra else "", nprocs)
    check(one.returncode == 0, "%s: the single process exits 0 (%d)" % (label, one.returncode))
    r = launch(nprocs, OPTIMIZE, "--mpi", *args)
    check(r.returncode == 0, "%s: %s dpro-optimize --mpi exits 0 (%d)" % (label, launch.__name__,
                                                                           r.returncode))
    if one.returncode != 0 or r.returncode != 0:
        print(one.stderr.decode(errors="replace")[-1500:])
        print(r.stderr.decode(errors="replace")[-2000:])
        return None
    single, many = json.loads(one.stdout), json.loads(r.stdout)
    for k in TIMING_KEYS:
        single.pop(k), many.pop(k)
    out = []
    diff(single, many, name, out)
    for line in out[:10]:
        print("  differs: " + line)
    check(not out and single["evaluations"] > 0,
          "%s: the JSON is the single-process one field by field, timing aside (%d "
          "differences; %d evaluations, %d strategies)"
          % (label, len(out), single["evaluations"], len(single["strategies"])))
    check(json.dumps(single["strategies"]) == json.dumps(many["strategies"]),
          "%s: the strategies list is the single process's byte for byte" % label)
    err = r.stderr.decode(errors="replace")
    stats = [tuple(int(x) for x in m.groups()) for m in SEARCHED.finditer(err)]
    if "--what-if" not in extra:
        evals = single["evaluations"]
        check(len(stats) == nprocs and all(s[0] == nprocs and s[3] == evals for s in stats)
              and len(set(s[2] for s in stats)) == 1
              and (evals < 2 * nprocs or (all(s[1] > 0 for s in stats)
                                          and stats[0][2] <= 1.5 * evals / nprocs + 2)),
              "%s: the %d processes shared the search's %d evaluations (simulations per "
              "process %s in %s rounds: at most 1.5 x evaluations / P + 2, the guesses "
              "mostly right)" % (label, nprocs, evals, [s[1] for s in stats],
                                            stats[0][2] if stats else "no"))
    shares = [int(m.group(1)) for m in SHARE.finditer(err)]
    graphs = GRAPH.findall(err)
    check(len(shares) == nprocs and sum(shares) == single["ranks"]
          and len(graphs) == nprocs - 1 and len(set(graphs)) <= 1,
          "%s: every process read its share of the traces (%s), %d received the graph"
          % (label, shares, len(graphs)))
    return single


def bad_share(tmp):
    """A rank file in the last process's share whose events cannot be read: every process
    ends."""
    d = os.path.join(tmp, "bad")
    subprocess.run([GEN, d, "--ranks", "4", "--iters", "6"], check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(f for f in os.listdir(d) if f.endswith(".dpro"))
    check(len(files) == 4, "bad: gen_traces wrote 4 rank files (%s)" % files)
    if len(files) != 4:
        return
    # its events damaged, its header and tables whole: every process opens it, only the
    # process whose share holds rank 3 reads the events and meets the damage
    con = sqlite3.connect(os.path.join(d, files[-1]))
    con.execute("UPDATE batches SET data = randomblob(length(data))")
    con.commit()
    con.close()
    one = subprocess.run([OPTIMIZE, d, "--json", "--max-evals", "20"], capture_output=True,
                         env=ENV, timeout=300)
    try:
        r = mpirun(2, OPTIMIZE, "--mpi", d, "--json", "--max-evals", "20")
    except subprocess.TimeoutExpired:
        check(False, "bad: mpirun -n 2 dpro-optimize --mpi ends (it hung)")
        return
    err = r.stderr.decode(errors="replace")
    check(one.returncode != 0 and r.returncode != 0 and files[-1] in err and not r.stdout,
          "bad: a bad trace in process 1's share ends every process (single %d, mpirun %d) "
          "with a message naming %s" % (one.returncode, r.returncode, files[-1]))
    if files[-1] not in err:
        print(err[-1500:])


def memory_budget(tmp):
    """ddp-sim with an allocation trace (3 ranks on the simulated device), under a memory
    budget only recomputation and accumulation meet."""
    if missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM)):
        print("skip (part): no tests/simgpu (CUDA headers): no --memory-budget job")
        return
    d = os.path.join(tmp, "memory")
    collector_records(d, [SIMRUN, "-n", "3", "--", DDP_SIM, "--preset", "resnet50", "--layers",
                          "4", "--batch", "32", "--iterations", "6", "--warmup", "1"],
                      traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR))
    for n in (2, 3):
        one = compare("memory", d, n, ["--max-evals", "37", "--memory-budget", "500M",
                                       "--strategies", "memory", "--batch", "32"])
        if one is not None:
            check(one["baseline_peak_memory_bytes"] and not one["baseline_fits_budget"]
                  and one["strategies"] and one["strategies"][0]["peak_memory_bytes"] <= 500 << 20,
                  "memory -n %d: the baseline's peak (%s B) is over the budget and the best plan "
                  "fits it (%s)" % (n, one["baseline_peak_memory_bytes"],
                                    [x["kind"] for x in one["strategies"]]))


def main():
    rc = mpi_ready("dpro-optimize")
    if rc is not None:
        return rc
    with tempfile.TemporaryDirectory(prefix="dpro-optmpi-") as tmp:
        jobs = [("skew", [GEN, "--ranks", "4", "--iters", "6", "--skew", "1:200", "--skew",
                          "3:-90"], (2, 3, 4), "61"),
                ("straggler", [GEN, "--ranks", "6", "--iters", "8", "--straggler", "2:1.3",
                               "--buckets", "5"], (3, 4), "47"),
                ("no-markers", [GEN, "--ranks", "3", "--iters", "8", "--no-markers"], (2, 4),
                 "33")]
        for name, gen, procs, evals in jobs:
            d = os.path.join(tmp, name)
            subprocess.run([gen[0], d] + gen[1:], check=True, stdout=subprocess.DEVNULL)
            for n in procs:
                compare(name, d, n, ["--max-evals", evals])
        d = os.path.join(tmp, "jitter")
        subprocess.run([BENCH_SCALE, "gen", d, "16", "2000", "8"], check=True,
                       stdout=subprocess.DEVNULL)
        compare("jitter", d, 3, ["--max-evals", "40"])
        memory_budget(tmp)
        bad_share(tmp)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
