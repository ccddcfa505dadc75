#!/usr/bin/env python3
"""test_replay_cp_classes: the critical path's composition (dpro-replay --json
critical_path.composition) charges each segment to what ran then.

A synthetic Kineto trace (tests/import/gen_kineto.py's 2.x spelling), four steps of a
host-bound loop: a long cpu_op (aten::slow_op, 5000 us) with no CUDA call in it, then a
short cpu_op whose cudaLaunchKernel (10 us) launches a 20 us kernel, then a
cudaDeviceSynchronize that waits for the kernel. The framework time before the launch belongs to aten::slow_op
(class cpu_op), not to the launch call (class api); the launch call is charged its own
10 us, the kernel its 20 us and its launch delay the 5 us between call and kernel. The
composition sums to the path's length. On the real A100 trace of ../shared/traces/kineto
(a100-2rank-allreduce-rank0), cudaLaunchKernel is charged at most the time its calls took
(they were charged 101.8 ms of framework time before), and the cpu_op class holds most of
the path."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
import replay_testlib as T  # noqa: E402
from gen_kineto import BASE_NS, Gen  # noqa: E402

STEP_US = 6000.0
SLOW_US, LAUNCH_US, DELAY_US, KERNEL_US = 5000.0, 10.0, 5.0, 20.0


def synthetic_trace(steps):
    g = Gen("2.x", 0, 1, 4242)
    for n in range(1, steps + 1):
        t0 = 1000.0 + (n - 1) * STEP_US
        g.op("ProfilerStep#%d" % n, t0, STEP_US - 10, cat=g.c_step)
        g.op("aten::slow_op", t0 + 20, SLOW_US)
        t1 = t0 + 20 + SLOW_US + 10
        g.op("aten::add", t1, 40)
        g.launch("cudaLaunchKernel", "add_kernel", t1 + 10, t1 + 10 + LAUNCH_US + DELAY_US,
                 KERNEL_US)
        rt = [e for e in g.ev if e.get("name") == "cudaLaunchKernel" and e["ph"] == "X"][-1]
        rt["dur"] = LAUNCH_US  # the launch call's own duration
        # the synchronisation waits for the kernel (it ends at t1 + 45)
        g.x("cuda_runtime", "cudaDeviceSynchronize", g.pid, g.tid, t1 + 30, 20,
            {"cbid": 165, "correlation": 9000 + n})
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": g.pid, "tid": 0,
             "args": {"name": "python3"}}]
    return {"schemaVersion": 1, "traceEvents": meta + g.ev, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": BASE_NS}


def replay_json(trace_dir, chrome=None):
    extra = ["--chrome", chrome] if chrome else []
    p = subprocess.run([T.REPLAY, trace_dir, "--json", "--top", "1000"] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    T.check(p.returncode == 0, "dpro-replay %s exits 0 (%s)" % (trace_dir, p.stderr[-300:]))
    return json.loads(p.stdout)["critical_path"] if p.returncode == 0 else None


def entry(cp, cls, name):
    return sum(e["time_us"] for e in cp["top"] if e["class"] == cls and e["name"] == name)


def check_sums(cp, what):
    total = sum(cp["composition"].values())
    T.check(abs(total - cp["length_us"]) <= 0.01 + 1e-6 * cp["length_us"],
            "%s: composition sums to the path (%.1f vs %.1f us)" % (what, total, cp["length_us"]))
    T.check(set(cp["composition"]) == {
        "cpu_op_us", "annotation_us", "host_other_us", "api_us", "launch_delay_us",
        "stream_gap_us", "kernel_us", "memcpy_us", "memset_us", "collective_us",
        "wait_rank_us"}, "%s: the documented composition keys" % what)


def check_chrome(path, cp):
    """The --chrome overlay: the path's pieces, back to back, summing to its length, each
    piece's class that of the composition."""
    with open(path) as f:
        pieces = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "critical_path"]
    pieces.sort(key=lambda e: e["ts"])
    T.check(pieces and all(e["tid"] == pieces[0]["tid"] and e["pid"] == cp["rank"]
                           for e in pieces), "--chrome: a critical-path track on its rank")
    gaps = sum(1 for x, y in zip(pieces, pieces[1:]) if abs(x["ts"] + x["dur"] - y["ts"]) > 0.01)
    T.check(gaps == 0, "--chrome: the pieces follow each other (%d gaps)" % gaps)
    by = {}
    for e in pieces:
        by[e["args"]["class"] + "_us"] = by.get(e["args"]["class"] + "_us", 0) + e["dur"]
    T.check(all(abs(by.get(k, 0) - v) < 0.01 for k, v in cp["composition"].items()),
            "--chrome: the pieces by class are the composition (%s)" % by)
    T.check(any(e["name"] == "aten::slow_op" and e["args"]["class"] == "cpu_op" for e in pieces),
            "--chrome: aten::slow_op is a cpu_op piece")


def synthetic(tmp):
    src = os.path.join(tmp, "synth.json")
    with open(src, "w") as f:
        json.dump(synthetic_trace(4), f)
    out = os.path.join(tmp, "synth")
    p = subprocess.run([T.IMPORT, "kineto", "--quiet", src, "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    T.check(p.returncode == 0, "the synthetic trace imports (%s)" % p.stderr[-300:])
    chrome = os.path.join(tmp, "synth.chrome.json")
    cp = replay_json(out, chrome)
    if cp is None:
        return
    check_chrome(chrome, cp)
    comp = cp["composition"]
    print("synthetic: length %.1f us, composition %s" % (cp["length_us"], comp))
    check_sums(cp, "synthetic")
    slow = entry(cp, "cpu_op", "aten::slow_op")
    launch = entry(cp, "api", "cudaLaunchKernel")
    # one iteration on the path: the slow op's framework time, to the us
    T.check(abs(slow - SLOW_US) <= 15, "aten::slow_op is charged its %.0f us (%.1f)"
            % (SLOW_US, slow))
    T.check(comp["cpu_op_us"] >= SLOW_US, "the cpu_op class holds it (%.1f us)"
            % comp["cpu_op_us"])
    T.check(launch <= LAUNCH_US + 0.5, "cudaLaunchKernel is charged its own %.0f us at most "
            "(%.1f), not the framework time before it" % (LAUNCH_US, launch))
    T.check(comp["api_us"] < 100, "the api class holds the calls only (%.1f us)"
            % comp["api_us"])
    T.check(abs(entry(cp, "kernel", "add_kernel") - KERNEL_US) <= 0.5,
            "the kernel is charged its %.0f us" % KERNEL_US)
    T.check(abs(comp["launch_delay_us"] - DELAY_US) <= 0.5, "the launch delay is %.0f us (%.1f)"
            % (DELAY_US, comp["launch_delay_us"]))


def real(tmp):
    f = os.path.join(T.KINETO, "a100-2rank-allreduce-rank0.json.gz")
    if not os.path.exists(f):
        if os.environ.get("CI") == "true":
            T.check(False, "%s is there (CI=true)" % f)
        else:
            print("no %s: the real-trace part skipped" % f)
        return
    out = os.path.join(tmp, "a100")
    p = subprocess.run([T.IMPORT, "kineto", "--quiet", f, "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    T.check(p.returncode == 0, "the A100 trace imports")
    cp = replay_json(out)
    if cp is None:
        return
    comp = cp["composition"]
    print("a100: length %.1f us, composition %s" % (cp["length_us"], comp))
    check_sums(cp, "a100")
    launch = entry(cp, "api", "cudaLaunchKernel")
    # its 849 launch calls on the path took 8.3 ms in all (the trace's own durations)
    T.check(launch < 10000, "cudaLaunchKernel charged %.1f us (< 10 ms; was 101.8 ms)" % launch)
    T.check(comp["cpu_op_us"] > 0.5 * cp["length_us"], "the cpu_op class holds most of the "
            "host-bound path (%.1f of %.1f us)" % (comp["cpu_op_us"], cp["length_us"]))


def main():
    if not os.path.exists(T.REPLAY):  # always built: missing is a failure
        print("FAIL: %s not built" % T.REPLAY)
        return 1
    if T.missing([T.IMPORT]):  # dpro-import needs yajl (configure)
        return T.SKIP
    with tempfile.TemporaryDirectory() as tmp:
        synthetic(tmp)
        real(tmp)
    return 1 if T.failures else 0


if __name__ == "__main__":
    sys.exit(main())
