#!/usr/bin/env python3
"""test_host_stalls: host_stalls.py's per-iteration figures of the device's side and of the
host's wake-up (docs/fidelity.md, "Pair 26 decomposed"), on a hand-written timeline as
dpro-export writes it: one rank, WARMUP + 4 iterations of 1000 us (the last two 1800 us),
each with a forward launch on the main thread, a backward launch on ddp-bwd, a kernel on
"stream 7", an all-reduce on "stream 13" (transfer 40 us, wait 5 us) and the closing
cudaStreamSynchronize.

The device's last record ends 20 us before the iteration's end in the fast iterations and
800 us before it in the slow ones (the host woken a timeslice late). Expected per
iteration: host after device 20 or 800 us, transfer 40 us, collective wait 5 us; slowed():
2 of 4 iterations over the fastest tenth's + STALL_US."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import host_stalls  # noqa: E402
import fidelity  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import check, exit_status  # noqa: E402


def meta(tid, name):
    return {"ph": "M", "name": "thread_name", "pid": 0, "tid": tid, "args": {"name": name}}


def x(tid, cat, name, ts, dur, args=None):
    e = {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur}
    if args is not None:
        e["args"] = args
    return e


def timeline():
    """The events and thread names (read_timeline's) of the timeline above."""
    ev = [meta(1, "iterations"), meta(10, "ddp-sim (10)"), meta(11, "ddp-bwd (11)"),
          meta(12, "stream 7"), meta(13, "stream 13")]
    a = 0.0
    for length in [1000.0] * (fidelity.WARMUP + 2) + [1800.0] * 2:
        device_end = a + length - (20.0 if length < 1500 else 800.0)
        ev += [x(1, "iteration", "iteration", a, length),
               x(10, "api", "cudaLaunchKernel", a + 10, 5.0),
               x(11, "api", "cudaLaunchKernel", a + 100, 5.0),
               x(12, "kernel", "gemm", a + 20, 600.0),
               x(13, "collective", "ncclDevKernel_AllReduce", a + 700, device_end - a - 700,
                 {"transfer_us": 40.0, "wait_us": 5.0}),
               x(10, "api", "cudaStreamSynchronize", a + 150, length - 150)]
        a += length
    names = {(e["pid"], e["tid"]): e["args"]["name"].split(" (")[0]
             for e in ev if e.get("ph") == "M"}
    return ev, names


def main():
    ev, names = timeline()
    rows = host_stalls.iterations(ev, names, 0)
    check(len(rows) == 4, "4 measured iterations (got %d)" % len(rows))
    lags = [r["host after device"] for r in rows]
    check(lags == [20.0, 20.0, 800.0, 800.0],
          "host after device: 20 us in the fast iterations, 800 in the slow (got %s)" % lags)
    check(all(r["transfer"] == 40.0 and r["collective wait"] == 5.0 for r in rows),
          "transfer 40 us and collective wait 5 us an iteration (got %s)" % [
              (r["transfer"], r["collective wait"]) for r in rows])
    check(host_stalls.slowed(rows) == (2, 4),
          "slowed: 2 of 4 iterations (got %s)" % (host_stalls.slowed(rows),))
    check(host_stalls.slowed([]) == (0, 0), "slowed: none of no iterations")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
