#!/usr/bin/env python3
"""thread_cpu.py: where a job's CPU goes, per kind of thread.

Usage: thread_cpu.py [--interval MS] [--json] -- COMMAND ARGS...

Runs COMMAND and samples /proc/PID/task/TID/stat of it and every process below it
every --interval ms (default 10), keeping each thread's last CPU time (schedstat's
run time, in ns: stat's user and system ticks are 10 ms coarse), its voluntary and
involuntary context switches (status: a wake-up after a wait; a preemption) and its
name (comm). At the end it prints the CPU of each kind of thread, summed over the
processes: the simulated device names its threads (simgpu-sN: the worker of stream N,
simgpu-cupti: CUPTI's record delivery), ddp-sim its backward thread (ddp-bwd), the
collector its writer (dpro-collector); a thread without a name of its own carries its
program's name (the job's host thread). Up to one interval of each thread's CPU before
its exit is not seen. Exit status: the command's."""
import json
import os
import subprocess
import sys
import time


def children_of(pids):
    """Every process whose parent is in pids, transitively (one scan of /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        parent[int(d)] = int(s[s.rindex(")") + 2:].split()[1])
    out, grew = set(pids), True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in out and p not in out:
                out.add(p)
                grew = True
    return out


def sample(pids, seen):
    """Reads every thread of pids into seen[(pid, tid)] = [process name, thread name,
    CPU ns, voluntary switches, involuntary switches]."""
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
            with open("/proc/%d/comm" % pid) as f:
                pname = f.read().strip()
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    name = f.read().strip()
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    ns = int(f.read().split()[0])
                with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                    sw = dict(x.split(":\t") for x in f.read().splitlines() if ":\t" in x)
                vol = int(sw["voluntary_ctxt_switches"])
                invol = int(sw["nonvoluntary_ctxt_switches"])
            except (OSError, ValueError, IndexError, KeyError):
                continue
            seen[(pid, int(tid))] = [pname, name, ns, vol, invol]


def kind(pname, tname):
    """The kind of a thread from its name (simgpu-s13 -> stream worker)."""
    if tname.startswith("simgpu-s"):
        return "stream worker (%s)" % tname
    if tname == pname:
        return "host: %s" % pname
    return tname


def main(argv):
    interval, as_json = 0.010, False
    while argv and argv[0] != "--":
        if argv[0] == "--interval" and len(argv) > 1:
            interval = float(argv[1]) / 1000
            argv = argv[2:]
        elif argv[0] == "--json":
            as_json = True
            argv = argv[1:]
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    seen = {}
    t0 = time.monotonic()
    p = subprocess.Popen(argv[1:])
    scan = 0
    pids = {p.pid}
    while p.poll() is None:
        if scan % 10 == 0:
            pids = children_of({p.pid})
        scan += 1
        sample(pids, seen)
        time.sleep(interval)
    wall = time.monotonic() - t0
    by_kind = {}
    for pname, tname, ns, vol, invol in seen.values():
        k = kind(pname, tname)
        c = by_kind.setdefault(k, [0.0, 0, 0, 0])
        c[0] += ns / 1e9
        c[1] += 1
        c[2] += vol
        c[3] += invol
    total = sum(c[0] for c in by_kind.values())
    if as_json:
        print(json.dumps({"wall_s": wall, "cpu_s": total,
                          "kinds": {k: {"cpu_s": c[0], "threads": c[1], "voluntary": c[2],
                                        "involuntary": c[3]}
                                    for k, c in by_kind.items()}}))
    else:
        print("thread_cpu: wall %.2f s, CPU %.2f s (%.2f cores)" % (wall, total, total / wall),
              file=sys.stderr)
        print("  %-30s %7s %8s %6s %9s %9s" % ("kind", "threads", "CPU s", "%", "wake-ups",
                                               "preempted"), file=sys.stderr)
        for k, c in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
            print("  %-30s %7d %8.3f %6.1f %9d %9d"
                  % (k, c[1], c[0], 100 * c[0] / total if total else 0, c[2], c[3]),
                  file=sys.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
