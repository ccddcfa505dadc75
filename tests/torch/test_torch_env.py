#!/usr/bin/env python3
"""test_torch_env.py: under simrun, torch's libraries bind to the simulated device's
stand-ins although their DT_RPATH points at the nvidia wheels (tests/simgpu/README.md,
"What wins"): a rank loads libtorch_global_deps.so (NEEDED libcudart.so.13, found through
that RPATH) and reports which libcudart.so.13 and libnccl.so.2 its process mapped; both
must be the stand-ins of this build tree.  With SIMRUN_NO_PRELOAD=1 the same rank must map
the wheels' copies (the loader's order that the preload overrides), so the test also
checks the claim it relies on.  Skips (77) without venv/ (make venv; DPRO_TORCH=0)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchlib import BUILD as build, LIBDIR, SIMRUN as simrun, VENV_PY as venv_py  # noqa: E402
from torchlib import check as check_, finish, require_torch  # noqa: E402

libdir = os.path.realpath(LIBDIR)
require_torch()

RANK = r"""
import ctypes, glob, os, sys
sp = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages"))[0]
ctypes.CDLL(os.path.join(sp, "torch", "lib", "libtorch_global_deps.so"))
ctypes.CDLL("libnccl.so.2")  # as ProcessGroupNCCL's libraries find it: by soname
seen = {}
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    for name in ("libcudart.so.13", "libnccl.so.2"):
        if os.path.basename(path).startswith(name):
            seen.setdefault(name, os.path.realpath(path))
line = "%s %s %s\n" % (os.environ["RANK"], seen.get("libcudart.so.13"), seen.get("libnccl.so.2"))
os.write(1, line.encode())  # one write: the ranks share the pipe
"""



def run(env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    # sanitizer builds: instrumented stand-ins in an uninstrumented python (simrun says so
    # itself when it preloads them)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    r = subprocess.run([simrun, "-n", "2", "--timeout", "120", "--", venv_py, "-c", RANK],
                       env=env, capture_output=True, text=True)
    rows = [l.split() for l in r.stdout.splitlines() if l.strip()]
    if r.returncode != 0 or len(rows) != 2:
        print(f"FAIL: simrun {env_extra}: rc {r.returncode}\n{r.stdout}{r.stderr[-2000:]}")
        sys.exit(1)
    return rows


def check(cond, msg):
    """torchlib.check, saying each passed check too."""
    return check_(cond, msg, say_ok=True)


for rank, cudart, nccl in run({}):
    check(cudart.startswith(libdir + "/"), f"rank {rank}: libcudart.so.13 is the stand-in ({cudart})")
    check(nccl.startswith(libdir + "/"), f"rank {rank}: libnccl.so.2 is the stand-in ({nccl})")
for rank, cudart, nccl in run({"SIMRUN_NO_PRELOAD": "1"}):
    check("/site-packages/nvidia/" in cudart,
          f"rank {rank}, no preload: torch's RPATH finds the wheel's libcudart.so.13 ({cudart})")
finish()
