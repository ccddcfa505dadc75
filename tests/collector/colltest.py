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
SHARE_JOB = os.path.join(BUILD, "tests", "collector", "share-job")
SIM_CUPTI = os.path.join(BUILD, "tests", "simgpu", ".libs", "libcupti.so.13")

failures = []

# The sanitizer runtime the collector is linked against (libasan or libtsan), found by
# skip_unless_usable(); None in a plain build.
SAN_RUNTIME = None


def _sanitizer_runtime():
    """The path of the ASan or TSan runtime among the collector's libraries, or None. The
    runtime must be the first library of a process: a program built without it (sh,
    python3, the toolkit's real-cudart) gets it preloaded ahead of the collector."""
    out = subprocess.run(["ldd", COLLECTOR], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and \
                parts[0].startswith(("libasan.so", "libtsan.so")):
            return parts[2]
    return None


def find_sanitizer_runtime():
    """Sets SAN_RUNTIME (the collector's sanitizer runtime, None in a plain build) for
    ld_preload() and sanitizer_env(), says which when there is one, and returns it. The
    collector must be built."""
    global SAN_RUNTIME
    SAN_RUNTIME = _sanitizer_runtime()
    if SAN_RUNTIME:
        print("sanitizer build: %s preloaded ahead of the collector" % SAN_RUNTIME)
    return SAN_RUNTIME


def skip_unless_usable():
    """Exits 77 (skip) when the collector or the reader is not built. In a sanitizer build
    the tests run too: the collector's runtime is preloaded first (see ld_preload())."""
    for path in (COLLECTOR, TRACE_DUMP):
        if not os.path.exists(path):
            print("skip: %s not built" % path)
            sys.exit(SKIP)
    find_sanitizer_runtime()


def fork_follow_unsupported():
    """Why this build's sanitizer cannot run a thread started in a forked child of a
    threaded process (the collector's writer thread under DPRO_FORK=follow), or None. TSan
    refuses it: "starting new threads after multi-threaded fork is not supported". ASan
    runs it (its allocator holds no lock across fork, so the collector's atfork handler
    waits for a writer thread still starting: test-awkward.py's early forks)."""
    if SAN_RUNTIME and "libtsan" in SAN_RUNTIME:
        return "TSan does not support threads started after a multi-threaded fork"
    return None


def ld_preload(*libs):
    """The LD_PRELOAD value for libs: the sanitizer runtime first when there is one."""
    return ":".join(([SAN_RUNTIME] if SAN_RUNTIME else []) + list(libs))


def sanitizer_env(env=None):
    """env (default: os.environ) made fit for a traced run in this build: LD_PRELOAD holds
    only the sanitizer runtime (so that dpro-run, which puts the collector first and keeps
    the rest, still loads it before libc) or is unset, and ASan does not insist on being
    the first library (dpro-run puts the collector ahead of it) nor report the leaks of
    programs built without it (sh, python3) at their exit. TSAN_OPTIONS are the caller's."""
    env = dict(os.environ if env is None else env)
    if SAN_RUNTIME:
        env["LD_PRELOAD"] = SAN_RUNTIME
    else:
        env.pop("LD_PRELOAD", None)
    if SAN_RUNTIME and "libasan" in SAN_RUNTIME:
        opts = [o for o in env.get("ASAN_OPTIONS", "").split(":") if o]
        opts += [o for o in ("verify_asan_link_order=0", "detect_leaks=0") if o not in opts]
        env["ASAN_OPTIONS"] = ":".join(opts)
    return env


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
    """The environment of a traced run: DPRO_OUTPUT=outdir, the collector preloaded (after
    the sanitizer runtime in a sanitizer build)."""
    env = sanitizer_env()
    env["DPRO_OUTPUT"] = outdir
    if preload:
        env["LD_PRELOAD"] = ld_preload(COLLECTOR)
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


def dump(path, counts=False):
    """Returns the JSON documents trace-dump prints for a file or directory; with counts,
    each document has "counts" ({"KIND:NAME": n}) in place of its events."""
    out = run([TRACE_DUMP] + (["--counts"] if counts else []) + [path])
    if out.returncode != 0:
        raise RuntimeError("trace-dump %s failed: %s" % (path, out.stderr))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def events(doc, kind=None, name=None):
    """Events of one trace document, filtered by kind and name."""
    return [e for e in doc["events"]
            if (kind is None or e["kind"] == kind) and (name is None or e["name"] == name)]


def share_run(mode=None, timeout=60, **extra):
    """share-job (in mode, argv[1]) under the collector: (its kernels {corr: (start, end)
    ns}, its records count, stderr, the collector's trace document) or None, a failed check
    saying why."""
    out = tmpdir()
    try:
        r = run([SHARE_JOB] + ([mode] if mode else []),
                env=env_with(out, DPRO_CUPTI_LIB=SIM_CUPTI, **extra), timeout=timeout)
    except subprocess.TimeoutExpired:
        check(False, "share-job %s %s: still running after %d s (deadlock?)"
              % (mode, extra, timeout))
        return None
    files = traces(out)
    ran = r.returncode == 0 and len(files) == 1
    check(ran, "share-job %s %s: rc %d, %d traces: %s"
          % (mode, extra, r.returncode, len(files), r.stderr[-2000:]))
    if not ran:
        return None
    got = {}
    records = -1
    for line in r.stdout.splitlines():
        w = line.split()
        if w[0] == "kernel":
            got[int(w[1])] = (int(w[2]), int(w[3]))
        elif w[0].startswith("records="):
            records = int(w[0][len("records="):])
    return got, records, r.stderr, dump(files[0])[0]


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
