"""test_replay_nohost: --what-if-network on a job whose traces record no host
(tests/replay/gen_traces --no-host, 2 ranks, --what-if-ranks 4): the flag is unused and
the warning says that no trace records its host (not that the ranks stay on one node);
on the same job with its host recorded (one host) it says they stay on one node when
they do (--what-if-ranks-per-host 4)."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, check, exit_status, missing, SKIP  # noqa: E402

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")
UNUSED = "--what-if-network unused: "


def unused_why(d, *extra):
    """What dpro-replay D --what-if-ranks 4 --what-if-network 25 says after UNUSED."""
    p = subprocess.run([REPLAY, d, "--what-if-ranks", "4", "--what-if-network", "25"] +
                       list(extra), capture_output=True, text=True, timeout=120)
    said = [ln.split(UNUSED, 1)[1] for ln in p.stderr.splitlines() if UNUSED in ln]
    check(p.returncode == 0, "%s: status 0 (%d, %r)" % (d, p.returncode, p.stderr[-300:]))
    return said[0] if said else None


def main():
    if missing((REPLAY, GEN)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-nohost-")
    try:
        for name, extra in (("nohost", ["--no-host"]), ("onehost", [])):
            p = subprocess.run([GEN, os.path.join(tmp, name), "--ranks", "2"] + extra,
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0, "gen_traces %s (%s)" % (name, p.stderr[-300:]))
        why = unused_why(os.path.join(tmp, "nohost"))
        check(why == "no trace records its host, so the nodes are not known",
              "no host recorded: said so (%r)" % why)
        why = unused_why(os.path.join(tmp, "onehost"), "--what-if-ranks-per-host", "4")
        check(why == "the ranks stay on one node", "one host, 4 ranks on it: one node (%r)" % why)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
