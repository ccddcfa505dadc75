#!/usr/bin/env python3
"""test_torch_basic.py: stock PyTorch starts on the simulated device and runs simple ops.
Under simrun a rank imports torch, sees one CUDA device, fills a tensor with zeros,
multiplies two random 256x256 matrices on the device (cuBLAS) and synchronises; then the
same script runs under dpro-run and the trace must hold the memset, the two random-fill
kernels and the one GEMM (named as cuBLAS names it on the device, on a grid of 128x128
tiles: 4 blocks), each kernel linked to the launch call that made it with the grid and
block that call gave (nvcc's __cudaPushCallConfiguration / __cudaPopCallConfiguration for
torch's own kernels).  Then a small MLP trains 3 SGD steps (nn.Linear's addmm on cuBLASLt,
autograd, the caching allocator), is captured into a CUDA graph (torch.cuda.graph: capture
info, capture mode, instantiation, the node count) and replayed, and runs under bf16
autocast.  Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchlib import (DPRO_INFO as dpro_info, DPRO_RUN as dpro_run,  # noqa: E402
                      LIBDIR as libdir, SIMRUN as simrun, TRACE_DUMP as trace_dump,
                      VENV_PY as venv_py, check, finish, require_torch)

require_torch(simrun, dpro_run, dpro_info, trace_dump)

SCRIPT = ("import torch; print(torch.cuda.is_available(), torch.cuda.device_count()); "
          "x = torch.zeros(4, device='cuda'); "
          "y = torch.randn(256, 256, device='cuda') @ torch.randn(256, 256, device='cuda'); "
          "torch.cuda.synchronize(); print('ok')")

TRAIN = r"""
import torch
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(32, 64, device="cuda")
for i in range(3):
    m(x).float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
print("train", torch.cuda.max_memory_allocated(), torch.cuda.memory_reserved())
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = m(x)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    y = m(x)
g.replay()
torch.cuda.synchronize()
print("graph")
with torch.autocast("cuda", dtype=torch.bfloat16):
    z = m(x)
torch.cuda.synchronize()
print("autocast", z.dtype)
"""



def environment():
    """An uninstrumented python loading instrumented stand-ins (sanitizer builds) needs
    their sanitizer runtime first."""
    env = dict(os.environ)
    env["SIMGPU_PHYSICS"] = "simple"
    out = subprocess.run(["ldd", os.path.join(libdir, "libcudart.so.13")],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith("libasan.so"):
            env["LD_PRELOAD"] = parts[2]
            env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    return env


env = environment()
rank = [simrun, "-n", "1", "--timeout", "60", "--", venv_py, "-c", SCRIPT]

# 1. plain, under simrun
r = subprocess.run(rank, env=env, capture_output=True, text=True, timeout=120)
lines = r.stdout.split()
check(r.returncode == 0 and "ok" in lines,
      "the script under simrun (rc %d): %s" % (r.returncode, r.stderr[-3000:]))
check(r.stdout.startswith("True 1"),
      "torch.cuda.is_available(), device_count(): %r" % r.stdout[:80])

# 2. under the collector
out = tempfile.mkdtemp(prefix="dpro-torch-basic-")
try:
    r = subprocess.run([dpro_run, "-o", out, "--"] + rank, env=env, capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0 and "ok" in r.stdout.split(),
          "the script under dpro-run (rc %d): %s" % (r.returncode, r.stderr[-3000:]))
    info = subprocess.run([dpro_info, "--json", "--kernels=50", out], capture_output=True,
                          text=True, timeout=30)
    if check(info.returncode == 0, "dpro-info: %s" % info.stderr):
        j = json.loads(info.stdout)
        seen = {k["name"]: k["count"] for k in j["kernels"]["all"]["top_kernels"]}
        gemm = [n for n in seen if "gemm" in n and n.endswith("_cublas")]
        normal = [n for n in seen if "normal_kernel" in n]
        check(len(gemm) == 1 and seen[gemm[0]] == 1, "one cuBLAS GEMM in the trace: %s" % seen)
        check(len(normal) == 1 and seen[normal[0]] == 2,
              "two random-fill (normal) kernels in the trace: %s" % seen)
        check(len(seen) == 2, "no other kernels: %s" % seen)
        check(j["events_by_kind"]["memset"] == 1, "the zeros' memset: %s" % j["events_by_kind"])
    dump = subprocess.run([trace_dump, out], capture_output=True, text=True, timeout=30)
    if check(dump.returncode == 0 and dump.stdout, "trace-dump: %s" % dump.stderr):
        ev = json.loads(dump.stdout.splitlines()[0])["events"]
        launches = {e["corr"]: e for e in ev if e["kind"] == "api" and "Launch" in e["name"]}
        kernels = [e for e in ev if e["kind"] == "kernel"]
        check(len(kernels) == 3, "3 kernels, got %d" % len(kernels))
        for k in kernels:
            call = launches.get(k["corr"])
            check(call is not None and call["name2"] == k["name"],
                  "kernel %s comes from a launch call naming it (%s)"
                  % (k["name"][:60], call and (call["name"], call["name2"][:60])))
            check(min(k["grid"]) >= 1 and min(k["block"]) >= 1,
                  "kernel %s has its launch's grid and block: %s %s"
                  % (k["name"][:60], k["grid"], k["block"]))
            if "gemm" in k["name"]:
                check(k["grid"] == [4, 1, 1] and call and call["name"] == "cudaLaunchKernel",
                      "the GEMM: 4 tiles of 128x128 launched by cudaLaunchKernel: %s %s"
                      % (k["grid"], call and call["name"]))
            else:
                check(call is not None and call["name"] == "__cudaLaunchKernel",
                      "torch's own kernel %s launched through nvcc's __cudaLaunchKernel: %s"
                      % (k["name"][:60], call and call["name"]))
        print("the collector saw %d kernels, %d launches" % (len(kernels), len(launches)))
finally:
    shutil.rmtree(out, ignore_errors=True)

# 3. training steps, a CUDA graph, autocast
r = subprocess.run([simrun, "-n", "1", "--timeout", "60", "--", venv_py, "-c", TRAIN], env=env,
                   capture_output=True, text=True, timeout=120)
got = r.stdout.split()
if check(r.returncode == 0 and got[:1] == ["train"] and len(got) >= 3,
         "training steps (rc %d): %r %s" % (r.returncode, r.stdout, r.stderr[-3000:])):
    peak, reserved = int(got[1]), int(got[2])
    # the caching allocator: 2 MiB segments for small tensors, all of them held
    check(0 < peak <= reserved and reserved % (2 << 20) == 0,
          "max_memory_allocated %d, memory_reserved %d" % (peak, reserved))
check("graph" in got, "CUDA graph capture and replay: %r %s" % (r.stdout, r.stderr[-2000:]))
check("torch.bfloat16" in got, "bf16 autocast: %r" % r.stdout)

finish()
