#!/usr/bin/env python3
"""dpro-info and the replaying commands (dpro-replay, dpro-export, dpro-optimize) on the
rules they share, on a synthetic 4-rank job written with gen_traces:

1. --chrome FILE never writes over an input trace (nor its SQLite side files, nor a hard
   link to it), even with --force; never follows a symbolic link at FILE; refuses an
   existing file without --force and writes it with --force; creates a new file with mode
   0644 at most (umask 0).
2. dpro-export --iterations past the last iteration is an error naming the iteration
   count; the last iteration itself exports.
3. A trace file that cannot be read makes all four commands exit 1; with --partial they go
   on with the others, exit 0 and name the skipped file; --help states the rule.
4. A trace that ends early (no `complete` mark: its process never closed it) is named with
   a warning by all four commands, which still read what it holds (exit 0).
"""
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

B = os.environ.get("top_builddir", ".")
GEN = os.path.join(B, "tests", "replay", "gen_traces")
TOOLS = {n: os.path.join(B, "tools", n) for n in ("dpro-info", "dpro-replay", "dpro-export",
                                                   "dpro-optimize")}
EXTRA = {"dpro-optimize": ["-q", "--max-evals", "3", "--budget-s", "30"]}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def chrome_run(cmd, d, out, *more):
    args = [TOOLS[cmd], d, "--chrome", out] + EXTRA.get(cmd, []) + list(more)
    return run(args)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_outputs(tmp, d):
    rank0 = os.path.join(d, "rank0.dpro")
    for cmd in ("dpro-export", "dpro-replay", "dpro-optimize"):
        before = {f: digest(os.path.join(d, f)) for f in os.listdir(d)}
        # an input trace, its side file, a hard link to it: refused even with --force
        side = rank0 + "-wal"
        if not os.path.exists(side):
            open(side, "wb").close()
            before["rank0.dpro-wal"] = digest(side)
        hard = os.path.join(tmp, "hard-%s.json" % cmd)
        os.link(rank0, hard)
        for target in (rank0, side, hard):
            for force in ([], ["--force"]):
                rc, _, err = chrome_run(cmd, d, target, *force)
                check(rc == 1 and "input" in err,
                      "%s --chrome %s %s: rc %d, %s" % (cmd, target, force, rc, err.strip()))
        after = {f: digest(os.path.join(d, f)) for f in before}
        check(after == before, "%s: the input traces are unchanged" % cmd)
        # a symbolic link at FILE is not followed, even with --force
        victim = os.path.join(tmp, "victim-%s" % cmd)
        with open(victim, "w") as f:
            f.write("keep")
        link = os.path.join(tmp, "link-%s.json" % cmd)
        os.symlink(victim, link)
        for force in ([], ["--force"]):
            rc, _, err = chrome_run(cmd, d, link, *force)
            check(rc == 1 and "symbolic link" in err,
                  "%s --chrome symlink %s: rc %d, %s" % (cmd, force, rc, err.strip()))
        with open(victim) as f:
            check(f.read() == "keep", "%s: the symlink's target is unchanged" % cmd)
        # an existing file: refused, then written with --force
        rc, _, err = chrome_run(cmd, d, victim)
        check(rc == 1 and "--force" in err, "%s: existing file: rc %d, %s" % (cmd, rc, err.strip()))
        with open(victim) as f:
            check(f.read() == "keep", "%s: the existing file is unchanged" % cmd)
        rc, _, err = chrome_run(cmd, d, victim, "--force")
        check(rc == 0, "%s --force over an existing file: rc %d, %s" % (cmd, rc, err.strip()))
        try:
            with open(victim) as f:
                check("traceEvents" in json.load(f), "%s --force: a Chrome trace" % cmd)
        except ValueError as e:
            check(False, "%s --force: not JSON: %s" % (cmd, e))
        # a new file: mode 0644 at most, whatever the umask
        new = os.path.join(tmp, "new-%s.json" % cmd)
        old_mask = os.umask(0)
        try:
            rc, _, err = chrome_run(cmd, d, new)
        finally:
            os.umask(old_mask)
        check(rc == 0 and os.path.exists(new), "%s: new file: rc %d, %s" % (cmd, rc, err.strip()))
        if os.path.exists(new):
            mode = os.stat(new).st_mode & 0o777
            check(mode & ~0o644 == 0, "%s: new file mode %o" % (cmd, mode))


def test_window(d):
    rc, _, err = run([TOOLS["dpro-export"], d, "-i", "99", "--chrome", "-"])
    m = re.search(r"hold (\d+) iteration", err)
    check(rc == 1 and m is not None, "export -i 99: rc %d, %s" % (rc, err.strip()))
    if not m:
        return
    n = int(m.group(1))
    rc, out, err = run([TOOLS["dpro-export"], d, "-i", str(n - 1), "--chrome", "-"])
    its = set()
    if rc == 0:
        its = {e["name"] for e in json.loads(out)["traceEvents"] if e.get("cat") == "iteration"}
    check(rc == 0 and its == {"iteration %d" % (n - 1)},
          "export -i %d (the last): rc %d, %s %s" % (n - 1, rc, sorted(its), err.strip()))
    for window in (str(n), "%d-%d" % (n - 2, n)):
        rc, _, err = run([TOOLS["dpro-export"], d, "-i", window, "--chrome", "-"])
        check(rc == 1 and "%d iteration" % n in err,
              "export -i %s (past the last): rc %d, %s" % (window, rc, err.strip()))


def test_partial(tmp, d):
    bad = os.path.join(tmp, "with-junk")
    shutil.copytree(d, bad)
    junk = os.path.join(bad, "rank4.dpro")
    with open(junk, "w") as f:
        f.write("not a trace")
    for cmd, path in TOOLS.items():
        args = [path, bad] + EXTRA.get(cmd, [])
        if cmd == "dpro-export":
            args += ["--chrome", "-"]
        rc, _, err = run(args)
        check(rc == 1 and "rank4.dpro" in err and "--partial" in err,
              "%s with an unreadable rank file: rc %d, %s" % (cmd, rc, err.strip()))
        rc, out, err = run(args + ["--partial"])
        check(rc == 0 and "rank4.dpro" in err and out,
              "%s --partial: rc %d, %s" % (cmd, rc, err.strip()))
        rc, out, _ = run([path, "--help"])
        check(rc == 0 and "--partial" in out and "Exit status" in out,
              "%s --help states the rule" % cmd)


def test_ended_early(d):
    db = sqlite3.connect(os.path.join(d, "rank2.dpro"))
    db.execute("DELETE FROM meta WHERE key = 'complete'")
    db.commit()
    db.close()
    for cmd, path in TOOLS.items():
        args = [path, d] + EXTRA.get(cmd, [])
        if cmd == "dpro-export":
            args += ["--chrome", "-"]
        rc, out, err = run(args)
        check(rc == 0 and out and "rank2.dpro: the trace ends early" in err,
              "%s on a trace that ends early: rc %d, %s" % (cmd, rc, err.strip()[-300:]))


def main():
    if not os.path.exists(GEN):
        print("no %s (make check builds it)" % GEN)
        return 1
    tmp = tempfile.mkdtemp(prefix="dpro-commands-test-")
    try:
        # a job per part, so that one part's failure does not spoil the next one's input
        jobs = [os.path.join(tmp, "job%d" % i) for i in range(4)]
        for d in jobs:
            rc, _, err = run([GEN, d])
            if rc != 0:
                print("gen_traces failed:", err)
                return 1
        test_outputs(tmp, jobs[0])
        test_window(jobs[1])
        test_partial(tmp, jobs[2])
        test_ended_early(jobs[3])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("test_dpro_info_commands: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
