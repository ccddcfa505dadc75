#!/usr/bin/env python3
"""test_census.py: nothing that torch's libraries import from the libraries listed in
ENFORCE is missing from the simulated device's stand-ins (tests/torch/census.py); the
census table of all six is printed.  Skips (77) when the build tree has no venv with torch
(`make venv`; tools/quickstart makes it unless DPRO_TORCH=0)."""
import os
import subprocess
import sys

# The stand-ins that export everything torch imports; grows as they are completed.
ENFORCE = ["libcudart.so.13", "libcuda.so.1", "libnccl.so.2", "libcupti.so.13", "libcublas.so.13",
           "libcublasLt.so.13"]

src = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
build = os.environ.get("top_builddir", os.getcwd())
if os.environ.get("HAVE_CUDA", "1") == "0":
    print("SKIP: configured without the CUDA headers: no stand-ins")
    sys.exit(77)
cmd = [sys.executable, os.path.join(src, "tests", "torch", "census.py"), "--missing",
       "--venv", os.path.join(build, "venv"),
       "--stand-ins", os.path.join(build, "tests", "simgpu", ".libs")]
if ENFORCE:
    cmd += ["--enforce", ",".join(ENFORCE)]
r = subprocess.run(cmd)
if r.returncode == 77 or (r.returncode == 2 and not ENFORCE and
                          not os.path.isdir(os.path.join(build, "venv"))):
    print("SKIP: no venv with torch in the build tree (make venv; DPRO_TORCH=0 skips it)")
    sys.exit(77)
sys.exit(r.returncode)
