"""replay_testlib: what the end-to-end replay tests share: paths of the built programs,
a check() that records failures, the per-rank clock-skew wrapper, and the environment of a
job recorded under the collector (the sanitizer builds' runtime preloaded first, as the
collector's own tests do: tests/collector/colltest.py)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "collector"))
import colltest  # noqa: E402

SKIP = 77
BUILD = os.environ.get("top_builddir", ".")
SRC = os.environ.get("top_srcdir", ".")
COLLECTOR = os.path.join(BUILD, "collector", ".libs", "libdpro-collector.so")
DPRO_RUN = os.path.join(BUILD, "tools", "dpro-run")
SIMRUN = os.path.join(BUILD, "tests", "simgpu", "simrun")
DDP_SIM = os.path.join(BUILD, "tests", "simgpu", "ddp-sim")
LIBDIR = os.path.join(BUILD, "tests", "simgpu", ".libs")
REPLAY = os.path.join(BUILD, "tools", "dpro-replay")
IMPORT = os.path.join(BUILD, "tools", "dpro-import")
SHARED = os.path.join(SRC, "..", "shared")
KINETO = os.path.join(SHARED, "traces", "kineto")

failures = []


def check(cond, what):
    """Prints ok/FAIL for what; a failure is remembered in failures."""
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def skew_wrapper(skews):
    """A command prefix that runs the rest with DPRO_TEST_CLOCK_OFFSET_NS=skews[RANK]."""
    cases = " ".join("%d) o=%d;;" % (r, v) for r, v in enumerate(skews))
    return ["sh", "-c", 'case "$RANK" in %s *) o=0;; esac; DPRO_TEST_CLOCK_OFFSET_NS=$o '
            'exec "$0" "$@"' % cases]


def missing(paths):
    """The first of paths that is not built (printed as a skip reason), or None."""
    for path in paths:
        if not os.path.exists(path):
            print("skip: %s not built" % path)
            return path
    return None


def sanitizer_build():
    """True in a sanitizer build (--enable-sanitizers or --enable-tsan: make check sets
    DPRO_SANITIZERS=1 there). Only the timed tests skip there."""
    return os.environ.get("DPRO_SANITIZERS") == "1"


_runtime_found = False


def traced_env(env=None, **extra):
    """env (default: os.environ) made fit for a job run under dpro-run in this build, with
    extra's variables set: in a sanitizer build the collector's runtime (libasan, libtsan)
    preloaded, so that it loads first into the programs built without it (the skew
    wrapper's sh, python3), and ASan told not to insist on being first
    (colltest.sanitizer_env); in a plain build LD_PRELOAD unset."""
    global _runtime_found
    if not _runtime_found and os.path.exists(COLLECTOR):
        colltest.find_sanitizer_runtime()
        _runtime_found = True
    env = colltest.sanitizer_env(env)
    for k, v in extra.items():
        env[k] = str(v)
    return env


def collector_records(probe_dir, job, env):
    """Runs job (a command list) under dpro-run into probe_dir, env being traced_env()'s,
    and returns True when the collector wrote a trace. No trace is a collector regression
    in every build, the sanitizer builds included: the test fails here (exit 1)."""
    p = subprocess.run([DPRO_RUN, "-o", probe_dir, "--"] + job, capture_output=True,
                       timeout=120, env=env, text=True)
    if os.path.isdir(probe_dir) and any(f.endswith(".dpro") for f in os.listdir(probe_dir)):
        return True
    print("FAIL: the collector wrote no trace of %s (status %d): %s" %
          (" ".join(job), p.returncode, p.stderr[-500:]))
    sys.exit(1)


def shared_path(path, whole=True):
    """path (under ../shared) when it exists. A missing one fails the test when CI=true
    (CI provides ../shared: its absence is a broken checkout, exit 1 here); elsewhere it
    skips the test (whole: exit 77 here) or the part that needs it (None)."""
    if os.path.exists(path):
        return path
    if os.environ.get("CI") == "true":
        print("FAIL: %s is missing (CI=true: ../shared must be there)" % path)
        sys.exit(1)
    print("skip: %s is missing" % path)
    if whole:
        sys.exit(SKIP)
    return None


def exit_status():
    """0 when every check passed, else 1 (after saying how many failed)."""
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0
