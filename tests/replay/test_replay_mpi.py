"""test_replay_mpi: dpro-replay --mpi under mpirun gives the single-process report.

First the distributed simulation itself, node for node (test_mpi_sim under mpirun with
1 to 4 processes: every node's times and binding dependency, every group's last
arrival, on graphs with ties between ranks, a straggler, fewer ranks than the job and
edges between ranks; and the graph process 0 hands to the others arrives whole). Then whole replays: multi-rank traces written by
tests/replay/gen_traces (clock skew; a straggler; no iteration markers; a slow rank
that leaves the last all-reduce early, whose class's leaving the graph process 0 hands
over must carry: without it 1809.4 us against the single process's 1765.0) and by
tests/replay/bench_scale's generator (16 ranks whose host calls jitter), and pipeline
jobs of pipe-sim on the simulated device (send/recv pairs between stages, plain and
grouped, as synchronisation points across processes; skipped without tests/simgpu) are
replayed by
`mpirun --oversubscribe -n P dpro-replay --mpi DIR --json` with P = 2 and 3 (and 4: shares
of 2, 1, 2, 1 ranks on 6, and more processes than the 3 ranks of no-markers: one reads
nothing), folded (the default) and --no-fold (and a window, -n 2, on the 16 jittering
ranks; and `--what-if-ranks 8`, with `--what-if-ranks-per-host 8` on a trace with CPU
samples and host stalls: the host-share model, its stalls and the wait at 8 ranks), and the JSON must be the single-process dpro-replay's byte for byte (and,
to say where it differs, field by field). Process 0 logs what it received of the others'
reads: the events under half their 160 loaded bytes (they travel compact) and, folded,
the signatures' rows under their 24 bytes held. Each run must also have been distributed:
its processes' log lines (DPRO_LOG=info) name P processes whose ranks add up to the
job's, and exchanges between them; every process read the events of its share of the
present ranks, k * P / n == p (the shares add up to the job's ranks), process 0
gathered them and handed the graph to the P - 1 others (the same nodes, edges, bytes
on each), and the log reports ranks folded while read as often as the single process
does (once when folding while reading happened, not once a process). Each process
opened only its share of the trace files (file k of m with k * P / m == p, for their
meta, handed to every process) and the files of the ranks whose events it read, process
0 too, which builds the graph from the other ranks' readers as their processes sent them
(its log lines). Process 0 aligned the clocks with
the samples taken where each rank was read, and took the ranks' iterations found there
(--no-fold: every rank read elsewhere; folded: at most those, since a rank process 0
reduces anew, or whose iterations the load's cut placed, has them taken there). A job of ranks
alike in a chain (0 ~ 2 ~ 3, 0 !~ 3) checks process 0's classification of a rank folded
on another process into a representative that is not one on process 0.
A job of two stages with a straggler and ranks near the tolerance (run with 2, 3 and 4
processes) checks the merged classes: the other processes send their classes' spreads,
not their folded ranks' signatures, and process 0 classes by the spread where it decides
for a whole class and asks for the signatures of a class that straddles a
representative's tolerance (with 3 processes), giving the single process's classes.

Failures: a file that is no trace, opened by one process only, is skipped with the
single process's warning and the same JSON (folded and --no-fold); a trace of a newer
schema there refuses the load on every process with the single process's message; and a
process whose hand-over to process 0 fails (DPRO_TEST_MPI_SEND_FAIL=P, as out of memory
would) while process 0 waits for it ends every process (MPI_Abort) after saying which
and why: non-zero, within 120 s, never a hang.

Skips only when MPI is really unavailable: configure found none and there is no mpicc
on PATH, or configure was told --without-mpi. MPI installed (mpicc on PATH) but not
built is a failure (configure missed it), and so is a missing mpirun with MPI built.
Runs as root with OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM).
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (BUILD, COLLECTOR, DPRO_RUN, LIBDIR, REPLAY, SIMRUN,  # noqa: E402
                            SKIP, check, exit_status, traced_env)

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
MPI_SIM = os.path.join(BUILD, "tests", "replay", "test_mpi_sim")
PIPE_SIM = os.path.join(BUILD, "tests", "replay", "pipe-sim")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", DPRO_LOG="info")
STATS = re.compile(r"simulated by (\d+) MPI processes: (\d+) ranks and \d+ nodes here, "
                   r"(\d+) exchanges")
GRAPH = re.compile(r"graph received from process 0: (\d+) nodes, (\d+) edges, (\d+) bytes")
SHARE = re.compile(r"read the events of (\d+) of the (\d+) present ranks here, "
                   r"(handed to process 0|the others' gathered)")
READ = re.compile(r"\d+ of \d+ ranks folded while read")
OPENED = re.compile(r"opened (\d+) of the (\d+) trace files here")
READERS = re.compile(r"received (\d+) trace readers from the other processes "
                     r"\(their files not opened here\): (\d+) bytes; (\d+) of them share the "
                     r"strings of the one before")
ALIGNED = re.compile(r"clock alignment: the samples of (\d+) of the (\d+) present ranks taken where "
                     r"they were read")
ITERS = re.compile(r"iterations: those of (\d+) of the (\d+) present ranks found where they were "
                   r"read")
RECEIVED = re.compile(r"received the other processes' reads: (\d+) bytes, their (\d+) events in "
                      r"(\d+) \((\d+) as loaded\), their signatures' (\d+) rows in (\d+) "
                      r"\((\d+) as held\); their classes' spreads in (\d+): (\d+) folded "
                      r"ranks classed by their class's spread, (\d+) by their signature")
PACKED = re.compile(r"read the events of (\d+) of the \d+ present ranks here, handed to process 0 "
                    r"\(held compressed from their classification until sent: (\d+) bytes, "
                    r"(\d+) unpacked\)")


def mpi_built():
    with open(os.path.join(BUILD, "config.h")) as f:
        return re.search(r"^#define HAVE_MPI 1$", f.read(), re.M) is not None


def configured_without_mpi():
    """Whether configure was run with --without-mpi (or --with-mpi=no)."""
    with open(os.path.join(BUILD, "config.log")) as f:
        for line in f:
            if line.startswith("  $ "):
                return re.search(r"--with(out-mpi|-mpi=no)\b", line) is not None
    return False


def mpi_ready(tool):
    """None when tool's --mpi was built and mpirun is on PATH; else the test's exit status:
    a skip where this machine has no MPI or configure was told not to use it, a failure
    where MPI is installed but configure did not build --mpi, or mpirun is missing."""
    if not mpi_built():
        if configured_without_mpi():
            print("skip: configured --without-mpi: %s has no --mpi" % tool)
            return SKIP
        mpicc = shutil.which("mpicc")
        if mpicc is None:
            print("skip: no MPI on this machine (no mpicc; install libopenmpi-dev and "
                  "openmpi-bin, configure again): %s has no --mpi" % tool)
            return SKIP
        check(False, "MPI is installed (%s) but configure did not build %s --mpi "
              "(see MPI in config.log)" % (mpicc, tool))
        return exit_status()
    check(shutil.which("mpirun") is not None, "mpirun is on PATH (MPI was built)")
    return None if shutil.which("mpirun") else exit_status()


def mpirun(n, *cmd):
    return subprocess.run([MPIRUN, "--oversubscribe", "-n", str(n)] + list(cmd), env=ENV,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def diff(a, b, path, out):
    """Appends to out where a and b differ (numbers beyond 1e-9 relative)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append("%s: keys differ: %s" % (path, sorted(set(a) ^ set(b))))
        for k in a:
            if k in b:
                diff(a[k], b[k], path + "." + k, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d vs %d entries" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
    elif isinstance(a, (bool, str)) or isinstance(b, (bool, str)) or a is None or b is None:
        if a != b:
            out.append("%s: %r vs %r" % (path, a, b))
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if abs(a - b) > 1e-9 * max(abs(a), abs(b)):
            out.append("%s: %r vs %r" % (path, a, b))
    else:
        out.append("%s: %r vs %r" % (path, a, b))


def share_of(k, n, nprocs):
    """The process of the k-th of n in shares (k * P / n == p)."""
    return k * nprocs // n


def opened_check(label, d, nprocs, err, alike_strings):
    """Each process, process 0 too, opened only its share of the trace files (their names'
    numbers compared as numbers) and the files of the ranks whose events it read (the job's
    files are its present ranks, named rankN...): the two shares are one where the names
    carry the ranks. Process 0 holds the other present ranks' readers as their processes
    sent them; where every rank holds the same strings (alike_strings), each one but the
    first of a process's message shares the strings of the one before (one copy)."""
    def natural(f):
        return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", f)]
    files = sorted((f for f in os.listdir(d) if f.endswith(".dpro")), key=natural)
    ranks = [re.match(r"rank(\d+)", f) for f in files]
    if not all(ranks):
        return
    m = len(files)
    order = sorted(range(m), key=lambda i: int(ranks[i].group(1)))  # rank order
    want = []
    for p in range(nprocs):
        mine = {i for i in range(m) if share_of(i, m, nprocs) == p}
        mine |= {order[k] for k in range(m) if share_of(k, m, nprocs) == p}
        want.append(len(mine))
    got = [tuple(int(x) for x in g.groups()) for g in OPENED.finditer(err)]
    check(sorted(got) == sorted((w, m) for w in want),
          "%s: each process opened only its shares' trace files "
          "(opened, of: %s; want %s)" % (label, sorted(got), sorted(want)))
    # process 0 received the readers of the files the others opened, once each
    others = sum(1 for i in range(m) if share_of(i, m, nprocs) != 0)
    readers = [tuple(int(x) for x in g.groups()) for g in READERS.finditer(err)]
    senders = len({share_of(i, m, nprocs) for i in range(m)} - {0})
    check((nprocs == 1 and not readers) or
          (len(readers) == 1 and readers[0][0] == others and readers[0][1] > 0
           and readers[0][2] <= others - senders
           and (not alike_strings or readers[0][2] == others - senders)),
          "%s: process 0 received the %d readers the others opened, %s of them sharing the "
          "strings of the one before (received, bytes, sharing: %s)"
          % (label, others, others - senders if alike_strings else "at most %d" %
             (others - senders), readers))


def compare(name, d, nprocs, extra, opened=True, alike_strings=False, launch=None):
    """dpro-replay --mpi started by launch(nprocs, *cmd) (mpirun() unless given; it returns
    a CompletedProcess with bytes) against the single process; the processes' stderr."""
    launch = launch or mpirun
    args = [d, "--json", "--perturb", "3"] + extra
    one = subprocess.run([REPLAY] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         check=True, env=ENV)
    single = json.loads(one.stdout)
    label = "%s %s-n %d" % (name, " ".join(extra) + " " if extra else "", nprocs)
    r = launch(nprocs, REPLAY, "--mpi", *args)
    check(r.returncode == 0, "%s: %s dpro-replay --mpi exits 0 (%d)" % (label, launch.__name__,
                                                                         r.returncode))
    if r.returncode != 0:
        print(r.stderr.decode(errors="replace")[-2000:])
        return ""
    check(r.stdout == one.stdout, "%s: the JSON is the single-process one byte for byte" % label)
    many = json.loads(r.stdout)
    out = []
    diff(single, many, name, out)
    for line in out[:10]:
        print("  differs: " + line)
    check(not out and single["simulated_iter_us"] > 0,
          "%s: the JSON is the single-process one field by field (%d differences; "
          "iteration %.6f us vs %.6f us)" % (label, len(out), single["simulated_iter_us"],
                                             many["simulated_iter_us"]))
    stats = [tuple(int(x) for x in m.groups()) for m in STATS.finditer(r.stderr.decode())]
    ranks = len(single["rank_classes"])  # the ranks simulated: every rank, or the classes
    busy = sum(1 for s in stats if s[1] > 0)
    check(len(stats) == nprocs and all(s[0] == nprocs for s in stats)
          and sum(s[1] for s in stats) == ranks and busy == min(nprocs, ranks)
          and all((s[2] > 0) == (busy > 1) for s in stats),
          "%s: %d processes simulated shares %s of the %d simulated ranks, exchanging %s "
          "times" % (label, nprocs, [s[1] for s in stats], ranks,
                     stats[0][2] if stats else "no"))
    err = r.stderr.decode(errors="replace")
    graphs = [tuple(int(x) for x in m.groups()) for m in GRAPH.finditer(err)]
    reads = len(READ.findall(err))
    check(len(graphs) == nprocs - 1 and len(set(graphs)) <= 1
          and all(g[0] > 0 and g[2] > 0 for g in graphs)
          and reads == len(READ.findall(one.stderr.decode(errors="replace"))),
          "%s: process 0 handed the graph to the %d others (%s) and reported folding while "
          "read %d times (the single process: %d)" %
          (label, nprocs - 1, graphs[:1], reads,
           len(READ.findall(one.stderr.decode(errors="replace")))))
    shares = [m.groups() for m in SHARE.finditer(err)]
    n = single["ranks"]
    want = sorted(sum(1 for k in range(n) if k * nprocs // n == p) for p in range(nprocs))
    check(len(shares) == nprocs and all(int(x[1]) == n for x in shares)
          and sorted(int(x[0]) for x in shares) == want
          and sum(1 for x in shares if x[2] == "the others' gathered") == 1,
          "%s: each process read the events of its share of the %d ranks (%s; k * P / n == p: "
          "%s), one gathered them" % (label, n, sorted(int(x[0]) for x in shares), want))
    if opened:
        opened_check(label, d, nprocs, err, alike_strings)
    elsewhere = n - sum(int(x[0]) for x in shares if x[2] == "the others' gathered")
    for what, pattern in (("the clock alignment's samples", ALIGNED),
                          ("the iterations", ITERS)):
        # the ranks read elsewhere came with what was taken from their events there;
        # folding on process 0 reduces some of them anew, and the load's cut places some
        # ranks' iterations (both then taken there), --no-fold neither
        found = [tuple(int(x) for x in m.groups()) for m in pattern.finditer(err)]
        got = found[0][0] if found else 0
        check(len(found) <= 1 and all(a[1] == n for a in found)
              and (got == elsewhere if "--no-fold" in extra else got <= elsewhere),
              "%s: process 0 took %s of the %d ranks read elsewhere from there (%d; log "
              "lines %d)" % (label, what, elsewhere, got, len(found)))
    got = [tuple(int(x) for x in m.groups()) for m in RECEIVED.finditer(err)]
    # the ranks' events travel compact: what each event holds, not its 160 loaded bytes;
    # a folded rank's signature rows too, each structure once a rank
    check(len(got) == 1 and got[0][2] + got[0][5] <= got[0][0]
          and (got[0][1] == 0 or 0 < got[0][2] * 2 < got[0][3])
          and (got[0][4] == 0 or 0 < got[0][5] < got[0][6])
          and ("--no-fold" not in extra or got[0][4] == 0),
          "%s: process 0 received the others' events compact, under half their loaded "
          "size, and the signatures' rows (when folding) under their size held (bytes; "
          "events, their bytes, loaded; rows, their bytes, held: %s)" % (label, got))
    packed = [tuple(int(x) for x in m.groups()) for m in PACKED.finditer(err)]
    if reads > 0:  # folded while read: the other processes held their reads compressed
        check(len(packed) == nprocs - 1 and all(0 < p[1] < p[2] for p in packed if p[0] > 0),
              "%s: the processes other than 0 held their reads compressed until sent "
              "(bytes held, unpacked: %s)" % (label, [p[1:] for p in packed]))
    return err


def mpirun_ends(n, env, *cmd):
    """mpirun as mpirun() with env added, or None when it had not ended in 120 s (a hang)."""
    try:
        return subprocess.run([MPIRUN, "--oversubscribe", "-n", str(n)] + list(cmd),
                              env=dict(ENV, **env), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        return None


def failures(tmp):
    """A damaged trace in one process's share of the files, and a failure on one process:
    the single process's answer, or its error on every process, never a hang."""
    # a file that is no trace, opened by the last process alone (the last of 5 files; of
    # 6 with 3 processes): refused without --partial as the single process refuses it,
    # skipped with --partial with the single process's warnings (the JSON's diagnostics)
    for name, ranks, nprocs, extra in [("garbage", 5, 2, []), ("garbage-nofold", 6, 3,
                                                               ["--no-fold"])]:
        d = os.path.join(tmp, name)
        subprocess.run([GEN, d, "--ranks", str(ranks), "--iters", "6"], check=True,
                       stdout=subprocess.DEVNULL)
        last = sorted(f for f in os.listdir(d) if f.endswith(".dpro"))[-1]
        with open(os.path.join(d, last), "wb") as f:
            f.write(b"not a trace\n" * 512)
        why = "could not be read whole: %s" % os.path.join(d, last)
        r = mpirun_ends(nprocs, {}, REPLAY, "--mpi", d, "--json", *extra)
        err = r.stderr.decode(errors="replace") if r else ""
        check(r is not None and r.returncode == 1 and why in err and not r.stdout,
              "%s -n %d without --partial: refused, status 1 (%s), as the single process "
              "(%s)" % (name, nprocs, r.returncode if r else "a hang", err[-300:]))
        compare(name, d, nprocs, extra + ["--partial"], opened=False)
    # a newer schema in the last process's share of the files: the load is refused, with
    # the single process's message, on every process
    d = os.path.join(tmp, "newer")
    subprocess.run([GEN, d, "--ranks", "4", "--iters", "6"], check=True,
                   stdout=subprocess.DEVNULL)
    last = os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".dpro"))[-1])
    db = sqlite3.connect(last)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_major'")
    db.commit()
    db.close()
    one = subprocess.run([REPLAY, d, "--json"], capture_output=True, text=True, env=ENV)
    why = "written with trace schema 99.x"
    check(one.returncode == 1 and why in one.stderr,
          "newer: the single process refuses the load (%d: %s)" % (one.returncode,
                                                                 one.stderr[-300:]))
    for nprocs in (2, 3):
        r = mpirun_ends(nprocs, {}, REPLAY, "--mpi", d, "--json")
        err = r.stderr.decode(errors="replace") if r else ""
        check(r is not None and r.returncode != 0 and why in err and not r.stdout,
              "newer -n %d: every process ends, non-zero (%s), saying why (%s)" %
              (nprocs, r.returncode if r else "a hang", err[-300:]))
    # process 1 fails handing its reads to process 0 (as out of memory would), while
    # process 0 waits for them: every process ends, the failure said, no hang
    d = os.path.join(tmp, "skew")
    for extra in ([], ["--no-fold"]):
        r = mpirun_ends(3, {"DPRO_TEST_MPI_SEND_FAIL": "1"}, REPLAY, "--mpi", d, "--json",
                        *extra)
        err = r.stderr.decode(errors="replace") if r else ""
        check(r is not None and r.returncode != 0 and "process 1 of 3: out of memory" in err
              and not r.stdout,
              "send failure on process 1 %s-n 3: every process ends, non-zero (%s), saying "
              "which and why (%s)" % (" ".join(extra) + " " if extra else "",
                                      r.returncode if r else "a hang", err[-300:]))


def merged(err):
    """The counts of process 0's log line: folded ranks classed by their class's spread,
    by their signature asked for; None when the line is missing."""
    got = [tuple(int(x) for x in m.groups()) for m in RECEIVED.finditer(err)]
    return got[0][8:10] if len(got) == 1 else None


def stages(tmp):
    # ranks of two stages (2, 9, 10 run other kernels), a straggler (1), and ranks near
    # the tolerance: 4 (0.3 % slower) is alike 0, 6 (0.6 %) alike 4 but not 0. Each process
    # sends its classes' spreads instead of its folded ranks' signatures; process 0 classes
    # a folded rank by the spread where it decides for the whole class, else asks for its
    # signature: with 3 processes, rank 4's class there (5, 6, 7) straddles rank 0's
    # tolerance, so those are asked for and rank 6 makes a class of its own
    d = os.path.join(tmp, "stages")
    subprocess.run([GEN, d, "--ranks", "12", "--iters", "8", "--straggler", "1:1.3",
                    "--straggler", "4:1.003", "--straggler", "6:1.006", "--stage", "2",
                    "--stage", "9", "--stage", "10"], check=True, stdout=subprocess.DEVNULL)
    one = subprocess.run([REPLAY, d, "--json"], stdout=subprocess.PIPE, check=True, env=ENV)
    classes = [c["ranks"] for c in json.loads(one.stdout)["rank_classes"]]
    want = [[0, 3, 4, 5, 7, 8, 11], [1], [2, 9, 10], [6]]
    check(classes == want, "stages: the single process's classes %s (want %s)" % (classes, want))
    for n, asked in ((2, False), (3, True), (4, False)):
        err = compare("stages", d, n, [])  # the JSON, classes included, byte for byte
        got = merged(err)
        check(got is not None and got[0] > 0 and (got[1] > 0) == asked
              and (("rank 6, folded while read on its process, is alike no class here: read "
                    "again" in err) == asked),
              "stages -n %d: process 0 classed folded ranks by their class's spread, and %s "
              "(spread, signature: %s)" % (n, "asked for the signatures of the class that "
                                           "straddles rank 0's tolerance, reading rank 6 "
                                           "again" if asked else "asked for no signature",
                                           got))


def main():
    global MPIRUN
    rc = mpi_ready("dpro-replay")
    if rc is not None:
        return rc
    MPIRUN = shutil.which("mpirun")
    for n in (1, 2, 3, 4):
        r = mpirun(n, MPI_SIM)
        sys.stdout.write(r.stdout.decode(errors="replace"))
        check(r.returncode == 0, "test_mpi_sim with %d processes: the distributed simulation "
              "is the single one node for node" % n)
        if r.returncode != 0:
            print(r.stderr.decode(errors="replace")[-2000:])
    with tempfile.TemporaryDirectory(prefix="dpro-mpi-") as tmp:
        jobs = [("skew", [GEN, "--ranks", "4", "--iters", "6", "--skew", "1:200", "--skew",
                          "3:-90"], (2, 3)),
                ("straggler", [GEN, "--ranks", "6", "--iters", "8", "--straggler", "2:1.3",
                               "--skew", "4:120"], (2, 4)),
                ("no-markers", [GEN, "--ranks", "3", "--iters", "8", "--no-markers"], (2, 3, 4)),
                ("leave", [GEN, "--ranks", "8", "--iters", "8", "--straggler", "7:1.2",
                           "--leave", "7:0.5"], (2, 3))]
        for name, gen, procs in jobs:
            d = os.path.join(tmp, name)
            subprocess.run([gen[0], d] + gen[1:], check=True, stdout=subprocess.DEVNULL)
            for n in procs:
                compare(name, d, n, [])
                compare(name, d, n, ["--no-fold"])
        # --what-if-ranks with the host-share model and its stalls (4 ranks whose host
        # threads lose 1 ms once an iteration, 8 on the one host): process 0 holds every
        # rank's graph and trace, so the what-if is the single process's
        d = os.path.join(tmp, "ranks")
        subprocess.run([GEN, d, "--ranks", "4", "--iters", "14", "--cpu", "2:0.2:1",
                        "--host-stalls", "0.001", "--skew", "1:200"], check=True,
                       stdout=subprocess.DEVNULL)
        for n in (2, 3):
            compare("ranks", d, n, ["--what-if-ranks", "8", "--what-if-ranks-per-host", "8"])
        compare("ranks", d, 2, ["--what-if-ranks", "8", "--no-fold"])
        failures(tmp)
        d = os.path.join(tmp, "jitter")
        subprocess.run([BENCH_SCALE, "gen", d, "16", "2000", "8"], check=True,
                       stdout=subprocess.DEVNULL)
        # every rank of bench_scale's job interns the same strings in the same order
        compare("jitter", d, 3, [], alike_strings=True)
        compare("jitter", d, 3, ["--no-fold"], alike_strings=True)
        compare("jitter", d, 4, ["-n", "2"], alike_strings=True)
        # alike is not transitive: ranks 2 and 3 run 0.2 % and 0.4 % slower; on process 1
        # rank 3 folds into rank 2, which process 0 folds into rank 0's class, where rank 3
        # is not alike: process 0 reads rank 3 again and makes it a class, as the single
        # process does
        d = os.path.join(tmp, "chain")
        subprocess.run([GEN, d, "--ranks", "4", "--iters", "8", "--straggler", "2:1.002",
                        "--straggler", "3:1.004"], check=True, stdout=subprocess.DEVNULL)
        err = compare("chain", d, 2, [])
        check("rank 3, folded while read on its process, is alike no class here: read again"
              in err, "chain -n 2: process 0 read rank 3 again (folded on process 1 into "
              "rank 2, alike rank 0's class, where rank 3 is not)")
        stages(tmp)
        if all(os.path.exists(x) for x in (COLLECTOR, DPRO_RUN, SIMRUN, PIPE_SIM)):
            env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple")
            env.pop("DPRO_TEST_CLOCK_OFFSET_NS", None)
            for name, ranks, extra in [("pipeline", 4, []), ("pipeline-grouped", 3, ["--grouped"])]:
                d = os.path.join(tmp, name)
                p = subprocess.run([DPRO_RUN, "-o", d, "--", SIMRUN, "-n", str(ranks), "--",
                                    PIPE_SIM, "--warmup", "1", "--iterations", "4", "--micro",
                                    "4"] + extra, env=env, capture_output=True, text=True,
                                   timeout=180)
                check(p.returncode == 0, "%s: pipe-sim ran (%d)" % (name, p.returncode))
                if p.returncode == 0:
                    for n in (2, 3):
                        compare(name, d, n, [])
        else:
            print("skip (part): no tests/simgpu (CUDA headers): no pipeline jobs")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
