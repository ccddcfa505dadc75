#!/usr/bin/env python3
"""test_torch_profiler.py: one torch DDP run (tests/torch/traced_train.py, 2 ranks)
traced at once by the collector (dpro-run) and by torch.profiler (Kineto), the latter's
trace imported with dpro-import, compared launch by launch through CUPTI's correlation ids.

CUPTI has one activity client: the collector registers first (at load), Kineto registers
its buffers at the profiler's start and from then on CUPTI's device records go to Kineto,
while the collector keeps its callback subscription, so its host-side record of every
launch keeps the correlation id CUPTI gives the device records.  So, per rank:
0. The collector says once that CUPTI was taken, its trace says cupti=taken and when
   (cupti_taken_ns), and it holds no device record from after that.
1. torch.profiler records GPU activity although the script does not sleep before the
   profiler stops (the simulated CUPTI holds a client buffer, as real CUPTI does, so
   Kineto's flush at stop delivers): more than 100 kernels.
2. Every kernel of the Kineto trace has the collector's launch with the same correlation
   id and the same kernel name; every launch the collector saw between the first and the
   last of those, and every launch inside its NVTX ranges of the steps (all profiled),
   has its kernel in the Kineto trace: the kernel counts are equal.
3. The same iterations: one record_function("dpro_forward") per step in the Kineto
   trace, one NVTX range dpro_step_<i> per step in the collector's.
4. Per-kernel durations: in one run only Kineto has the device records of the profiled
   window (the collector's stop when Kineto takes the buffers), so the same job runs once
   more under the collector alone, and per kernel (by name, demangled) the median
   duration in Kineto's trace is within 1 % of the collector's. The simple physics has no
   noise (a kernel's time is a function of its work), so two runs give the same times,
   but for NCCL's kernels, whose time holds the wait for the other rank; this checks both
   tools' timestamps, Kineto's TSC timestamp callback among them.

Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (BUILD, DPRO_RUN as dpro_run, SIMRUN as simrun,  # noqa: E402
                      TRACE_DUMP as trace_dump, VENV_PY as venv_py, require_torch,
                      sanitizer_env)

dpro_import = os.path.join(BUILD, "tools", "dpro-import")
require_torch(simrun, dpro_run, dpro_import, trace_dump)
TRAIN = os.path.join(HERE, "traced_train.py")
STEPS = 4
LAUNCHES = ("cudaLaunchKernel", "__cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
            "cuLaunchKernelEx")

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + msg)
    return cond


def dump(path):
    """trace-dump's documents of the traces under path, by rank."""
    d = subprocess.run([trace_dump, path], capture_output=True, text=True, timeout=120)
    check(d.returncode == 0, "trace-dump %s: %s" % (path, d.stderr))
    docs = {}
    for line in d.stdout.splitlines():
        doc = json.loads(line)
        docs[int(doc["meta"]["rank"])] = doc
    return docs


def demangle(names):
    """names as Kineto writes them: demangled (c++filt), the collector keeps the symbol."""
    r = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                       text=True, timeout=60)
    out = r.stdout.splitlines()
    return out if r.returncode == 0 and len(out) == len(names) else names


def compare(rank, coll, kin):
    ce, ke = coll["events"], kin["events"]
    meta = coll["meta"]
    taken = int(meta.get("cupti_taken_ns", 0))
    check(meta.get("cupti") == "taken" and taken > 0,
          "rank %d: the collector's trace says CUPTI was taken: %s"
          % (rank, {k: v for k, v in meta.items() if k.startswith("cupti")}))
    late = [e for e in ce if e["kind"] in ("kernel", "memcpy", "memset") and e["t0"] > taken]
    check(not late, "rank %d: the collector has %d device records after CUPTI was taken"
          % (rank, len(late)))
    kernels = [e for e in ke if e["kind"] == "kernel"]
    check(len(kernels) > 100, "rank %d: torch.profiler recorded %d kernels (GPU activity "
          "without sleeping before the stop)" % (rank, len(kernels)))
    if not kernels:
        return
    host = {e["corr"]: e for e in ce if e["kind"] in ("api", "collective") and e["corr"]}
    unmatched = [k for k in kernels if k["corr"] not in host]
    check(not unmatched, "rank %d: %d of %d Kineto kernels without the collector's launch "
          "(first: %s)" % (rank, len(unmatched), len(kernels), unmatched[:1]))
    launched = [(k, host[k["corr"]]) for k in kernels if k["corr"] in host]
    named = [(k["name"], h["name2"]) for k, h in launched if h["kind"] == "api"]
    plain = demangle([n for _, n in named])
    renamed = [(kn, cn) for (kn, _), cn in zip(named, plain) if kn != cn]
    check(not renamed, "rank %d: %d kernels named otherwise by the collector: %s"
          % (rank, len(renamed), renamed[:3]))
    lo, hi = min(k["corr"] for k in kernels), max(k["corr"] for k in kernels)
    print("rank %d: Kineto's kernels: correlation ids %d to %d" % (rank, lo, hi))
    seen = {k["corr"] for k in kernels}
    coll_launches = [e for e in ce if e["kind"] == "api" and e["name"] in LAUNCHES and
                     lo <= e["corr"] <= hi]
    missing = [e for e in coll_launches if e["corr"] not in seen]
    check(not missing, "rank %d: %d of the collector's %d launches in the profiled window have "
          "no Kineto kernel (first: %s)" % (rank, len(missing), len(coll_launches), missing[:1]))
    steps = [(e["t0"], e["t1"]) for e in ce
             if e["kind"] == "marker" and e["name"].startswith("dpro_step_")]
    in_steps = [e for e in ce if e["kind"] == "api" and e["name"] in LAUNCHES and
                any(t0 <= e["t0"] <= t1 for t0, t1 in steps)]
    lost = [e for e in in_steps if e["corr"] not in seen]
    check(in_steps and not lost, "rank %d: %d of the collector's %d launches inside the steps "
          "(all profiled) have no Kineto kernel (last: %s)"
          % (rank, len(lost), len(in_steps), [(e["corr"], e["name2"][:40]) for e in lost]))
    n_launch_kernels = sum(1 for k, h in launched if h["name"] in LAUNCHES)
    check(n_launch_kernels == len(coll_launches),
          "rank %d: kernel counts: Kineto %d, collector launches %d"
          % (rank, n_launch_kernels, len(coll_launches)))

    # the same iterations: as many in both
    kfwd = sum(1 for e in ke if e["kind"] == "marker" and e["name"] == "dpro_forward")
    csteps = sum(1 for e in ce if e["kind"] == "marker" and e["name"].startswith("dpro_step_"))
    check(kfwd == STEPS and csteps == STEPS, "rank %d: %d forwards in Kineto, %d steps in the "
          "collector's NVTX, %d run" % (rank, kfwd, csteps, STEPS))
    print("rank %d: %d Kineto kernels, all with the collector's launch (%d runtime/driver "
          "launches in the window, %d collectives' kernels)"
          % (rank, len(kernels), len(coll_launches), len(launched) - n_launch_kernels))


def median_durations(events, rename=None):
    """Median kernel duration (ns) by kernel name."""
    by = collections.defaultdict(list)
    for e in events:
        if e["kind"] == "kernel":
            by[e["name"]].append(e["t1"] - e["t0"])
    if rename:
        names = list(by)
        by = dict(zip(rename(names), (by[n] for n in names)))
    return {n: statistics.median(v) for n, v in by.items()}


def compare_durations(rank, coll, kin):
    c = median_durations(coll["events"], demangle)
    k = median_durations(kin["events"])
    common = [n for n in c if n in k and c[n] > 0 and not n.startswith("ncclDevKernel")]
    ratios = sorted((k[n] / c[n], n) for n in common)
    off = [(round(q, 4), n[:60]) for q, n in ratios if abs(q - 1) > 0.01]
    check(len(common) >= 10 and not off,
          "rank %d: %d kernels in both, median duration Kineto / collector off by > 1 %%: %s"
          % (rank, len(common), off[:5]))
    if ratios:
        print("rank %d: %d kernels, median duration Kineto / collector from %.4f to %.4f"
              % (rank, len(common), ratios[0][0], ratios[-1][0]))


env = sanitizer_env(dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60"))
tmp = tempfile.mkdtemp(prefix="dpro-torch-prof-")
try:
    trace = os.path.join(tmp, "trace")
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    kineto = os.path.join(out, "kineto%d.json")
    r = subprocess.run([dpro_run, "-o", trace, "--", simrun, "-n", "2", "--timeout", "150", "--",
                        venv_py, TRAIN, "--steps", str(STEPS), "--out", out, "--profile", kineto],
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "DDP under dpro-run and torch.profiler (rc %d): %s"
          % (r.returncode, r.stderr[-4000:]))
    said = r.stderr.count("CUPTI's device records are taken by another tool")
    check(said == 2, "the collector says once per rank that CUPTI was taken: %d times" % said)
    imported = os.path.join(tmp, "imported")
    i = subprocess.run([dpro_import, "kineto", kineto % 0, kineto % 1, "-o", imported, "-q"],
                       capture_output=True, text=True, timeout=120)
    check(i.returncode == 0, "dpro-import kineto (rc %d): %s" % (i.returncode, i.stderr))
    coll, kin = dump(trace), dump(imported)
    check(sorted(coll) == [0, 1] and sorted(kin) == [0, 1],
          "traces of ranks 0 and 1: collector %s, Kineto %s" % (sorted(coll), sorted(kin)))
    for rank in sorted(set(coll) & set(kin)):
        compare(rank, coll[rank], kin[rank])
    # 4. durations: the collector alone, per kernel name against Kineto's
    alone = os.path.join(tmp, "alone")
    out2 = os.path.join(tmp, "out2")
    os.mkdir(out2)
    r = subprocess.run([dpro_run, "-o", alone, "--", simrun, "-n", "2", "--timeout", "150", "--",
                        venv_py, TRAIN, "--steps", str(STEPS), "--out", out2],
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "DDP under dpro-run alone (rc %d): %s"
          % (r.returncode, r.stderr[-4000:]))
    coll2 = dump(alone)
    for rank in sorted(set(coll2) & set(kin)):
        compare_durations(rank, coll2[rank], kin[rank])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    sys.exit(1)
print("PASS")
