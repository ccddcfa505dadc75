"""colltest: helpers shared by the collector's test drivers (tests/collector/test-*.py).

Paths come from the top_builddir / top_srcdir variables `make check` exports. Traces are
read back through trace-dump (libdprotrace's reader), one JSON document per file.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

BUILD = os.environ.get("top_builddir", ".")
SRC = os.environ.get("top_srcdir", ".")
# COLLTEST_COLLECTOR: another build of the collector (to show a test failing before a fix).
COLLECTOR = os.environ.get("COLLTEST_COLLECTOR") or os.path.join(BUILD, "collector", ".libs",
                                                                  "libdpro-collector.so")
TRACE_DUMP = os.path.join(BUILD, "tests", "collector", "trace-dump")
COLL_JOB = os.path.join(BUILD, "tests", "collector", "coll-job")
REAL_CUDART = os.path.join(BUILD, "tests", "collector", "real-cudart")
DPRO_RUN = os.path.join(BUILD, "tools", "dpro-run")
SIMRUN = os.path.join(BUILD, "tests", "simgpu", "simrun")
DDP_SIM = os.path.join(BUILD, "tests", "simgpu", "ddp-sim")
DRV_JOB = os.path.join(BUILD, "tests", "collector", "drv-job")
SIM_CUPTI = os.path.join(BUILD, "tests", "simgpu", ".libs", "libcupti.so.13")

failures = []


def skip_unless_usable():
    """Exits 77 (skip) when the collector or the reader is not built, or the build uses
    sanitizers (an ASan collector cannot be preloaded into programs built without it)."""
    for path in (COLLECTOR, TRACE_DUMP):
        if not os.path.exists(path):
            print("skip: %s not built" % path)
            sys.exit(SKIP)
    out = subprocess.run([TRACE_DUMP, "--sanitized"], capture_output=True, text=True)
    if out.stdout.strip() == "1":
        print("skip: sanitizer build; the collector is not preloadable there")
        sys.exit(SKIP)


_tmpdirs = []


def tmpdir():
    """A fresh directory, removed when the test ends."""
    d = tempfile.mkdtemp(prefix="dpro-colltest-")
    _tmpdirs.append(d)
    return d


@atexit.register
def _cleanup():
    for d in _tmpdirs:
        shutil.rmtree(d, ignore_errors=True)


def env_with(outdir, preload=True, **extra):
    """The environment of a traced run: DPRO_OUTPUT=outdir, the collector preloaded."""
    env = dict(os.environ)
    env["DPRO_OUTPUT"] = outdir
    if preload:
        env["LD_PRELOAD"] = COLLECTOR
    for k, v in extra.items():
        env[k] = str(v)
    return env


def run(cmd, env=None, timeout=60, **kw):
    """Runs cmd; returns the CompletedProcess (text output)."""
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def traces(outdir):
    """Returns the trace files of outdir, sorted."""
    if not os.path.isdir(outdir):
        return []
    return sorted(os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".dpro"))


def dump(path):
    """Returns the JSON documents trace-dump prints for a file or directory."""
    out = run([TRACE_DUMP, path])
    if out.returncode != 0:
        raise RuntimeError("trace-dump %s failed: %s" % (path, out.stderr))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def events(doc, kind=None, name=None):
    """Events of one trace document, filtered by kind and name."""
    return [e for e in doc["events"]
            if (kind is None or e["kind"] == kind) and (name is None or e["name"] == name)]


def check(cond, what):
    """Records a failed check (the test goes on, and fails at the end)."""
    if cond:
        print("ok: " + what)
    else:
        print("FAIL: " + what)
        failures.append(what)


def finish():
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    sys.exit(0)
