#!/usr/bin/env python3
"""test_replay_open_files: a job of more ranks than the process may open files replays.

A loaded rank keeps its trace's meta, strings and tables in a detached reader
(dpro_reader_detach) and holds no open file: a trace is open only while a pass reads it,
at most --jobs at a time. Here tests/replay/bench_scale's generator writes 150 ranks (600
events, 6 iterations each) and dpro-replay runs with its open files limited to 64
(RLIMIT_NOFILE, as `ulimit -n 64`): folded (the default: the first pass, then waves
folded while read), --no-fold (one pass) and with a window (-n 2: two passes). Each must
exit 0 and print the JSON it prints without the limit, byte for byte, covering the 150
ranks. A reader that kept each trace open failed here with "Too many open files".
"""
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, check, exit_status  # noqa: E402

BENCH = os.path.join(BUILD, "tests", "replay", "bench_scale")
RANKS, LIMIT = 150, 64


def few_files():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))


def replay(d, extra, limited):
    return subprocess.run([REPLAY, d, "--json", "--jobs", "2"] + extra, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=300, stdin=subprocess.DEVNULL,
                          preexec_fn=few_files if limited else None)


def main():
    with tempfile.TemporaryDirectory(prefix="dpro-files-") as tmp:
        d = os.path.join(tmp, "job")
        subprocess.run([BENCH, "gen", d, str(RANKS), "600", "6"], check=True,
                       stdout=subprocess.DEVNULL)
        check(len(os.listdir(d)) > LIMIT, "%d trace files, more than the limit of %d" %
              (len(os.listdir(d)), LIMIT))
        for extra in ([], ["--no-fold"], ["-n", "2"]):
            free = replay(d, extra, False)
            few = replay(d, extra, True)
            label = " ".join(["dpro-replay"] + extra)
            check(free.returncode == 0, "%s exits 0 without a limit" % label)
            check(few.returncode == 0, "%s exits 0 with %d open files for %d ranks (%s)" %
                  (label, LIMIT, RANKS, few.stderr.decode(errors="replace")[-300:]))
            check(few.stdout == free.stdout and b'"ranks":%d' % RANKS in
                  free.stdout.replace(b" ", b""),
                  "%s: the JSON is the one without a limit, byte for byte, over %d ranks" %
                  (label, RANKS))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
