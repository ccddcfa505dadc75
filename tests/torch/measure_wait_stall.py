#!/usr/bin/env python3
"""measure_wait_stall.py PERF_SCRIPT_TXT [MIN_US]: who holds a rank's CPU while a host call
stalls. Reads the text of `perf script -F comm,tid,cpu,time,event,trace` from a system-wide
`perf record` of a traced job (the scheduler's sched_switch events and uprobes at the entry
and return of the collector's cudaStreamWaitEvent) and prints, over the calls longer than
MIN_US (default 300): their count, how many of them the calling thread was switched out of
while runnable (prev_state R: preempted, not blocked), and how long each thread held the
caller's CPU meanwhile (stream workers "simgpu-s<id>" of tests/simgpu summed as one).

How the record is made (root; the probes are global until deleted: `perf probe -d
'probe_libdpro:*'`):

    perf probe -x _build/collector/.libs/libdpro-collector.so \\
        -a 'cswe_in=cudaStreamWaitEvent' -a 'cswe_out=cudaStreamWaitEvent%return'
    perf record -o OUT.perf -a -e sched:sched_switch -e sched:sched_wakeup \\
        -e 'probe_libdpro:*' -- simrun -n 2 --bind-cpus -- dpro-run ... python ddp_train.py ...
    perf script -i OUT.perf -F comm,tid,cpu,time,event,trace > OUT.txt

Written for the DDP memory budget's stall (docs/figures.md, "The backward's stall: the
simulated device's stream workers on the rank's CPU"). Not a test."""
import collections
import re
import sys

LINE = re.compile(r'^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$')


def read(path):
    """The events of a perf script text: (time us, tid, cpu, event, fields, comm)."""
    events = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                comm, tid, cpu, t, name, rest = m.groups()
                events.append((float(t) * 1e6, int(tid), int(cpu), name, rest, comm.strip()))
    return events


def calls_of(events):
    """The collector-level cudaStreamWaitEvent calls: (start, end, tid, cpu at entry)."""
    open_calls, calls = {}, []
    for t, tid, cpu, name, _, _ in events:
        if 'cswe_' not in name:
            continue
        if name.endswith('_in'):
            open_calls[tid] = (t, cpu)
        elif tid in open_calls:
            a, c = open_calls.pop(tid)
            calls.append((a, t, tid, c))
    return calls


def switches_of(events):
    """Per CPU, its sched_switch events in time order: (time, next comm, prev tid, prev
    state)."""
    per_cpu = collections.defaultdict(list)
    for t, tid, cpu, name, rest, _ in events:
        if name == 'sched:sched_switch':
            nxt = re.search(r'next_comm=(.+?) next_pid', rest).group(1)
            state = re.search(r'prev_state=(\S+)', rest).group(1)
            per_cpu[cpu].append((t, nxt, tid, state))
    return per_cpu


def occupancy(switches, a, b):
    """Microseconds each thread (by name) ran on a CPU between a and b."""
    occ, cur, last = collections.Counter(), None, a
    for t, nxt, _, _ in switches:
        if t < a:
            cur = nxt
            continue
        if t > b:
            break
        if cur:
            occ[cur] += t - last
        cur, last = nxt, t
    if cur:
        occ[cur] += b - last
    return occ


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    min_us = float(sys.argv[2]) if len(sys.argv) == 3 else 300.0
    events = read(sys.argv[1])
    calls = calls_of(events)
    switches = switches_of(events)
    if not calls:
        sys.exit("no cudaStreamWaitEvent probes in %s" % sys.argv[1])
    durs = sorted(b - a for a, b, _, _ in calls)
    long_calls = [c for c in calls if c[1] - c[0] > min_us]
    held, preempted = collections.Counter(), 0
    for a, b, tid, cpu in long_calls:
        for name, us in occupancy(switches[cpu], a, b).items():
            held["simgpu-s*" if name.startswith("simgpu-s") else name] += us
        preempted += any(p == tid and s == 'R' and a <= t <= b for t, _, p, s in switches[cpu])
    print("cudaStreamWaitEvent calls %d: median %.0f us, longest %.0f us; over %.0f us: %d, "
          "their time %.0f us" % (len(durs), durs[len(durs) // 2], durs[-1], min_us,
                                  len(long_calls), sum(b - a for a, b, _, _ in long_calls)))
    print("the caller switched out while runnable (preempted) in %d of them" % preempted)
    total = sum(held.values()) or 1.0
    for name, us in held.most_common(8):
        print("  %-18s held the caller's CPU %8.0f us, %5.1f %%" % (name, us, 100 * us / total))


if __name__ == "__main__":
    main()
