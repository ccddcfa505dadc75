"""test_share_memcheck: dpro-replay --mpi and dpro-optimize --mpi under valgrind's memcheck
send and inflate only bytes they set.

A process other than 0 sends process 0 its ranks' reads with the clock alignment samples
taken there; folded, it holds them zlib-compressed until sent. The samples' struct has
padding after its rank, never set: sent as the struct's bytes, inflate read them as
uninitialised (thousands of reports in zlib, a 8-rank job, 2 processes). They travel
field by field now. Runs `mpirun -n 2 valgrind dpro-replay --mpi DIR` folded and
--no-fold, and dpro-optimize --mpi, on a job of bench_scale's generator (8 ranks, 2,000
events, 5 iterations), and asks for no memcheck error in any process (Open MPI's own
report, from PMIx's thread, suppressed: tests/replay/openmpi.supp says why).

Skipped, saying why, without MPI (as test_replay_mpi.py), without valgrind, and in a
sanitizer build (valgrind cannot run it).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, SKIP, SRC, check, exit_status  # noqa: E402
from test_replay_mpi import ENV, mpi_ready  # noqa: E402

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
BENCH_SCALE = os.path.join(BUILD, "tests", "replay", "bench_scale")
SUPP = os.path.join(SRC, "tests", "replay", "openmpi.supp")


def memcheck(label, tmp, cmd):
    """Runs cmd under valgrind in each of 2 MPI processes; checks each exits 0 and no
    process reports a memcheck error (the logs printed when one does)."""
    logs = os.path.join(tmp, label.replace(" ", "_"))
    os.mkdir(logs)
    r = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-n", "2", "valgrind", "-q",
                        "--track-origins=yes", "--error-exitcode=3", "--suppressions=" + SUPP,
                        "--log-file=" + os.path.join(logs, "%p.log")] + cmd,
                       env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    reports = ""
    for path in sorted(glob.glob(os.path.join(logs, "*.log"))):
        with open(path) as f:
            reports += f.read()
    check(r.returncode == 0 and reports == "",
          "%s: mpirun -n 2 valgrind exits 0 (%d), no memcheck error in any process"
          % (label, r.returncode))
    if r.returncode != 0 or reports:
        print(r.stderr.decode(errors="replace")[-2000:])
        print(reports[:20000])


def main():
    if os.environ.get("DPRO_SANITIZERS", "0") == "1":
        print("skip: sanitizer build (valgrind cannot run it)")
        return SKIP
    if shutil.which("valgrind") is None:
        print("skip: no valgrind")
        return SKIP
    rc = mpi_ready("dpro-replay")
    if rc is not None:
        return rc
    with tempfile.TemporaryDirectory(prefix="dpro-memcheck-") as tmp:
        d = os.path.join(tmp, "job")
        subprocess.run([BENCH_SCALE, "gen", d, "8", "2000", "5"], check=True,
                       stdout=subprocess.DEVNULL)
        memcheck("replay folded", tmp, [REPLAY, "--mpi", d, "-q"])
        memcheck("replay no-fold", tmp, [REPLAY, "--mpi", "--no-fold", d, "-q"])
        memcheck("optimize", tmp, [OPTIMIZE, "--mpi", d, "--max-evals", "12", "-q"])
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
