#!/usr/bin/env python3
"""test_memest_window: dpro-optimize's memory estimate (optimizer/memest.h) from the window
that `-n N -w W` reads (the trace's start to the compared iterations' end, where the
traces hold allocations) against the estimate from every event of the trace, field by
field (memest_dump prints them all: the peak, the static, optimizer, backward and other
bytes, the activations' sizes and times, the static allocations, the first step's
segments and workspace, the remade blocks; and the rank it took them from).

- ddp-sim's resnet50 of 4 blocks, 2 ranks, 8 iterations, under the collector (its caching
  allocator grows during the first iteration only): at -n/-w of 1/1, 2/2, 3/1, 1/7, 6/1
  and 2 with the warm-up detected, the windowed read holds fewer events, and every field
  is the full read's.
- a Kineto 2.x trace of tests/import/gen_kineto.py (2 ranks, 8 steps), imported: its
  [memory] instants allocate 1024 B a step and never free them, so the live bytes still
  grow after the window. That difference is inherent (memest.h: the estimate reads the
  allocations up to the compared iterations' end): the peak and the remade blocks are
  those up to the window's end, no more than the full read's and a prefix of its remade
  blocks; every other field is the full read's; and a window that reaches the trace's
  end (-n 0) gives the full read's estimate whole.

The ddp-sim half skips without CUDA headers (no simgpu/collector); the test skips (77)
when neither half can run.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import (  # noqa: E402
    BUILD, COLLECTOR, DDP_SIM, DPRO_RUN, IMPORT, LIBDIR, SIMRUN, SKIP, SRC, check,
    exit_status, missing, traced_env)

DUMP = os.path.join(BUILD, "tests", "optimizer", "memest_dump")
GEN_KINETO = os.path.join(SRC, "tests", "import", "gen_kineto.py")
JOB = ["--preset", "resnet50", "--layers", "4", "--batch", "16", "--iterations", "8",
       "--warmup", "1"]
# (N, W) of -n N -w W; W -1: detected
WINDOWS = [(1, 1), (2, 2), (3, 1), (1, 7), (6, 1), (2, -1)]
# the fields a trace whose live bytes grow after the window may give otherwise
GROWING = ("peak_bytes", "n_held", "held_bytes")


def dump(trace, n, w, full):
    """memest_dump's fields of trace read with -n n -w w (every event when full)."""
    p = subprocess.run([DUMP, trace, str(n), str(w)] + (["full"] if full else []),
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "memest_dump %s %d %d%s exits 0: %s"
          % (trace, n, w, " full" if full else "", p.stderr[-300:]))
    return json.loads(p.stdout) if p.returncode == 0 else {}


def differing(a, b):
    """The fields of the estimate (not the events read) where a and b differ."""
    return sorted(k for k in set(a) | set(b) if k != "events" and a.get(k) != b.get(k))


def ddp_sim_half(tmp):
    trace = os.path.join(tmp, "ddp")
    env = traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR)
    p = subprocess.run([DPRO_RUN, "-o", trace, "--", SIMRUN, "-n", "2", "--", DDP_SIM] + JOB,
                       capture_output=True, text=True, timeout=300, env=env)
    check(p.returncode == 0, "ddp-sim ran under the collector: %s" % p.stderr[-300:])
    if p.returncode != 0:
        return
    for n, w in WINDOWS:
        win, full = dump(trace, n, w, False), dump(trace, n, w, True)
        if not win or not full:
            continue
        check(win["events"] < full["events"], "ddp-sim -n %d -w %d: the window holds fewer "
              "events (%d) than the trace (%d)" % (n, w, win["events"], full["events"]))
        check(win["n_layers"] > 0 and win["n_static"] > 0,
              "ddp-sim -n %d -w %d: activations (%d) and static allocations (%d) found"
              % (n, w, win["n_layers"], win["n_static"]))
        d = differing(win, full)
        check(not d, "ddp-sim -n %d -w %d: every field of the windowed estimate is the full "
              "read's (differing: %s)" % (n, w, ", ".join(d) or "none"))


def kineto_half(tmp):
    src = os.path.join(tmp, "kineto")
    os.makedirs(src)
    files = []
    for r in range(2):
        f = os.path.join(src, "rank%d.json" % r)
        p = subprocess.run([sys.executable, GEN_KINETO, "2.x", f, "--rank", str(r), "--world",
                            "2", "--steps", "8"], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "gen_kineto.py rank %d: %s" % (r, p.stderr[-300:]))
        files.append(f)
    trace = os.path.join(tmp, "kineto-trace")
    p = subprocess.run([IMPORT, "kineto"] + files + ["-o", trace, "-q"], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "dpro-import kineto: %s" % p.stderr[-300:])
    if p.returncode != 0:
        return
    whole, whole_full = dump(trace, 0, -1, False), dump(trace, 0, -1, True)
    d = differing(whole, whole_full)
    check(whole and not d, "kineto -n 0: the estimate is the full read's (differing: %s)"
          % (", ".join(d) or "none"))
    grew = False
    for n, w in ((2, 2), (3, 1), (1, 5)):
        win, full = dump(trace, n, w, False), dump(trace, n, w, True)
        if not win or not full:
            continue
        d = [k for k in differing(win, full) if k not in GROWING]
        check(not d, "kineto -n %d -w %d: every field but %s is the full read's (differing: "
              "%s)" % (n, w, ", ".join(GROWING), ", ".join(d) or "none"))
        held_w, held_f = win["held_bytes"], full["held_bytes"]
        check(win["peak_bytes"] <= full["peak_bytes"] and held_f[:len(held_w)] == held_w,
              "kineto -n %d -w %d: the windowed peak (%d) at most the full read's (%d), its "
              "remade blocks (%d) a prefix of the full read's (%d)"
              % (n, w, win["peak_bytes"], full["peak_bytes"], len(held_w), len(held_f)))
        grew |= win["peak_bytes"] < full["peak_bytes"]
    check(grew, "kineto: the live bytes grow after some window (the case this half checks)")


def main():
    if missing((DUMP, IMPORT)):
        return SKIP
    tmp = tempfile.mkdtemp(prefix="dpro-memest-window-")
    try:
        kineto_half(tmp)
        if not missing((COLLECTOR, DPRO_RUN, SIMRUN, DDP_SIM)):
            ddp_sim_half(tmp)
        else:
            print("SKIP: the ddp-sim half (no simgpu/collector in this build)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
