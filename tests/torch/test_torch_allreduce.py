#!/usr/bin/env python3
"""test_torch_allreduce.py: torch.distributed with the NCCL backend on the simulated
device: 2 ranks under simrun (the env:// rendezvous simrun sets up) initialise the process
group, all-reduce a 1024-float tensor, synchronise and destroy the group; plain, then under
dpro-run, where each rank's trace must hold one ncclAllReduce of 1024 float32 (4096 bytes)
on one communicator shared by both ranks, the same sequence number on both, and its NCCL
kernel.  Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import json
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchlib import (DPRO_RUN as dpro_run, LIBDIR as libdir,  # noqa: E402
                      SIMRUN as simrun, TRACE_DUMP as trace_dump, VENV_PY as venv_py,
                      check, finish, require_torch)

require_torch(simrun, dpro_run, trace_dump)

SCRIPT = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
t = torch.ones(1024, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
r, w = dist.get_rank(), dist.get_world_size()
dist.destroy_process_group()
os.write(1, ("done %d %d\n" % (r, w)).encode())
"""



env = dict(os.environ)
env["SIMGPU_PHYSICS"] = "simple"
out = subprocess.run(["ldd", os.path.join(libdir, "libcudart.so.13")], capture_output=True,
                     text=True).stdout
for line in out.splitlines():
    parts = line.split()
    if len(parts) >= 3 and parts[0].startswith("libasan.so"):
        env["LD_PRELOAD"] = parts[2]
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
ranks = [simrun, "-n", "2", "--timeout", "90", "--", venv_py, "-c", SCRIPT]
WANT = ["done 0 2", "done 1 2"]

r = subprocess.run(ranks, env=env, capture_output=True, text=True, timeout=150)
check(r.returncode == 0 and sorted(r.stdout.strip().splitlines()) == WANT,
      "2 ranks under simrun (rc %d): %r %s" % (r.returncode, r.stdout, r.stderr[-3000:]))

tmp = tempfile.mkdtemp(prefix="dpro-torch-allreduce-")
try:
    r = subprocess.run([dpro_run, "-o", tmp, "--"] + ranks, env=env, capture_output=True,
                       text=True, timeout=150)
    check(r.returncode == 0 and sorted(r.stdout.strip().splitlines()) == WANT,
          "2 ranks under dpro-run (rc %d): %r %s" % (r.returncode, r.stdout, r.stderr[-3000:]))
    files = sorted(glob.glob(os.path.join(tmp, "rank*.dpro")))
    check(len(files) == 2, "one trace per rank: %s" % files)
    colls = []
    for f in files:
        d = subprocess.run([trace_dump, f], capture_output=True, text=True, timeout=30)
        if not check(d.returncode == 0 and d.stdout, "trace-dump %s: %s" % (f, d.stderr)):
            continue
        ev = json.loads(d.stdout.splitlines()[0])["events"]
        c = [e for e in ev if e["kind"] == "collective"]
        k = [e for e in ev if e["kind"] == "kernel" and e["name"].startswith("ncclDevKernel_AllReduce")]
        check(len(c) == 1 and c[0]["name"] == "ncclAllReduce" and c[0]["count"] == 1024 and
              c[0]["bytes"] == 4096 and c[0]["dtype"] == 7,
              "%s: one ncclAllReduce of 1024 float32: %s"
              % (os.path.basename(f), [(e["name"], e["count"], e["bytes"], e["dtype"]) for e in c]))
        check(len(k) == 1, "%s: one NCCL all-reduce kernel: %d" % (os.path.basename(f), len(k)))
        colls += c
    if len(colls) == 2:
        check(colls[0]["comm"] == colls[1]["comm"] and colls[0]["comm"] != 0 and
              colls[0]["seq"] == colls[1]["seq"],
              "both ranks' all-reduce on one communicator, same sequence number: %s"
              % [(c["comm"], c["seq"]) for c in colls])
    print("2 ranks: %d all-reduces traced" % len(colls))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
