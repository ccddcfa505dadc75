"""test_replay_cpuset: a host's CPUs when the launcher binds each rank to a core.

A job of 3 ranks on the simulated device, recorded under the collector with `simrun
--bind-cpus` (rank r's process on the (r mod 2)-th of 2 CPUs simrun may use, as mpirun
--bind-to core) under a mask of two of this machine's CPUs:

  - each trace's host_cpus is 1 and its host_cpu_list that one CPU, in Linux's cpulist
    spelling, the one /proc gives for the rank (ranks 0 and 2 on the first CPU, rank 1 on
    the second);
  - dpro-replay --what-if-ranks 6 --what-if-ranks-per-host 6 gives the host the union of
    the ranks' sets, 2 CPUs (what_if.host_share.host_cpus [2], hosts_cpus_from_lists 1),
    not the 1 each rank may use, and says so on its host share line;
  - the same traces without the host_cpu_list rows (an older collector): the host has the
    most host_cpus of its ranks, 1, as before, nothing said;
  - a malformed row in one trace ("0-", or one naming 3 CPUs where host_cpus says 1): said
    once with the file (cpus_note and on stderr), the host taken as 1 CPU, exit 0;
  - a job that bound itself after the collector's start (every trace's host_cpu_list the 2
    CPUs, host_cpu_list_end the first of them, as the collector writes it for a script
    that calls os.sched_setaffinity at its top): the host has the end lists' 1 CPU; a
    malformed host_cpu_list_end is said and the start's lists taken (2 CPUs).

Skipped (77) without the simulated device or with fewer than 2 CPUs to run on.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    REPLAY, DPRO_RUN, SIMRUN, DDP_SIM, LIBDIR, SKIP, check, exit_status, missing, traced_env)

RANKS = 3


def record(d, mask):
    """Records RANKS ranks bound a CPU each under mask into d; True when it worked."""
    p = subprocess.run([SIMRUN, "-n", str(RANKS), "--bind-cpus", "--", DPRO_RUN, "-o", d, "--",
                        DDP_SIM, "--preset", "resnet50", "--layers", "2", "--iterations", "30",
                        "--warmup", "2"],
                       env=traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple"),
                       capture_output=True, text=True, timeout=150,
                       preexec_fn=lambda: os.sched_setaffinity(0, mask))
    check(p.returncode == 0, "recording: status %d: %s" % (p.returncode, p.stderr[-500:]))
    return p.returncode == 0


def metas(d):
    """{rank: meta dict} of the traces in d."""
    out = {}
    for f in sorted(x for x in os.listdir(d) if x.endswith(".dpro")):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, f), uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        db.close()
        out[int(meta.get("rank", -1))] = meta
    return out


def set_list(d, rank, value):
    """Sets (value None: deletes) rank's host_cpu_list row in d."""
    for f in os.listdir(d):
        if not f.endswith(".dpro"):
            continue
        db = sqlite3.connect(os.path.join(d, f))
        if int(dict(db.execute("SELECT key, value FROM meta")).get("rank", -1)) == rank:
            if value is None:
                db.execute("DELETE FROM meta WHERE key = 'host_cpu_list'")
            else:
                db.execute("UPDATE meta SET value = ? WHERE key = 'host_cpu_list'", (value,))
            db.commit()
        db.close()


def set_meta(d, key, value):
    """Sets key's meta row to value in every trace in d."""
    for f in os.listdir(d):
        if f.endswith(".dpro"):
            db = sqlite3.connect(os.path.join(d, f))
            db.execute("DELETE FROM meta WHERE key = ?", (key,))
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))
            db.commit()
            db.close()


def host_share(d):
    """(status, what_if.host_share, text output's host share line, stderr) of the what-if
    of 2 x the ranks, all on the one host."""
    opts = ["--warmup", "2", "--what-if-ranks", str(2 * RANKS), "--what-if-ranks-per-host",
            str(2 * RANKS)]
    p = subprocess.run([REPLAY, d, "--json"] + opts, capture_output=True, text=True,
                       timeout=120)
    hs = json.loads(p.stdout)["what_if"]["host_share"] if p.returncode == 0 else {}
    t = subprocess.run([REPLAY, d] + opts, capture_output=True, text=True, timeout=120)
    line = [x for x in t.stdout.splitlines() if "host share:" in x]
    return p.returncode, hs, line[0] if line else "", p.stderr


def main():
    if missing([SIMRUN, DDP_SIM, DPRO_RUN, REPLAY]):
        return SKIP
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        print("skip: fewer than 2 CPUs to run on")
        return SKIP
    mask = set(allowed[:2])
    tmp = tempfile.mkdtemp(prefix="cpuset-")
    try:
        d = os.path.join(tmp, "bound")
        if not record(d, mask):
            return exit_status()
        m = metas(d)
        check(sorted(m) == list(range(RANKS)), "one trace a rank: %s" % sorted(m))
        for r, meta in sorted(m.items()):
            want = str(allowed[r % 2])
            print("rank %d: host_cpus %s, host_cpu_list %s" % (
                r, meta.get("host_cpus"), meta.get("host_cpu_list")))
            check(meta.get("host_cpus") == "1" and meta.get("host_cpu_list") == want,
                  "rank %d: bound to CPU %s" % (r, want))

        rc, hs, line, err = host_share(d)
        print("lists: status %d, host_cpus %s, from lists %s; %s" % (
            rc, hs.get("host_cpus"), hs.get("hosts_cpus_from_lists"), line.strip()))
        check(rc == 0 and hs.get("known") is True, "the model known: %s %s" % (hs, err[-300:]))
        check(hs.get("host_cpus") == [2] and hs.get("hosts_cpus_from_lists") == 1 and
              "cpus_note" not in hs, "the host's CPUs the union of the ranks' sets")
        check("of 2 CPUs (their ranks' CPU sets)" in line, "said on the host share line")

        old = os.path.join(tmp, "old")
        shutil.copytree(d, old)
        for r in range(RANKS):
            set_list(old, r, None)
        rc, hs, line, err = host_share(old)
        print("no lists: status %d, host_cpus %s; %s" % (rc, hs.get("host_cpus"), line.strip()))
        check(rc == 0 and hs.get("host_cpus") == [1] and hs.get("hosts_cpus_from_lists") == 0 and
              "cpus_note" not in hs and "host_cpu_list" not in err,
              "an older collector's traces: the most host_cpus, nothing said")

        for bad in ("0-", "0-2"):
            b = os.path.join(tmp, "bad")
            shutil.rmtree(b, ignore_errors=True)
            shutil.copytree(d, b)
            set_list(b, 1, bad)
            rc, hs, line, err = host_share(b)
            print("list %r: status %d, host_cpus %s, note %r" % (
                bad, rc, hs.get("host_cpus"), hs.get("cpus_note")))
            check(rc == 0 and hs.get("host_cpus") == [1] and
                  "host_cpu_list" in hs.get("cpus_note", "") and
                  err.count("host_cpu_list not used") == 1,
                  "a bad list %r: said once, the most host_cpus" % bad)

        rebound = os.path.join(tmp, "rebound")
        shutil.copytree(d, rebound)
        set_meta(rebound, "host_cpus", "2")
        set_meta(rebound, "host_cpu_list", "%d,%d" % (allowed[0], allowed[1]))
        set_meta(rebound, "host_cpu_list_end", str(allowed[0]))
        rc, hs, line, err = host_share(rebound)
        print("rebound: status %d, host_cpus %s, note %r" % (
            rc, hs.get("host_cpus"), hs.get("cpus_note")))
        check(rc == 0 and hs.get("host_cpus") == [1] and hs.get("hosts_cpus_from_lists") == 1 and
              "cpus_note" not in hs, "a job that rebound itself: the end lists' CPUs")
        set_meta(rebound, "host_cpu_list_end", "1-0")
        rc, hs, line, err = host_share(rebound)
        print("rebound, bad end list: status %d, host_cpus %s, note %r" % (
            rc, hs.get("host_cpus"), hs.get("cpus_note")))
        check(rc == 0 and hs.get("host_cpus") == [2] and
              "host_cpu_list_end not used" in hs.get("cpus_note", ""),
              "a malformed end list: said, the start's lists taken")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
