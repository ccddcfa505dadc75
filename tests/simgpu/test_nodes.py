#!/usr/bin/env python3
"""Simulated nodes (simrun --gpus-per-node, world physics): ranks laid out on nodes as
torchrun --nnodes places them, each node its own host name, and what dpro learns of the
layout from the traces alone.
- Layout: `simrun -n 4 --gpus-per-node 2` gives ranks 0-1 the host simnode0 and 2-3
  simnode1, with LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and SIMGPU_GPUS_PER_NODE to
  match; without the option every rank is on the machine's own host, as before.
- Traces: ddp-sim on 4 ranks under the collector, on one node and on two: the collector
  records each rank's host (its trace file is named after it, dpro-info lists it).
- Learned, not told: dpro-replay's fitted all-reduce bandwidth (`collective_model`) on the
  two-node job is well under the one-node job's (the world's inter-node network against
  NVLink; dpro reads no device setting, only the recorded collectives).
- The network as a user measures it: nccl-perf (nccl-tests' all_reduce_perf) on two
  nodes of one GPU prints a row a size, sizes doubling from 8 B, busbw = algbw on 2 ranks,
  and a bus bandwidth at its largest sizes well under the same sweep's on one node of 2.
Nothing is timed against the wall clock but the sweep's bandwidths, compared as a ratio. Skips, saying why, when the machine refuses the
UTS namespace a simulated node needs (unshare needs CAP_SYS_ADMIN)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "replay"))
from replay_testlib import (  # noqa: E402
    DDP_SIM, DPRO_RUN, LIBDIR, REPLAY, SIMRUN, check, exit_status, missing, traced_env)

INFO = os.path.join(os.path.dirname(REPLAY), "dpro-info")
NCCL_PERF = os.path.join(os.path.dirname(SIMRUN), "nccl-perf")
WORLD = {"SIMGPU_PHYSICS": "world", "SIMGPU_WORLD_SEED": "424242"}
JOB = ["--preset", "gpt", "--layers", "2", "--warmup", "2", "--iterations", "8"]


def layout(gpus_per_node):
    """Each rank's (host, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, SIMGPU_GPUS_PER_NODE)
    under simrun -n 4 [--gpus-per-node K], or None when the namespace is refused."""
    extra = ["--gpus-per-node", str(gpus_per_node)] if gpus_per_node else []
    show = 'echo "$RANK $(hostname) $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK ' \
           '${SIMGPU_GPUS_PER_NODE:--}"'
    p = subprocess.run([SIMRUN, "-n", "4", "--simgpu-libdir", LIBDIR] + extra +
                       ["--", "sh", "-c", show], capture_output=True, text=True, timeout=60)
    if "cannot have its node's host name" in p.stderr:
        print("skip: " + p.stderr.strip().splitlines()[0])
        return None
    check(p.returncode == 0, "simrun %s ran (rc %d): %s" % (extra, p.returncode, p.stderr[-300:]))
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        rows[int(f[0])] = tuple(f[1:])
    return rows


def record(tmp, name, gpus_per_node):
    """ddp-sim on 4 ranks in the world physics under the collector; returns the trace dir."""
    out = os.path.join(tmp, name)
    extra = ["--gpus-per-node", str(gpus_per_node)] if gpus_per_node else []
    cmd = [DPRO_RUN, "-o", out, "--", SIMRUN, "-n", "4", "--simgpu-libdir", LIBDIR,
           "--timeout", "200"] + extra + ["--", DDP_SIM] + JOB
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=traced_env(**WORLD))
    check(p.returncode == 0, "%s: the traced job ran (rc %d): %s" %
          (name, p.returncode, p.stderr[-500:]))
    return out


def allreduce_bandwidth(trace_dir):
    """dpro-replay's fitted all-reduce bandwidth (GB/s) of trace_dir, or None."""
    p = subprocess.run([REPLAY, trace_dir, "--json"], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "dpro-replay %s (rc %d): %s" %
          (trace_dir, p.returncode, p.stderr[-300:]))
    if p.returncode != 0:
        return None
    for m in json.loads(p.stdout).get("collective_model", []):
        if m.get("op") == "allreduce":
            return m.get("bandwidth_GBps")
    return None


def sweep(gpus_per_node):
    """nccl-perf's rows (size, count, time us, algbw, busbw) on 2 ranks in the world, on
    nodes of gpus_per_node."""
    p = subprocess.run([SIMRUN, "-n", "2", "--simgpu-libdir", LIBDIR, "--gpus-per-node",
                        str(gpus_per_node), "--timeout", "60", "--", NCCL_PERF, "-e", "64M"],
                       capture_output=True, text=True, timeout=90,
                       env=dict(os.environ, **WORLD))
    check(p.returncode == 0, "nccl-perf on nodes of %d ran (rc %d): %s"
          % (gpus_per_node, p.returncode, p.stderr[-300:]))
    return [tuple(float(x) for x in line.split()) for line in p.stdout.splitlines()
            if line and not line.startswith("#")]


def check_sweep():
    across, within = sweep(1), sweep(2)
    sizes = [8 * 2 ** k for k in range(24)]
    check([r[0] for r in across] == sizes and all(len(r) == 5 for r in across),
          "nccl-perf: a row a size from 8 B to 64 MiB: %s" % [r[0] for r in across])
    check(all(abs(r[3] - r[4]) <= 0.011 and r[1] * 4 == r[0] for r in across),
          "nccl-perf on 2 ranks: busbw = algbw, count = size / 4")
    if len(across) == len(sizes) and len(within) == len(sizes):
        bw2, bw1 = across[-1][4], within[-1][4]
        print("nccl-perf at 64 MiB: busbw %.1f GB/s across two nodes, %.1f GB/s on one; "
              "8 B: %.1f us, %.1f us" % (bw2, bw1, across[0][2], within[0][2]))
        check(0 < bw2 < 0.5 * bw1, "the network's busbw is well under NVLink's")


def main():
    if missing([SIMRUN, DDP_SIM, DPRO_RUN, REPLAY, INFO, NCCL_PERF]):
        return 77
    two = layout(2)
    if two is None:
        return 77
    want = {0: ("simnode0", "0", "2", "0", "2"), 1: ("simnode0", "1", "2", "0", "2"),
            2: ("simnode1", "0", "2", "1", "2"), 3: ("simnode1", "1", "2", "1", "2")}
    check(two == want, "--gpus-per-node 2: host, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, "
          "SIMGPU_GPUS_PER_NODE per rank %s" % two)
    one = layout(0)
    host = os.uname().nodename
    check(one and all(one[r] == (host, str(r), "4", "0", "-") for r in range(4)),
          "without it: every rank on this host (%s), one node of 4: %s" % (host, one))

    check_sweep()
    tmp = tempfile.mkdtemp(prefix="dpro-nodes-")
    try:
        d1, d2 = record(tmp, "one-node", 0), record(tmp, "two-nodes", 2)
        names = sorted(os.listdir(d2)) if os.path.isdir(d2) else []
        hosts = {}
        for n in names:
            m = re.match(r"rank(\d+)-(simnode\d+)-", n)
            if m:
                hosts[int(m.group(1))] = m.group(2)
        check(hosts == {0: "simnode0", 1: "simnode0", 2: "simnode1", 3: "simnode1"},
              "the collector recorded each rank's node as its host: %s" % names)
        p = subprocess.run([INFO, d2], capture_output=True, text=True, timeout=60)
        col = [line.split()[1] for line in p.stdout.splitlines()
               if re.match(r"\d+\s+\S+\s+\d+\s.*\.dpro$", line)]
        check(p.returncode == 0 and sorted(col) == ["simnode0"] * 2 + ["simnode1"] * 2,
              "dpro-info lists two ranks on each host: %s" % col)
        b1, b2 = allreduce_bandwidth(d1), allreduce_bandwidth(d2)
        print("fitted all-reduce bandwidth: one node %s GB/s, two nodes %s GB/s" % (b1, b2))
        check(b1 is not None and b2 is not None and b2 < 0.5 * b1,
              "the two-node job's all-reduce is fitted well under the one-node job's")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
