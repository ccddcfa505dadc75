#!/usr/bin/env python3
"""test_chrome_estimate: dpro-export --chrome's size estimate (chrome_estimate_bytes, which
decides whether the export asks for --iterations) within 5 % of the export's size,
measured and simulated (test_chrome_estimate, the C half), and an error, never a size of
0, when one of the estimate's allocations fails.

On the real Kineto traces of ../shared/traces/kineto imported (their kernels shown
demangled and shortened, the name as traced in args.full_name: a third of the export
of v100-1rank-training; the 128-rank pair as one job), on jobs of tests/replay/gen_traces
(collectives on the device, a straggler; nanosecond times) and on a trace of two long
kernel names that differ only in their parameters (shown ' [1]' and ' [2]'). The real
traces are skipped without ../shared (a failure with CI=true)."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
from replay_testlib import BUILD, IMPORT, KINETO, check, exit_status  # noqa: E402
import test_dpro_diff as D  # noqa: E402

ESTIMATE = os.path.join(BUILD, "tests", "replay", "test_chrome_estimate")
GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for name, args in (("device-collectives", ["--ranks", "4", "--iters", "12",
                                                   "--device-collectives", "--skew", "1:25"]),
                           ("straggler", ["--ranks", "8", "--iters", "10",
                                          "--straggler", "5:1.3"])):
            d = os.path.join(tmp, name)
            subprocess.run([GEN, d] + args, check=True, stdout=subprocess.DEVNULL)
            dirs.append(d)
        dirs.append(D.imported(tmp, "alike", D.trace([("aten::x", D.LONG % "int", 300),
                                                      ("aten::y", D.LONG % "long", 300)])))
        if os.path.isdir(KINETO):
            files = sorted(f for f in os.listdir(KINETO) if f.endswith(".json.gz"))
            two = [f for f in files if f.startswith("128rank-sampled")]
            for group in [[f] for f in files if f not in two] + ([two] if two else []):
                d = os.path.join(tmp, "kineto-" + group[0].split(".")[0])
                subprocess.run([IMPORT, "kineto"] + [os.path.join(KINETO, f) for f in group]
                               + ["-o", d, "-q"], check=True)
                dirs.append(d)
        elif os.environ.get("CI") == "true":
            check(False, "%s holds the real traces (CI=true)" % KINETO)
        else:
            print("skip (part): %s is missing" % KINETO)
        for d in dirs:
            p = subprocess.run([ESTIMATE, d], capture_output=True, text=True, timeout=300)
            sys.stdout.write(p.stdout)
            check(p.returncode == 0, "%s: the estimate within 5 %% of the export%s"
                  % (os.path.basename(d), "" if p.returncode == 0 else ": " + p.stderr[-1500:]))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
