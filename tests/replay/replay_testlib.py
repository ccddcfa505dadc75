"""replay_testlib: what the end-to-end replay tests share: paths of the built programs,
a check() that records failures, and the per-rank clock-skew wrapper."""
import os
import subprocess
import sys

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
    """True in the build configured with --enable-sanitizers (make check sets
    DPRO_SANITIZERS=1 there)."""
    return os.environ.get("DPRO_SANITIZERS") == "1"


def collector_records(probe_dir, job, env):
    """Runs job (a command list) under dpro-run into probe_dir and tells whether the
    collector wrote a trace. It cannot be preloaded in the sanitizer build, the one stated
    reason for no trace (False, a skip); anywhere else no trace is a collector regression:
    the test fails here (exit 1)."""
    p = subprocess.run([DPRO_RUN, "-o", probe_dir, "--"] + job, capture_output=True,
                       timeout=60, env=env, text=True)
    if os.path.isdir(probe_dir) and any(f.endswith(".dpro") for f in os.listdir(probe_dir)):
        return True
    if sanitizer_build():
        print("skip: the collector cannot be preloaded in the sanitizer build")
        return False
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
