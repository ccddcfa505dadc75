#!/usr/bin/env python3
"""simrun --bind-cpus: each rank's process on one CPU of those simrun may run on, rank r
on the (r mod n)-th of the n, as mpirun binds a rank to a core (the fidelity suite binds
its 2-rank jobs so that the kernel does not put one rank's woken threads on the core where
the other's host thread spins: docs/fidelity.md). Checks, from each rank's own
/proc/self/status, that with the option 3 ranks get one CPU each, the allowed CPUs in
turn, also under a narrower mask given to simrun (its first CPU alone), and that without
it every rank keeps simrun's mask. Nothing is timed."""
import os
import subprocess
import sys

SRC = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "replay"))
from replay_testlib import LIBDIR, SIMRUN, check, exit_status, missing  # noqa: E402

# Each rank prints its RANK and the CPUs it may run on.
SHOW = ["sh", "-c", 'echo "$RANK $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" '
        '/proc/self/status)"']


def cpus_of(mask, bind):
    """{rank: the CPUs list /proc gives it} of simrun -n 3 [--bind-cpus] run under mask
    (a set of CPUs), or None when simrun failed."""
    cmd = [SIMRUN, "-n", "3", "--simgpu-libdir", LIBDIR] + (["--bind-cpus"] if bind else [])
    p = subprocess.run(cmd + ["--"] + SHOW, capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: os.sched_setaffinity(0, mask))
    if p.returncode != 0:
        print("simrun failed (status %d): %s" % (p.returncode, p.stderr[-500:]))
        return None
    return {int(r): c for r, c in (line.split() for line in p.stdout.splitlines())}


def as_list(cpus):
    """The kernel's Cpus_allowed_list spelling of a set of CPUs (ranges a-b)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
        else:
            if run:
                out.append(run)
            run = [c]
    out.append(run)
    return ",".join(str(r[0]) if len(r) == 1 else "%d-%d" % (r[0], r[-1]) for r in out)


def main():
    if missing([SIMRUN]):
        return 77
    allowed = sorted(os.sched_getaffinity(0))
    got = cpus_of(set(allowed), True)
    want = {r: str(allowed[r % len(allowed)]) for r in range(3)}
    check(got == want, "--bind-cpus: rank r on the (r mod %d)-th allowed CPU: %s (want %s)"
          % (len(allowed), got, want))
    got = cpus_of({allowed[0]}, True)
    check(got == {r: str(allowed[0]) for r in range(3)},
          "--bind-cpus under a one-CPU mask: every rank on CPU %d: %s" % (allowed[0], got))
    got = cpus_of(set(allowed), False)
    check(got == {r: as_list(allowed) for r in range(3)},
          "without --bind-cpus every rank keeps simrun's CPUs (%s): %s" % (as_list(allowed), got))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
