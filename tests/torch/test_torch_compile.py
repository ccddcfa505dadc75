#!/usr/bin/env python3
"""test_torch_compile.py: torch.compile (Inductor + Triton) runs on the simulated device and
its kernels are in the trace.  One rank trains a compiled MLP (Linear, GELU, LayerNorm,
Linear) three SGD steps under dpro-run, in the simple physics: Triton compiles its launcher
against the stand-in libcuda (simrun sets TRITON_LIBCUDA_PATH), loads each cubin with
cuModuleLoadData and launches through the driver.  The trace must hold Inductor's kernels
(triton_* names, read from the cubins' symbol tables), each at least once a step,
each linked to the cuLaunchKernel call that made it with its grid and block, each timed by
the device's rule for Triton kernels (memory class, 48 bytes per thread: 3 us + bytes /
1.5 TB/s here); one of their cached cubins, loaded again, finds its kernel by the name in
its symbol table (with the registers the cubin gives) and no other name.  Then two ranks
train DistributedDataParallel over the compiled module: the gradients' all-reduces and the
Triton kernels are in both traces, the parameters and gradients agree (their bytes: kernels
compute nothing, copies and collectives move data).

Inductor's and Triton's caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) live in the build
tree, tests/torch/compile-cache: the first run compiles (about a minute on a loaded
2-core machine), later ones load the cached kernels, which still go through the driver's
module calls.  Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchlib import (BUILD, DPRO_INFO as dpro_info, DPRO_RUN as dpro_run,  # noqa: E402
                      LIBDIR, SIMRUN as simrun, TRACE_DUMP as trace_dump, VENV_PY as venv_py, check,
                      finish, require_torch, sanitizer_env)

require_torch(simrun, dpro_run, dpro_info, trace_dump)

STEPS = 3
TRAIN = r"""
import os, sys, torch
ddp = len(sys.argv) > 1 and sys.argv[1] == "ddp"
if ddp:
    import torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
torch.manual_seed(int(os.environ.get("RANK", "0")))
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                        torch.nn.Linear(128, 10)).cuda()
# DDP over the compiled module: torch.compile(DDP(m)) graph-breaks at DDP's forward in torch
# 2.15 (Dynamo skips DistributedDataParallel._inside_ddp_forward) and runs eager.
cm = torch.compile(m)
if ddp:
    cm = torch.nn.parallel.DistributedDataParallel(cm)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(32, 64).cuda()
for i in range(%d):
    opt.zero_grad()
    cm(x).float().pow(2).mean().backward()
    opt.step()
torch.cuda.synchronize()


def checksum(tensors):
    # the bytes, read on the host (the device's kernels compute nothing; copies are real)
    total = 0
    for t in tensors:
        b = t.detach().cpu().contiguous().view(-1).view(torch.uint8).to(torch.int64)
        w = torch.arange(1, b.numel() + 1, dtype=torch.int64) %% 65521
        total = (total * 1000003 + int((b * w).sum())) %% (1 << 61)
    return total


result = "ok %%d %%d" %% (checksum(m.parameters()), checksum(p.grad for p in m.parameters()))
print(result)
# each rank's result in a file of its own too: two ranks' stdout share one pipe
with open(os.path.join(os.environ["COMPILE_RESULTS"], "rank%%s" %% os.environ.get("RANK", "0")),
          "w") as f:
    f.write(result + "\n")
from triton.backends.nvidia.driver import libcuda_dirs
print("libcuda", libcuda_dirs()[0])
if ddp:
    dist.destroy_process_group()
""" % STEPS

# The device's rule for Triton kernels in the simple physics (tests/simgpu/README.md).
BYTES_PER_THREAD = 48
SIMPLE_US = 3.0
HBM_BPS = 1.5e12


def environment():
    env = sanitizer_env(os.environ)
    env["SIMGPU_PHYSICS"] = "simple"
    cache = os.path.join(BUILD, "tests", "torch", "compile-cache")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    env.pop("TRITON_LIBCUDA_PATH", None)  # simrun's to set
    return env


def run_traced(env, out, ranks, args):
    """Runs TRAIN on `ranks` ranks under dpro-run into out; returns the completed process."""
    cmd = [dpro_run, "-o", out, "--", simrun, "-n", str(ranks), "--timeout", "500", "--",
           venv_py, "-c", TRAIN] + args
    results = out + "-results"
    os.makedirs(results, exist_ok=True)
    return subprocess.run(cmd, env=dict(env, COMPILE_RESULTS=results), capture_output=True,
                          text=True, timeout=600)


def rank_results(out, ranks):
    """Each rank's result line (ok PARAMS GRADS), split, from the files run_traced's job
    wrote; None for a rank that wrote none."""
    got = []
    for rank in range(ranks):
        path = os.path.join(out + "-results", "rank%d" % rank)
        got.append(open(path).read().split() if os.path.exists(path) else None)
    return got


def trace_events(path):
    """The events of the trace file or directory path (trace-dump's first line), or None."""
    d = subprocess.run([trace_dump, path], capture_output=True, text=True, timeout=60)
    if not check(d.returncode == 0 and d.stdout, "trace-dump %s: %s" % (path, d.stderr[-500:])):
        return None
    return json.loads(d.stdout.splitlines()[0])["events"]


def check_triton_kernels(ev, what):
    """Checks the Triton kernels of events ev: each name launched once a step, each linked to
    its cuLaunchKernel call, each timed by the rule; returns their names."""
    launches = {e["corr"]: e for e in ev if e["kind"] == "api" and "LaunchKernel" in e["name"]}
    tk = [e for e in ev if e["kind"] == "kernel" and e["name"].startswith("triton_")]
    names = {}
    for k in tk:
        names[k["name"]] = names.get(k["name"], 0) + 1
    check(len(names) >= 2, "%s: Inductor's Triton kernels in the trace: %s" % (what, names))
    # At least once a step: a first compile also launches each candidate while it
    # benchmarks (Inductor's autotuning), a cached one does not.
    check(all(n >= STEPS for n in names.values()),
          "%s: each Triton kernel at least once per step (%d steps): %s" % (what, STEPS, names))
    for k in tk:
        call = launches.get(k["corr"])
        check(call is not None and call["name"].startswith("cuLaunchKernel")
              and call["name2"] == k["name"],
              "%s: %s comes from the cuLaunchKernel call naming it (%s)"
              % (what, k["name"][:60], call and (call["name"], call["name2"][:60])))
        threads = 1
        for d in k["grid"] + k["block"]:
            threads *= d
        want = SIMPLE_US + BYTES_PER_THREAD * threads / HBM_BPS * 1e6
        got = (k["t1"] - k["t0"]) / 1000.0
        check(abs(got - want) < 0.05 * want,
              "%s: %s on grid %s block %s took %.2f us, the rule says %.2f us"
              % (what, k["name"][:60], k["grid"], k["block"], got, want))
    return names


# Loads a cubin Triton made through the stand-in driver: its kernel is found by the name
# in its symbol table, with the registers the cubin says, and another name is not found.
LOAD_CUBIN = r"""
import ctypes, os, sys
cu = ctypes.CDLL("libcuda.so.1")
dev, v = ctypes.c_int(), ctypes.c_int()
ctx, mod, f = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
name = os.path.basename(sys.argv[1])[:-len(".cubin")].encode()
print("load", cu.cuModuleLoadData(ctypes.byref(mod), open(sys.argv[1], "rb").read()))
print("get", cu.cuModuleGetFunction(ctypes.byref(f), mod, name))
print("regs", cu.cuFuncGetAttribute(ctypes.byref(v), 4, f), v.value)
print("other", cu.cuModuleGetFunction(ctypes.byref(f), mod, name + b"_not_there"))
"""


def check_cubin(env, names):
    """Checks one cached cubin of the kernels `names` through the stand-in's module calls."""
    cubins = []
    for root, _, files in os.walk(env["TRITON_CACHE_DIR"]):
        cubins += [os.path.join(root, f) for f in files
                   if f.endswith(".cubin") and f[:-len(".cubin")] in names]
    if not check(cubins, "a cached cubin of %s" % sorted(names)):
        return
    r = subprocess.run([simrun, "-n", "1", "--timeout", "120", "--", venv_py, "-c", LOAD_CUBIN,
                        cubins[0]], env=env, capture_output=True, text=True, timeout=180)
    got = dict(line.split(None, 1) for line in r.stdout.splitlines() if " " in line)
    regs = got.get("regs", "-1 0").split()
    check(r.returncode == 0 and got.get("load") == "0" and got.get("get") == "0"
          and regs[0] == "0" and int(regs[1]) > 0 and got.get("other") == "500",
          "%s: loaded, found by its name with its registers, another name "
          "CUDA_ERROR_NOT_FOUND (500): %s %s" % (os.path.basename(cubins[0]), got,
                                                   r.stderr[-500:]))


env = environment()
tmp = tempfile.mkdtemp(prefix="dpro-torch-compile-")
try:
    # 1. one rank
    out = os.path.join(tmp, "one")
    r = run_traced(env, out, 1, [])
    if check(r.returncode == 0 and "ok" in r.stdout.split(),
             "torch.compile on one rank under dpro-run (rc %d): %s"
             % (r.returncode, r.stderr[-3000:]), say_ok=True):
        dirs = [line.split(None, 1)[1] for line in r.stdout.splitlines()
                if line.startswith("libcuda ")]
        check(dirs == [os.path.realpath(LIBDIR)],
              "Triton links against the stand-in libcuda (simrun's TRITON_LIBCUDA_PATH): %s"
              % dirs)
        ev = trace_events(out)
        if ev is not None:
            names = check_triton_kernels(ev, "1 rank")
            print("1 rank: Triton kernels %s" % names)
            check_cubin(env, names)
        info = subprocess.run([dpro_info, "--json", "--kernels=50", out], capture_output=True,
                              text=True, timeout=60)
        if check(info.returncode == 0, "dpro-info: %s" % info.stderr):
            top = json.loads(info.stdout)["kernels"]["all"]["top_kernels"]
            check(any(k["name"].startswith("triton_") for k in top),
                  "dpro-info --kernels names the Triton kernels: %s" % [k["name"] for k in top])

    # 2. two ranks, DistributedDataParallel under torch.compile
    out = os.path.join(tmp, "ddp")
    r = run_traced(env, out, 2, ["ddp"])
    oks = rank_results(out, 2)
    if check(r.returncode == 0 and None not in oks,
             "DDP + torch.compile on two ranks under dpro-run (rc %d; results %s): %s\nstdout: %s"
             % (r.returncode, oks, r.stderr[-3000:], r.stdout[-2000:]), say_ok=True):
        check(oks[0][1:] == oks[1][1:], "the ranks' parameters and gradients agree: %s" % oks)
        files = sorted(f for f in os.listdir(out) if f.endswith(".dpro"))
        check(len(files) == 2, "two rank traces: %s" % files)
        for f in files:
            ev = trace_events(os.path.join(out, f))
            if ev is None:
                continue
            check_triton_kernels(ev, f)
            ar = [e for e in ev if e["kind"] == "collective" and e["name"] == "ncclAllReduce"]
            check(len(ar) >= STEPS, "%s: the gradients' all-reduces (%d)" % (f, len(ar)))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
