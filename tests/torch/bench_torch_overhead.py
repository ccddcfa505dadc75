#!/usr/bin/env python3
"""bench_torch_overhead.py (make bench-overhead, make bench): the collector's overhead on a
torch DDP iteration, as a model from costs the machine's load does not set, checked end to
end.  docs/figures.md (the collector's overhead, measured) gives the rule and the figures.

1. Hooks, on the job's thread: tests/bench/hook_mix (one torch step's CUDA and NCCL calls,
   repeated) under callgrind, plain and under dpro-run, two lengths each: the
   instructions a call the hooks add on the calling thread (the collector's, the
   simulated CUPTI's callbacks to it, libc's), which no load moves; then MIX_RUNS pairs
   of timed runs, plain and traced, interleaved: each prints the median over its batches
   of the calling thread's CPU ns per iteration (its own CPU clock).  Hook ns a call =
   those instructions x the plain call's ns per instruction (the least disturbed plain
   run's; high: the median run's); the timed pairs' differences, every pair printed, with
   their median and sign-test interval, are the check (noisier: the simulated calls wake
   threads and spin on their locks).
2. The job: tests/torch/traced_train.py (2 ranks, simple physics, no operator ranges),
   PAIRS pairs of runs, plain and under dpro-run, interleaved AB BA ...  Per run, rank 0's
   median step wall time and process CPU time after WARMUP steps and, from step WARMUP on,
   each thread's own CPU time by name; per traced run, the intercepted calls per step
   (api, collective, marker and memory events of the trace inside the measured steps).
3. Model: overhead = (hook ns x calls per step [+ the CPU per step of the threads only a
   traced run has: the collector's writer `dpro-collector`, the simulated CUPTI's
   delivery]) / the plain step's wall time in the least disturbed plain run (load only
   lengthens a step).  The threads' CPU costs the job only when the cores are short
   (here: 2 cores, 2 ranks of Python), so two figures: a spare core (hooks only) and cores
   short (hooks + threads).  Bounds: low, the hook cost's low over the median plain step
   (with the threads' least CPU); high, its high over the least disturbed one (with their
   most).
4. End to end: each pair's ratio traced / plain of wall and of CPU time, every pair
   printed; the median with a sign-test interval (order statistics; its coverage
   printed); whether the model's cores-short figure lies in the wall interval.

Prints all that and the load average, exits 0: a figure to read, not a test.  Skips (exit
0, saying so) without venv/.  DPRO_COLLECTOR=/path/libdpro-collector.so picks the
collector dpro-run preloads (to compare two).  BENCH_PAIRS (10), BENCH_STEPS (60),
BENCH_MIX_RUNS (5), BENCH_MIX_ITERATIONS (40), BENCH_MIX_BATCHES (9)."""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (DPRO_RUN as dpro_run, SIMRUN as simrun, VENV_PY as venv_py,  # noqa: E402
                      TRACE_DUMP as trace_dump, BUILD)

PAIRS = int(os.environ.get("BENCH_PAIRS", "10"))
STEPS = int(os.environ.get("BENCH_STEPS", "60"))
MIX_RUNS = int(os.environ.get("BENCH_MIX_RUNS", "5"))
MIX_ITERATIONS = int(os.environ.get("BENCH_MIX_ITERATIONS", "40"))
MIX_BATCHES = int(os.environ.get("BENCH_MIX_BATCHES", "9"))
WARMUP = 10
HOOK_KINDS = ("api", "collective", "marker", "memory")  # events a hook on the job's thread makes
HOOK_MIX = os.path.join(BUILD, "tests", "bench", "hook_mix")


def fail(msg):
    sys.exit("bench_torch_overhead: " + msg)


def mix_run(traced, tmp, n):
    """One hook_mix run: (its median thread CPU ns per iteration, its calls per iteration)."""
    cmd = [HOOK_MIX, "--iterations", str(MIX_ITERATIONS), "--batches", str(MIX_BATCHES)]
    if traced:
        cmd = [dpro_run, "-o", os.path.join(tmp, "mix%d" % n), "--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m = re.search(r"calls_per_iter (\d+) median_thread_cpu_ns_per_iter (\d+)", r.stdout)
    if r.returncode != 0 or not m:
        fail("hook_mix failed (rc %d): %s" % (r.returncode, r.stderr[-2000:]))
    return float(m.group(2)), int(m.group(1))


def hook_cost(tmp):
    """Interleaved hook_mix pairs: (the plain runs' ns a call, the pairs' differences in ns
    a call), every pair printed."""
    plain, per_call = [], []
    for i in range(MIX_RUNS):
        t = {}
        for traced in ((False, True) if i % 2 == 0 else (True, False)):
            t[traced], calls = mix_run(traced, tmp, 2 * i + traced)
        plain.append(t[False] / calls)
        per_call.append((t[True] - t[False]) / calls)
        print("hook_mix pair %d: plain %.0f ns, traced %.0f ns a mix of %d calls: %+.1f ns a call"
              % (i, t[False], t[True], calls, per_call[-1]), flush=True)
    lo, hi, cover = sign_interval(per_call)
    print("hook cost timed: median %+.1f ns a call, sign-test interval %+.1f to %+.1f ns "
          "(coverage %.1f %%)" % (statistics.median(per_call), lo, hi, cover * 100), flush=True)
    return plain, per_call


def hook_ns(tmp):
    """The hooks' ns a call on the job's thread: (figure, low, high).  With callgrind: the
    instructions a call the hooks add x the plain call's ns per instruction in the least
    disturbed plain run (load only adds to a thread's CPU time here: the simulated calls
    spin on locks whose holder another process has descheduled), high: x the median plain
    run's (the plain call's time includes system calls that callgrind does not count, so
    the rate overstates the hooks' time when they run at the plain code's pace); without
    valgrind: the timed pairs' median and sign-test interval."""
    instr = hook_instructions(tmp)
    plain, per_call = hook_cost(tmp)
    if instr is None:
        print("hook cost: no valgrind, the timed pairs' figure")
        lo, hi, _ = sign_interval(per_call)
        return statistics.median(per_call), lo, hi
    added, plain_instr = instr
    rates = [ns / plain_instr for ns in plain]
    fast, mid = min(rates), statistics.median(rates)
    print("hook cost: %.0f instructions a call x %.3f ns an instruction (the plain call's in the "
          "least disturbed plain run; the median run's %.3f) = %.1f ns a call (to %.1f)"
          % (added, fast, mid, added * fast, added * mid), flush=True)
    return added * fast, added * fast, added * mid


def thread_instructions(out_file):
    """The first thread's instructions by where they run, from callgrind_annotate:
    {"collector": n, "simulated device": n, "hook_mix": n, "libc and loader": n}."""
    a = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", out_file],
                       capture_output=True, text=True, timeout=300)
    if a.returncode != 0:
        fail("callgrind_annotate %s: %s" % (out_file, a.stderr[-500:]))
    by = dict.fromkeys(("collector", "simulated device", "hook_mix", "libc and loader"), 0)
    for line in a.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        where = ("collector" if "/collector/" in m.group(2) else
                 "simulated device" if "/tests/simgpu/" in m.group(2) else
                 "hook_mix" if "/tests/bench/" in m.group(2) else "libc and loader")
        by[where] += int(m.group(1).replace(",", ""))
    return by


def hook_instructions(tmp):
    """Instructions a call on hook_mix's thread, traced less plain, by where they run: each
    run under callgrind (--separate-threads=yes) with 2 x 5 and 2 x 25 iterations (a
    warm-up batch and one batch), the difference / 40 iterations / the mix's calls.
    Returns (the instructions the hooks add a call, the plain call's instructions); None
    when valgrind is not installed."""
    if subprocess.run(["sh", "-c", "command -v valgrind && command -v callgrind_annotate"],
                      capture_output=True).returncode != 0:
        return None
    got, calls = {}, 0
    for traced in (False, True):
        for n in (5, 25):
            out = os.path.join(tmp, "cg-%d-%d" % (traced, n))
            cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                   "--callgrind-out-file=%s.%%p" % out, HOOK_MIX, "--iterations", str(n),
                   "--batches", "1"]
            if traced:
                cmd = [dpro_run, "-o", out + ".trace", "--"] + cmd
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            m = re.search(r"calls_per_iter (\d+)", r.stdout)
            first = [f for f in os.listdir(tmp) if f.startswith(os.path.basename(out) + ".")
                     and f.endswith("-01")]
            if r.returncode != 0 or not m or len(first) != 1:
                fail("callgrind on hook_mix failed (rc %d): %s" % (r.returncode, r.stderr[-1000:]))
            calls = int(m.group(1))
            got[traced, n] = thread_instructions(os.path.join(tmp, first[0]))
    per = {k: ((got[True, 25][k] - got[True, 5][k]) - (got[False, 25][k] - got[False, 5][k]))
           / 40 / calls for k in got[True, 25]}
    plain = sum(got[False, 25].values()) - sum(got[False, 5].values())
    print("hook instructions a call, on the job's thread, traced less plain (callgrind, "
          "hook_mix): %.0f in all: %s; the plain call itself %.0f"
          % (sum(per.values()), ", ".join("%s %.0f" % kv for kv in per.items()),
             plain / 40 / calls), flush=True)
    return sum(per.values()), plain / 40 / calls


def hooked_calls_per_step(trace_dir):
    """Intercepted calls per measured step in rank 0's trace: host events, on any thread
    (the backward runs on autograd's), between the start of step WARMUP's NVTX range and
    the end of the last step's."""
    files = sorted(f for f in os.listdir(trace_dir) if f.endswith(".dpro"))
    docs = []
    for f in files:
        d = subprocess.run([trace_dump, os.path.join(trace_dir, f)], capture_output=True,
                           text=True, timeout=300)
        if d.returncode != 0:
            fail("trace-dump %s: %s" % (f, d.stderr[-500:]))
        docs.append(json.loads(d.stdout.splitlines()[0]))
    doc = next((d for d in docs if str(d["meta"].get("rank")) == "0"), docs[0])
    ev = doc["events"]
    steps = {e["name"]: e for e in ev
             if e["kind"] == "marker" and e["name"].startswith("dpro_step_")}
    first, last = steps.get("dpro_step_%d" % WARMUP), steps.get("dpro_step_%d" % (STEPS - 1))
    if not first or not last:
        fail("%s: no step ranges dpro_step_%d and dpro_step_%d" % (trace_dir, WARMUP, STEPS - 1))
    n = sum(1 for e in ev if e["kind"] in HOOK_KINDS and first["t0"] <= e["t0"] <= last["t1"])
    return n / (STEPS - WARMUP)


def job_run(traced, tmp, n):
    """One torch run: (median step wall s, median step CPU s, {thread: CPU s a step},
    hooked calls a step or None)."""
    out = os.path.join(tmp, "run%d" % n)
    os.mkdir(out)
    cmd = [simrun, "-n", "2", "--timeout", "300", "--", venv_py,
           os.path.join(HERE, "traced_train.py"), "--steps", str(STEPS), "--no-emit-nvtx",
           "--thread-cpu-from", str(WARMUP), "--out", out]
    trace = os.path.join(tmp, "trace%d" % n)
    if traced:
        cmd = [dpro_run, "-o", trace, "--"] + cmd
    env = dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="120")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    if r.returncode != 0:
        fail("run failed (rc %d): %s" % (r.returncode, r.stderr[-2000:]))
    with open(os.path.join(out, "rank0.json")) as f:
        rec = json.load(f)
    per_step = {k: v / rec["thread_cpu_steps"] for k, v in rec["thread_cpu_s"].items()}
    return (statistics.median(rec["step_s"][WARMUP:]),
            statistics.median(rec["step_cpu_s"][WARMUP:]), per_step,
            hooked_calls_per_step(trace) if traced else None)


def sign_interval(xs):
    """The median's sign-test interval: (low, high, coverage), the order statistics
    x(k), x(n-k+1) with the largest k whose coverage 1 - 2 P(B <= k-1) is >= 95 %
    (B binomial n, 1/2); with too few pairs for 95 %, the extremes and their coverage."""
    s, n = sorted(xs), len(xs)
    cdf = lambda k: sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n  # noqa: E731
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * cdf(k) >= 0.95:
        k += 1
    return s[k - 1], s[n - k], 1 - 2 * cdf(k - 1)


def pct(r):
    return (r - 1) * 100


def main():
    if not os.path.exists(os.path.join(BUILD, "venv", ".dpro-torch-stamp")):
        print("bench_torch_overhead: skipped: no venv with torch in the build tree (make venv)")
        return
    if not os.access(HOOK_MIX, os.X_OK):
        fail("%s not built (make)" % HOOK_MIX)
    print("load average at the start %.1f %.1f %.1f" % os.getloadavg(), flush=True)
    with tempfile.TemporaryDirectory(prefix="dpro-bench-torch-") as tmp:
        ns_call, ns_lo, ns_hi = hook_ns(tmp)
        runs = {False: [], True: []}
        ratios, cpu_ratios = [], []
        for pair in range(PAIRS):
            t = {}
            for traced in ((False, True) if pair % 2 == 0 else (True, False)):
                t[traced] = job_run(traced, tmp, 2 * pair + traced)
                runs[traced].append(t[traced])
            ratios.append(t[True][0] / t[False][0])
            cpu_ratios.append(t[True][1] / t[False][1])
            added = {k: v for k, v in t[True][2].items() if k not in t[False][2]}
            print("pair %d: step plain %.3f ms, traced %.3f ms (%+.1f %%); CPU plain %.3f ms, "
                  "traced %.3f ms (%+.1f %%); %.0f hooked calls a step; threads only traced, "
                  "us a step: %s" % (pair, t[False][0] * 1e3, t[True][0] * 1e3, pct(ratios[-1]),
                                     t[False][1] * 1e3, t[True][1] * 1e3, pct(cpu_ratios[-1]),
                                     t[True][3], ", ".join("%s %.0f" % (k, v * 1e6)
                                                           for k, v in sorted(added.items()))),
                  flush=True)
    plain_names = set().union(*(r[2] for r in runs[False]))
    threads = [sum(v for k, v in r[2].items() if k not in plain_names) for r in runs[True]]
    writer = [r[2].get("dpro-collector", 0.0) for r in runs[True]]
    calls = statistics.median(r[3] for r in runs[True])
    step = [r[0] for r in runs[False]]
    t_step = min(step)  # the least disturbed plain run: load only lengthens a step
    hooks = ns_call * 1e-9 * calls
    print("model: plain step %.3f ms (the least disturbed run; median %.3f, most %.3f); "
          "hooks %.1f ns a call (%.1f to %.1f) x %.0f calls = %.1f us a step; the writer "
          "thread %.0f us a step (runs %.0f-%.0f), all threads only traced %.0f us (runs "
          "%.0f-%.0f)" % (t_step * 1e3, statistics.median(step) * 1e3, max(step) * 1e3,
                          ns_call, ns_lo, ns_hi, calls, hooks * 1e6,
                          statistics.median(writer) * 1e6, min(writer) * 1e6,
                          max(writer) * 1e6, statistics.median(threads) * 1e6,
                          min(threads) * 1e6, max(threads) * 1e6))
    names = sorted(set(plain_names).union(*(r[2] for r in runs[True])))
    for name in names:  # where a traced run's CPU goes, thread by thread
        a = statistics.median(r[2].get(name, 0.0) for r in runs[False]) * 1e6
        b = statistics.median(r[2].get(name, 0.0) for r in runs[True]) * 1e6
        print("thread %-16s CPU a step, medians: plain %7.0f us, traced %7.0f us (%+.0f)"
              % (name, a, b, b - a))
    mid_step = statistics.median(step)
    spare = hooks / t_step * 100
    spare_lo, spare_hi = ns_lo * 1e-9 * calls / mid_step * 100, ns_hi * 1e-9 * calls / t_step * 100
    short = (hooks + statistics.median(threads)) / t_step * 100
    short_lo = (ns_lo * 1e-9 * calls + min(threads)) / mid_step * 100
    short_hi = (ns_hi * 1e-9 * calls + max(threads)) / t_step * 100
    print("model overhead, a spare core (hooks only): %+.2f %% (bound %+.2f to %+.2f %%)"
          % (spare, spare_lo, spare_hi))
    print("model overhead, cores short (hooks + the collector's threads): %+.2f %% "
          "(bound %+.2f to %+.2f %%)" % (short, short_lo, short_hi))
    for what, rs in (("wall time", ratios), ("CPU time", cpu_ratios)):
        lo, hi, cover = sign_interval(rs)
        print("end to end, %d pairs, %s: median %+.1f %%, sign-test interval %+.1f to %+.1f %% "
              "(coverage %.1f %%); pairs: %s"
              % (len(rs), what, pct(statistics.median(rs)), pct(lo), pct(hi), cover * 100,
                 ", ".join("%+.1f" % pct(r) for r in rs)))
    lo, hi, _ = sign_interval(ratios)
    agree = pct(lo) <= max(short_hi, short) and pct(hi) >= min(short_lo, short)
    print("model (cores short) and end to end (wall) %s"
          % ("agree: the bounds overlap" if agree else "DISAGREE: the bounds do not overlap"))
    print("load average at the end %.1f %.1f %.1f" % os.getloadavg())


if __name__ == "__main__":
    main()
