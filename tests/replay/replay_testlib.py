"""replay_testlib: what the end-to-end replay tests share: paths of the built programs,
a check() that records failures, and the per-rank clock-skew wrapper."""
import os

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
KINETO = os.path.join(SRC, "..", "shared", "traces", "kineto")

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
