"""Shared helpers of the tests/simgpu Python drivers (stdlib only)."""
import json
import os
import subprocess
import sys

BUILD = os.environ.get("top_builddir", os.getcwd())
SIMGPU = os.path.join(BUILD, "tests", "simgpu")
SIMRUN = os.path.join(SIMGPU, "simrun")
DDP_SIM = os.path.join(SIMGPU, "ddp-sim")
LIBDIR = os.path.join(SIMGPU, ".libs")


def skip_unless_built(*paths):
    """Exit 77 (automake SKIP) when a program was not built."""
    for p in paths:
        if not os.path.exists(p):
            print("SKIP: %s not built" % p)
            sys.exit(77)


# The consistency tests run the device's simple physics (the textbook formulas they
# check); the world physics has its own tests (test_physics, test_world.py).
CONSISTENCY = {"SIMGPU_PHYSICS": "simple"}


def simrun(n, prog_args, extra=(), env=None, timeout=25, physics=CONSISTENCY):
    """Runs `simrun -n N extra -- prog_args` under `physics` (environment: the simple
    physics unless told otherwise) and env; returns (rc, json lines, stderr)."""
    cmd = [SIMRUN, "-n", str(n), "--simgpu-libdir", LIBDIR, "--timeout", str(timeout - 3)]
    cmd += list(extra) + ["--"] + list(prog_args)
    e = dict(os.environ)
    e.update(physics)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                       timeout=timeout, universal_newlines=True)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    rows.sort(key=lambda j: j.get("rank", 0))
    return p.returncode, rows, p.stderr


def ddp(n, args, extra=(), env=None, physics=CONSISTENCY):
    """Runs ddp-sim on n ranks and returns its JSON lines (fails on error)."""
    rc, rows, err = simrun(n, [DDP_SIM] + list(args), extra=extra, env=env, physics=physics)
    if rc != 0 or len(rows) != n:
        sys.stderr.write(err)
        raise SystemExit("ddp-sim failed (rc %d, %d lines)" % (rc, len(rows)))
    return rows


def check(cond, msg):
    """Fails the test with msg when cond is false."""
    if not cond:
        print("FAIL: " + msg)
        sys.exit(1)
