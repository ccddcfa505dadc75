"""test_replay_bad_input: inputs the importer accepts but whose numbers do not fit the
replay's arithmetic (../shared/repro: an NCCL op of 2^63-1 elements, timestamps that
leave 64 bits once shifted) end in a clear error naming the file and the event, status 1,
from every command that builds the graph: never a sanitizer report (run in the build
configured with --enable-sanitizers too), a signal or a wrong answer.

A missing ../shared/repro is a failure when CI=true, a skip elsewhere.
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
CASES = {
    "overflow-nelems.json": "elements of 4 bytes is more than a collective moves",
    "overflow-shift.json": "leave the range of a replay time",
}


def main():
    if missing((IMPORT, REPLAY, OPTIMIZE, EXPORT)):
        return SKIP
    repro = shared_path(os.path.join(SHARED, "repro"))
    tmp = tempfile.mkdtemp(prefix="dpro-replay-bad-")
    try:
        for name, why in CASES.items():
            src = shared_path(os.path.join(repro, name))
            d = os.path.join(tmp, name)
            p = subprocess.run([IMPORT, "kineto", src, "-o", d, "-q"], capture_output=True,
                               text=True, timeout=60)
            check(p.returncode == 0, "%s: imported (%s)" % (name, p.stderr[-200:]))
            for cmd in ([REPLAY, d], [REPLAY, d, "--json"], [OPTIMIZE, d, "--seed", "1"],
                        [EXPORT, d, "--chrome", os.path.join(tmp, "x.json")]):
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
                what = "%s: %s" % (name, " ".join(os.path.basename(c) for c in cmd[:1] + cmd[2:]))
                check(p.returncode == 1, "%s: status 1 (%d)" % (what, p.returncode))
                check(why in p.stderr and ".dpro: event " in p.stderr,
                      "%s: says which file, event and why (%s)" % (what, p.stderr[-300:]))
                check("runtime error" not in p.stderr and "Sanitizer" not in p.stderr,
                      "%s: no sanitizer report" % what)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
