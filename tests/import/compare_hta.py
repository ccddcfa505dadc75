#!/usr/bin/env python3
"""compare_hta.py [--attempts N] [--hta-python PY] [--build DIR] [FILE...]: times dpro against
Holistic Trace Analysis (HTA) on the same Kineto traces, wall time and peak memory, and
prints every attempt and the ratios (HTA / dpro) as Markdown. Not run by make check.

  dpro: `dpro-import kineto FILE -o TMP`, then `dpro-info --kernels --launch --idle
        --memcpy --ops --queue TMP` (two processes: wall times added, peak RSS the larger);
  HTA:  one process (PY, a virtual environment with holistictraceanalysis installed, e.g.
        python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install
        holistictraceanalysis) that loads the file (TraceAnalysis) and runs the matching
        analyses: get_gpu_kernel_breakdown (--kernels), get_cuda_kernel_launch_stats
        (--launch), get_idle_time_breakdown (--idle), get_memory_bw_summary (--memcpy),
        get_aten_op_kernels_and_delay (--ops), get_queue_length_summary (--queue), no
        plots. An analysis HTA refuses on a file is reported as such (it still counts in
        the time). dpro's --sequences (kernel n-grams per stream) has no HTA counterpart
        (HTA's frequent sequences start from a named operator): left out of both.

Each command runs under /usr/bin/time -v (maximum resident set size; the wall time is
measured around it, time -v's own included, about a millisecond); each
attempt runs dpro then HTA, and every attempt is printed with the 1-minute load average
before it: no best-of-N. FILE defaults to every .json.gz of ../shared/traces/kineto."""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))

HTA_CHILD = r"""
import json, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
path, out = sys.argv[1], sys.argv[2]
t0 = time.monotonic()
ta = TraceAnalysis(trace_files={0: path}, trace_dir="/")
res = {"load_s": time.monotonic() - t0, "analyses": {}}
calls = {
    "kernels": lambda: ta.get_gpu_kernel_breakdown(visualize=False),
    "launch": lambda: ta.get_cuda_kernel_launch_stats(visualize=False),
    "idle": lambda: ta.get_idle_time_breakdown(visualize=False),
    "memcpy": lambda: ta.get_memory_bw_summary(),
    "ops": lambda: ta.get_aten_op_kernels_and_delay(),
    "queue": lambda: ta.get_queue_length_summary(),
}
for name, f in calls.items():
    try:
        f()
        res["analyses"][name] = "ok"
    except Exception as e:  # reported, not hidden
        res["analyses"][name] = "error: %s: %s" % (type(e).__name__, str(e)[:80])
json.dump(res, open(out, "w"))
"""


def timed(cmd):
    """Runs cmd under /usr/bin/time -v; returns (status, wall s, peak KiB, stderr). The wall
    time is measured here (time -v gives hundredths of a second only)."""
    t0 = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    secs = time.monotonic() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return r.returncode, secs, int(rss.group(1)), r.stderr


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_dpro(build, path, tmp):
    out = os.path.join(tmp, "dpro")
    shutil.rmtree(out, ignore_errors=True)
    s1, w1, m1, e1 = timed([os.path.join(build, "tools/dpro-import"), "-q", "kineto", path,
                            "-o", out, "--allow-empty"])
    s2, w2, m2, e2 = timed([os.path.join(build, "tools/dpro-info"), "--kernels", "--launch",
                            "--idle", "--memcpy", "--ops", "--queue", out])
    if s1 or s2:
        sys.stderr.write(e1 + e2)
    return (s1 or s2), w1 + w2, max(m1, m2)


def run_hta(py, path, tmp):
    child = os.path.join(tmp, "hta_child.py")
    with open(child, "w") as f:
        f.write(HTA_CHILD)
    res = os.path.join(tmp, "hta.json")
    st, wall, rss, err = timed([py, child, path, res])
    if st:
        sys.stderr.write(err[-2000:])
        return st, wall, rss, {}
    with open(res) as f:
        return st, wall, rss, json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--build", default=os.path.join(SRC, "_build"))
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or sorted(glob.glob(os.path.join(SRC, "../shared/traces/kineto/*.json.gz")))
    hta_version = subprocess.run(
        [a.hta_python, "-c", "import importlib.metadata as m; "
         "print(m.version('holistictraceanalysis'))"],
        capture_output=True, text=True).stdout.strip()
    print("HTA %s (%s); dpro build %s; %d CPUs; every attempt listed (dpro, then HTA)\n"
          % (hta_version, a.hta_python, a.build, os.cpu_count()))
    print("| file | attempt | load avg | dpro s | HTA s | HTA/dpro time | dpro MiB | HTA MiB "
          "| HTA/dpro memory | HTA analyses not done |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tmp = tempfile.mkdtemp(prefix="dpro-hta-")
    status = 0
    try:
        for path in files:
            for i in range(1, a.attempts + 1):
                la = loadavg()
                ds, dw, dm = run_dpro(a.build, path, tmp)
                hs, hw, hm, hres = run_hta(a.hta_python, path, tmp)
                refused = [k for k, v in hres.get("analyses", {}).items() if v != "ok"]
                if ds or hs:
                    status = 1
                print("| %s | %d | %.2f | %.3f%s | %.3f%s | %.1fx | %.1f | %.1f | %.1fx | %s |"
                      % (os.path.basename(path), i, la, dw, " (failed)" if ds else "", hw,
                         " (failed)" if hs else "", hw / dw if dw else 0, dm / 1024, hm / 1024,
                         hm / dm if dm else 0, ", ".join(refused) or "-"), flush=True)
                for k in refused:
                    print("  - %s: %s" % (k, hres["analyses"][k]), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
