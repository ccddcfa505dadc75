#!/usr/bin/env python3
"""test_fidelity_lag: fidelity.py's measure of how far the simulated device ran behind the
host's clock (lag_of_timeline), on a hand-written timeline as dpro-export writes it: two
ranks, WARMUP + 2 iterations each, device records on two streams, a host thread's record
that must not count as device work.

Rank 0: iterations end 100 us (then 40 us) after their last device record; rank 1: 20 us
(then 60 us). Expected: lag = mean over ranks of the medians over the measured iterations
= ((100 + 40) / 2 + (20 + 60) / 2) / 2 = 55 us; device span likewise. A timeline without
iteration ranges gives (None, None). lag_line names the pairs whose changed run lagged by
more than LAG_SHARE of its iteration."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import check, exit_status  # noqa: E402


def meta(pid, tid, name):
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def x(pid, tid, name, ts, dur):
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def timeline(lags):
    """Per rank (pid) the lag of each measured iteration; each iteration lasts 1000 us, its
    device work on two streams ends 1000 - lag after its start, the warm-up ones end at
    their iteration's end."""
    ev = []
    for pid, rank_lags in enumerate(lags):
        ev += [meta(pid, 1, "iterations"), meta(pid, 10, "ddp-sim (1)"),
               meta(pid, 12, "stream 7"), meta(pid, 13, "stream 13")]
        for i, lag in enumerate([0] * fidelity.WARMUP + rank_lags):
            a = 5000.0 * i + 7 * pid
            ev.append(x(pid, 1, "iteration %d" % i, a, 1000.0))
            ev.append(x(pid, 12, "gemm", a + 10, 500.0))
            ev.append(x(pid, 13, "ncclDevKernel_AllReduce", a + 300, 1000.0 - 300 - lag))
            ev.append(x(pid, 10, "cudaStreamSynchronize", a + 50, 950.0))  # host: not device
    return {"traceEvents": ev}


def main():
    lag, span = fidelity.lag_of_timeline(timeline([[100.0, 40.0], [20.0, 60.0]]))
    check(lag is not None and abs(lag - 55.0) < 1e-9, "lag 55 us (got %s)" % lag)
    check(span is not None and abs(span - 945.0) < 1e-9, "device span 945 us (got %s)" % span)
    t = timeline([[0.0, 0.0]])
    lag, span = fidelity.lag_of_timeline(t)
    check(lag == 0.0 and span == 1000.0, "no lag: 0 us, span the iteration (got %s, %s)"
          % (lag, span))
    t["traceEvents"] = [e for e in t["traceEvents"] if not e["name"].startswith("iteration")]
    check(fidelity.lag_of_timeline(t) == (None, None), "no iteration ranges: (None, None)")
    rows = [{"pair": 1, "kind": "fusion", "realised_us": 1000.0, "realised_lag_us": 50.0,
             "error_pct": -4.0},
            {"pair": 2, "kind": "accumulation", "realised_us": 1000.0, "realised_lag_us": 150.0,
             "error_pct": 60.0},
            {"pair": 3, "kind": "kernels-x2", "realised_us": 1000.0, "realised_lag_us": None,
             "error_pct": 2.0}]
    line = fidelity.lag_line(rows)
    check("1 of 3 pairs (2 accumulation)" in line and "others 3.0 %" in line,
          "lag_line: the lagging pair named, the others' mean |error| (%s)" % line)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
