#!/usr/bin/env python3
"""make_et_fixture.py OUTDIR: records a PyTorch execution trace (ExecutionTraceObserver)
and a Kineto trace (torch.profiler) of the same training steps of a small MLP, the pair
that `dpro-import et` joins. Run it with real torch on the simulated device:

  _build/tests/simgpu/simrun -n 1 -- _build/venv/bin/python \\
      tests/import/et/make_et_fixture.py tests/import/fixtures

It writes OUTDIR/et-mlp.et.json.gz and OUTDIR/et-mlp.kineto.json.gz (gzip -9: the
committed fixture pair, tests/import/test_import_et.sh reads it)."""
import gzip
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

out = sys.argv[1] if len(sys.argv) > 1 else "."
tmp = tempfile.mkdtemp(prefix="dpro-et-")
et_path = os.path.join(tmp, "et.json")
kineto_path = os.path.join(tmp, "kineto.json")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 64, device="cuda")
y = torch.randint(0, 10, (32,), device="cuda")


def step():
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()


step()  # warm-up, outside both traces
torch.cuda.synchronize()
et = ExecutionTraceObserver()
et.register_callback(et_path)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
             execution_trace_observer=et) as prof:
    for _ in range(3):
        step()
        torch.cuda.synchronize()
        prof.step()
    # the simulated CUPTI hands its records over every SIMGPU_CUPTI_DELIVER_MS (200 ms),
    # and Kineto's flush at the stop does not wait for them: give it one delivery
    time.sleep(0.5)
prof.export_chrome_trace(kineto_path)
et.unregister_callback()

os.makedirs(out, exist_ok=True)
for src, name in ((et_path, "et-mlp.et.json.gz"), (kineto_path, "et-mlp.kineto.json.gz")):
    with open(src, "rb") as f, gzip.GzipFile(os.path.join(out, name), "wb", 9, mtime=0) as g:
        shutil.copyfileobj(f, g)
    print(name, os.path.getsize(os.path.join(out, name)), "bytes")
shutil.rmtree(tmp)
