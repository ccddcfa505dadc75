"""test_replay_quiet: dpro-replay -q prints only the final figure (the simulated iteration,
or the what-if's), no warnings, on a job that warns (world_size 3, rank 2's trace missing:
tests/replay/gen_traces); the figure is the one --json gives; --json -q is the JSON alone;
an error is still printed, status 1."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, check, exit_status, missing, SKIP  # noqa: E402

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")


def run(*args):
    return subprocess.run([REPLAY] + list(args), capture_output=True, text=True, timeout=120)


def one_figure(p, label, want_us):
    """p printed one line, LABEL iteration X us, X within 0.05 us of want_us, nothing on
    stderr, status 0."""
    lines = p.stdout.splitlines()
    m = re.fullmatch(r"%s iteration ([0-9.]+) us" % label, lines[0]) if len(lines) == 1 else None
    check(p.returncode == 0 and m is not None,
          "-q (%s): one line '%s iteration X us' (%d, %r)" % (label, label, p.returncode,
                                                             p.stdout[:300]))
    check(m is not None and abs(float(m.group(1)) - want_us) < 0.05,
          "-q (%s): the figure is --json's %.2f us (%s)" % (label, want_us, m and m.group(1)))
    check(p.stderr == "", "-q (%s): nothing on stderr (%r)" % (label, p.stderr[:300]))


def main():
    if missing((REPLAY, GEN)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-quiet-")
    try:
        d = os.path.join(tmp, "gen")
        p = subprocess.run([GEN, d, "--ranks", "3"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "gen_traces --ranks 3 (%s)" % p.stderr[-300:])
        os.remove(os.path.join(d, "rank2.dpro"))
        loud = run(d)
        check(loud.returncode == 0 and "warning: world_size is 3" in loud.stderr and
              len(loud.stdout.splitlines()) > 5,
              "without -q: the report and the missing rank's warning (%d, %r)"
              % (loud.returncode, loud.stderr[:300]))
        js = run(d, "--json")
        base = json.loads(js.stdout)["simulated_iter_us"]
        one_figure(run(d, "-q"), "simulated", base)
        one_figure(run(d, "--quiet", "-p", "--perturb", "2"), "simulated", base)
        wjs = run(d, "--json", "--what-if-scale-kernels", "0.5")
        pred = json.loads(wjs.stdout)["what_if"]["predicted_iter_us"]
        check(pred < base, "the what-if is faster (%.2f < %.2f us)" % (pred, base))
        one_figure(run(d, "-q", "--what-if-scale-kernels", "0.5"), "what-if", pred)
        q = run(d, "--json", "-q")
        check(q.returncode == 0 and q.stdout == js.stdout and q.stderr == "",
              "--json -q: the same JSON, nothing on stderr (%r)" % q.stderr[:300])
        bad = run(os.path.join(tmp, "none"), "-q")
        check(bad.returncode == 1 and "error" in bad.stderr and bad.stdout == "",
              "-q on a missing directory: status 1, the error said (%d, %r)"
              % (bad.returncode, bad.stderr[:300]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
