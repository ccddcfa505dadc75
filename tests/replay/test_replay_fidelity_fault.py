"""test_replay_fidelity_fault: what dpro-replay runs and keeps when the typical replay's
parts fail (DPRO_TEST_FIDELITY_FAIL=typical|drawn|perturb makes that part fail as out of
memory would) on a generated 2-rank job (tests/replay/gen_traces):
- -q without --json prints neither the typical replay nor the perturbation check, so it
  does not run them: a failing one leaves -q's one line and status 0, where --json (which
  prints them) fails with "out of memory";
- a failing drawn replay leaves the medians' and the means' figures as they are without
  the fault, the drawn figures 0 and drawn_absent saying why (--json), "drawn replay:
  none (...)" in the text report."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import BUILD, REPLAY, check, exit_status, missing, SKIP  # noqa: E402

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")


def run(fault, *args):
    env = dict(os.environ)
    env.pop("DPRO_TEST_FIDELITY_FAIL", None)
    if fault:
        env["DPRO_TEST_FIDELITY_FAIL"] = fault
    return subprocess.run([REPLAY] + list(args), capture_output=True, text=True, timeout=120,
                          env=env)


def quiet_skips(d, base_us):
    """-q runs none of the parts it does not print; --json -q runs them."""
    for fault, extra in (("typical", ()), ("perturb", ("--perturb", "2"))):
        q = run(fault, d, "-q", *extra)
        check(q.returncode == 0 and
              q.stdout == "simulated iteration %.1f us\n" % base_us and q.stderr == "",
              "-q %s with the %s replay failing: not run, the one line (%d, %r, %r)"
              % (" ".join(extra), fault, q.returncode, q.stdout[:200], q.stderr[:200]))
        j = run(fault, d, "-q", "--json", *extra)
        check(j.returncode == 1 and "out of memory" in j.stderr and j.stdout == "",
              "-q --json %s with the %s replay failing: run, the failure said (%d, %r)"
              % (" ".join(extra), fault, j.returncode, j.stderr[:200]))


def drawn_fails(d, base):
    """A failing drawn replay keeps the medians' figures."""
    p = run("drawn", d, "--json")
    check(p.returncode == 0, "--json with the drawn replay failing: status 0 (%d, %r)"
          % (p.returncode, p.stderr[:200]))
    if p.returncode != 0:
        return
    t = json.loads(p.stdout).get("typical_replay", {})
    b = base["typical_replay"]
    kept = ("iterations", "operations", "measured_iter_us", "predicted_iter_us", "error_pct",
            "mean_predicted_iter_us", "mean_error_pct")
    check(all(t.get(k) == b[k] for k in kept) and b["predicted_iter_us"] > 0,
          "the medians' and means' figures kept (%r, without the fault %r)"
          % ({k: t.get(k) for k in kept}, {k: b[k] for k in kept}))
    drawn = ("drawn_samples", "drawn_predicted_iter_us", "drawn_min_iter_us",
             "drawn_max_iter_us")
    check(all(t.get(k) == 0 for k in drawn) and t.get("drawn_absent") == "out of memory",
          "the drawn figures 0, drawn_absent 'out of memory' (%r)"
          % {k: t.get(k) for k in drawn + ("drawn_absent",)})
    check(b["drawn_samples"] == 8 and "drawn_absent" not in b,
          "without the fault: 8 drawn samples, no drawn_absent (%r)" % b["drawn_samples"])
    txt = run("drawn", d)
    check(txt.returncode == 0 and "drawn replay: none (out of memory)\n" in txt.stdout and
          "typical-duration replay (each operation's median" in txt.stdout,
          "the text report: the typical replay, the drawn one none (%d, %r)"
          % (txt.returncode, txt.stderr[:200]))


def main():
    if missing((REPLAY, GEN)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-replay-fault-")
    try:
        d = os.path.join(tmp, "gen")
        p = subprocess.run([GEN, d, "--ranks", "2"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "gen_traces --ranks 2 (%s)" % p.stderr[-300:])
        js = run(None, d, "--json")
        check(js.returncode == 0, "--json without a fault (%r)" % js.stderr[:200])
        base = json.loads(js.stdout)
        check(base["typical_replay"]["iterations"] > 1,
              "more than one compared iteration (%d)" % base["typical_replay"]["iterations"])
        quiet_skips(d, base["simulated_iter_us"])
        drawn_fails(d, base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
