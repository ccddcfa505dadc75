#!/usr/bin/env python3
"""The replay harness must be able to fail: when the collector writes no trace, the
end-to-end tests fail (exit 1), never skip (77) or pass.

1. replay_testlib.collector_records with a dpro-run that runs the job but writes nothing
   (a collector regression), and one that leaves an empty output directory: exit 1 and a
   FAIL line naming the job; with one that writes a trace: True.
2. test_replay_simgpu.py and test_replay_p2p.py themselves, against a build tree whose
   tools/dpro-run writes nothing (the real collector and programs otherwise): exit 1."""
import os
import subprocess
import sys
import tempfile
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from replay_testlib import BUILD, check, exit_status  # noqa: E402

FAKE_RUNS = {
    # dpro-run -o DIR -- JOB...: runs the job, writes no trace
    "none": 'shift 3; "$@"; exit 0\n',
    "empty-dir": 'mkdir -p "$2"; shift 3; "$@"; exit 0\n',
    "a-trace": 'mkdir -p "$2" && : > "$2/rank0-h-1.dpro"; exit 0\n',
}


def fake_dpro_run(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def probe(tmp, kind):
    """Runs collector_records with the fake dpro-run `kind` in a child: (status, stdout)."""
    run = os.path.join(tmp, "dpro-run-" + kind)
    fake_dpro_run(run, FAKE_RUNS[kind])
    code = ("import sys; sys.path.insert(0, %r); import replay_testlib as t; t.DPRO_RUN = %r; "
            "r = t.collector_records(%r, ['true'], t.traced_env()); "
            "print('returned', r); sys.exit(0 if r is True else 2)"
            % (HERE, run, os.path.join(tmp, "probe-" + kind)))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def fake_build(tmp):
    """A build tree: links to this build's collector and programs, a dpro-run that writes
    nothing."""
    root = os.path.join(tmp, "build")
    for rel in ("collector/.libs/libdpro-collector.so", "tests/simgpu/simrun",
                "tests/simgpu/ddp-sim", "tests/replay/pipe-sim", "tests/simgpu/.libs",
                "tools/dpro-replay", "tools/dpro-import"):
        dst = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        src = os.path.abspath(os.path.join(BUILD, rel))
        if os.path.exists(src):
            os.symlink(src, dst)
        else:  # not built here (no CUDA stand-ins): present is all the tests ask
            open(dst, "w").close()
    fake_dpro_run(os.path.join(root, "tools", "dpro-run"), FAKE_RUNS["none"])
    return root


def main():
    tmp = tempfile.mkdtemp(prefix="dpro-replay-testlib-")
    try:
        for kind in ("none", "empty-dir"):
            rc, out = probe(tmp, kind)
            check(rc == 1, "no trace (%s): collector_records exits 1 (got %d)" % (kind, rc))
            check("FAIL: the collector wrote no trace of true" in out,
                  "no trace (%s): a FAIL line naming the job: %r" % (kind, out[-300:]))
        rc, out = probe(tmp, "a-trace")
        check(rc == 0 and "returned True" in out,
              "a trace: collector_records returns True (%d, %r)" % (rc, out[-300:]))
        root = fake_build(tmp)
        env = dict(os.environ, top_builddir=root)
        for test in ("test_replay_simgpu.py", "test_replay_p2p.py"):
            p = subprocess.run([sys.executable, os.path.join(HERE, test)], capture_output=True,
                               text=True, timeout=120, env=env)
            check(p.returncode == 1,
                  "%s with a collector that writes nothing: exit 1 (got %d: %s)"
                  % (test, p.returncode, (p.stdout + p.stderr)[-300:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
