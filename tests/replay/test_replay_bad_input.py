"""test_replay_bad_input: numbers a trace can hold but the replay cannot compute with (an
NCCL op of 2^63-1 elements, an event that ends near 2^63 ns) end in a clear error naming
the file and the event, status 1, from every command that builds the graph: never a
sanitizer report (run in the build configured with --enable-sanitizers too), a signal or a
wrong answer. The traces come from tests/replay/gen_traces --extreme.

The Kineto inputs of ../shared/repro that carried those numbers first are refused by the
importer itself (file and place named, status 1); if one ever imports, the commands must
refuse it as above. A missing ../shared/repro is a failure when CI=true, a skip elsewhere.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    BUILD, IMPORT, REPLAY, SHARED, check, exit_status, missing, shared_path, SKIP)

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
EXPORT = os.path.join(BUILD, "tools", "dpro-export")
GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
WHY = {
    "nelems": "elements of 4 bytes is more than a collective moves",
    "time": "leave the range of a replay time",
}
REPRO = {"overflow-nelems.json": "nelems", "overflow-shift.json": "time"}


def no_report(what, p):
    check("runtime error" not in p.stderr and "Sanitizer" not in p.stderr,
          "%s: no sanitizer report" % what)


def commands_refuse(d, label, why, tmp):
    """Every command that builds the graph refuses d with status 1, naming file, event, why."""
    for cmd in ([REPLAY, d], [REPLAY, d, "--json"], [OPTIMIZE, d, "--seed", "1"],
                [EXPORT, d, "--chrome", os.path.join(tmp, "x.json")]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        what = "%s: %s" % (label, " ".join(os.path.basename(c) for c in cmd[:1] + cmd[2:]))
        check(p.returncode == 1, "%s: status 1 (%d)" % (what, p.returncode))
        check(why in p.stderr and ".dpro: event " in p.stderr,
              "%s: says which file, event and why (%s)" % (what, p.stderr[-300:]))
        no_report(what, p)


def main():
    if missing((IMPORT, REPLAY, OPTIMIZE, EXPORT, GEN)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-bad-")
    try:
        for extreme, why in WHY.items():
            for skew in ("0", "5000"):
                d = os.path.join(tmp, "gen-%s%s" % (extreme, skew))
                p = subprocess.run([GEN, d, "--ranks", "2", "--extreme", "1:" + extreme,
                                    "--skew", "1:" + skew], capture_output=True, text=True,
                                   timeout=60)
                check(p.returncode == 0, "gen_traces --extreme 1:%s (%s)" % (extreme, p.stderr))
                commands_refuse(d, "%s, skew %s us" % (extreme, skew), why, tmp)
        repro = shared_path(os.path.join(SHARED, "repro"))
        for name, extreme in REPRO.items():
            src = shared_path(os.path.join(repro, name))
            d = os.path.join(tmp, name)
            p = subprocess.run([IMPORT, "kineto", src, "-o", d, "-q"], capture_output=True,
                               text=True, timeout=60)
            no_report(name + ": import", p)
            if p.returncode != 0:
                check(p.returncode == 1 and name in p.stderr and "byte " in p.stderr,
                      "%s: the importer refuses it, naming file and place (%s)"
                      % (name, p.stderr[-300:]))
            else:
                commands_refuse(d, name, WHY[extreme], tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
