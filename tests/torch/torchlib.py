"""torchlib: what the torch tests share: the build tree's paths, and the rule for when
they run. A torch test skips (77) when the build has no CUDA headers (no stand-ins), when
DPRO_TORCH=0 turns the torch tests off, or when the build tree has no venv with torch
(make venv), unless CI=true, where that fails it; a program it needs that is not built
fails it; and what they read from a trace."""
import json
import os
import subprocess
import sys

BUILD = os.environ.get("top_builddir", os.getcwd())
VENV_PY = os.path.join(BUILD, "venv", "bin", "python")
SIMRUN = os.path.join(BUILD, "tests", "simgpu", "simrun")
LIBDIR = os.path.join(BUILD, "tests", "simgpu", ".libs")
DPRO_RUN = os.path.join(BUILD, "tools", "dpro-run")
DPRO_INFO = os.path.join(BUILD, "tools", "dpro-info")
TRACE_DUMP = os.path.join(BUILD, "tests", "collector", "trace-dump")

failures = 0  # the checks failed so far (check); finish() exits by it


def check(cond, msg, say_ok=False):
    """Counts a failed check and prints it (FAIL: msg); with say_ok, a passed one too
    (ok: msg). Returns cond."""
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + msg)
    elif say_ok:
        print("ok:   " + msg)
    return cond


def finish():
    """Ends the test: exit 1 if a check failed, PASS and 0 otherwise."""
    if failures:
        sys.exit(1)
    print("PASS")
    sys.exit(0)


def sanitizer_env(env):
    """Returns env for an uninstrumented python that loads instrumented stand-ins and
    collector (the sanitizer builds): their ASan runtime preloaded first."""
    import subprocess
    env = dict(env)
    out = subprocess.run(["ldd", os.path.join(LIBDIR, "libcudart.so.13")],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith("libasan.so"):
            env["LD_PRELOAD"] = parts[2]
            env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    return env


def require_torch(*programs):
    """Exits 77 (skip, saying why) unless torch can run here, 1 if one of programs is not
    built; returns otherwise."""
    if os.environ.get("HAVE_CUDA", "1") == "0":
        print("SKIP: configured without the CUDA headers: no stand-ins")
        sys.exit(77)
    if os.environ.get("DPRO_TORCH") == "0":
        print("SKIP: DPRO_TORCH=0: the torch tests are off")
        sys.exit(77)
    if not os.path.exists(os.path.join(BUILD, "venv", ".dpro-torch-stamp")):
        if os.environ.get("CI") == "true":
            print("FAIL: CI=true: the torch tests must run, and the build tree has no venv "
                  "with torch (make venv; DPRO_TORCH=0 turns them off)")
            sys.exit(1)
        print("SKIP: no venv with torch in the build tree (make venv; DPRO_TORCH=0 skips it)")
        sys.exit(77)
    for p in programs:
        if not os.path.exists(p):
            print("FAIL: %s is not built" % p)
            sys.exit(1)


def step_device_ops(path):
    """The device operations (kernels, copies, memsets) of each step of the trace file path,
    a step ending with a cudaDeviceSynchronize of the main thread (`python`): the operations
    that start between the end of one and the end of the next; None when the trace cannot
    be read."""
    d = subprocess.run([TRACE_DUMP, path], capture_output=True, text=True, timeout=60)
    if d.returncode != 0 or not d.stdout:
        return None
    t = json.loads(d.stdout.splitlines()[0])
    main = {int(k) for k, v in t["thread_names"].items() if v == "python"}
    ends = sorted(e["t1"] for e in t["events"] if e["kind"] in ("api", "sync")
                  and e["name"] == "cudaDeviceSynchronize" and e["tid"] in main)
    ops = sorted(e["t0"] for e in t["events"] if e["kind"] in ("kernel", "memcpy", "memset"))
    return [sum(1 for x in ops if a < x <= b) for a, b in zip(ends, ends[1:])]


def step_allreduces(path):
    """The bytes of DDP's gradient all-reduces in the last step of the trace file path (those
    of the autograd thread, from the end back to the gradients' total: DDP's first step
    all-reduces them all in one bucket, its buckets being built after it); None when the
    trace cannot be read or does not add up so."""
    d = subprocess.run([TRACE_DUMP, path], capture_output=True, text=True, timeout=60)
    if d.returncode != 0 or not d.stdout:
        return None
    t = json.loads(d.stdout.splitlines()[0])
    bwd = {int(k) for k, v in t["thread_names"].items() if v.startswith("pt_autograd")}
    ar = [e["bytes"] for e in sorted(t["events"], key=lambda e: e["t0"])
          if e["kind"] == "collective" and e["name"] == "ncclAllReduce" and e["tid"] in bwd]
    last = []
    while len(ar) > 1 and sum(last) < ar[0]:
        last.insert(0, ar.pop())
    return last if ar and sum(last) == ar[0] else None
