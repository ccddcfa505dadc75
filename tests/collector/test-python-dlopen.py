"""CUDA loaded the way PyTorch loads it: python3 opens an extension module with
dlopen(RTLD_LOCAL) (ctypes.CDLL(path, mode=os.RTLD_LOCAL), as it opens torch/_C.so), the
module links libcudart and libnccl, so those are not in the global scope: the module's calls
bind to the collector's hooks (LD_PRELOAD comes first), and the real functions are out of
reach of dlsym(RTLD_NEXT). The module (fake-torch-ext.c) runs a small training loop on the
simulated device; the module is opened after the collector initialised, as always under
LD_PRELOAD. Checked, for each case against the same run without the collector: the return
codes the module saw, and in the trace the launches, kernels (CUPTI), copies, events, the
all-reduces, allocations and NVTX ranges, with their counts.

Cases: the stand-ins through LD_LIBRARY_PATH (main thread); CUDA first touched from a second
thread, the stand-ins found through the module's RUNPATH only (as torch finds its own copy
through $ORIGIN; CUPTI is then found next to libcudart); a module bundling a private,
renamed copy of the runtime (libcudart-5f1c2a9e.so.13, as auditwheel renames the copies
wheels carry) under dpro-run; two ranks under simrun and dpro-run.

`test-python-dlopen.py --child MODULE main|thread ITERS` is one job: it opens MODULE, runs
the loop (rank and world from RANK / WORLD_SIZE) and prints one JSON line."""
import collections
import ctypes
import json
import os
import sys
import threading

ITERS = 4
LAUNCHES_PER_ITER = 4  # fake_fwd_gemm, fake_fwd_relu, fake_bwd_gemm, fake_sgd
KERNEL_NAMES = ("fake_fwd_gemm", "fake_fwd_relu", "fake_bwd_gemm", "fake_sgd")
GRAD_COUNT = 1 << 18  # float32 gradients all-reduced per iteration
CUDA_ERROR_INVALID_CONFIGURATION = 9
FREES = 2  # cudaFree calls at the end
SYNC_CONTEXT = 4  # DPRO_SYNC_CONTEXT_SYNCHRONIZE


def child(module, mode, iters):
    """One job: opens module RTLD_LOCAL, runs its loop on the main thread or on a second
    one (the main thread then never touches CUDA), prints what it saw as JSON."""
    lib = ctypes.CDLL(module, mode=os.RTLD_LOCAL)
    train = lib.fake_torch_train
    train.restype = ctypes.c_int
    train.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                      ctypes.c_int]
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    codes = (ctypes.c_int * 4096)()
    result = {}

    def body():
        result["cuda_tid"] = threading.get_native_id()
        result["n"] = train(rank, world, iters, codes, len(codes))

    if mode == "thread":
        worker = threading.Thread(target=body)
        worker.start()
        worker.join()
    else:
        body()
    n = result["n"]
    # The module's libraries stayed out of the global scope (the premise of the test).
    global_scope = ctypes.CDLL(None)
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if any(s in os.path.basename(path) for s in ("libcudart", "libnccl", "libcupti")):
                libs.add(path)
    line = json.dumps({"rank": rank, "n": n, "codes": list(codes[:max(n, 0)]),
                       "main_tid": threading.get_native_id(), "cuda_tid": result["cuda_tid"],
                       "global": hasattr(global_scope, "simgpu_register_kernel") or
                       hasattr(global_scope, "pncclAllReduce"),
                       "libs": sorted(libs)})
    # one write (under PIPE_BUF): the ranks under simrun share the pipe
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())
    return 0 if n > 0 else 1


if len(sys.argv) == 5 and sys.argv[1] == "--child":
    sys.exit(child(sys.argv[2], sys.argv[3], int(sys.argv[4])))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
LIBS = os.path.join(ct.BUILD, "tests", "collector", ".libs")
MODULE = os.path.join(LIBS, "fake-torch-ext.so")
BUNDLED = os.path.join(LIBS, "fake-torch-ext-bundled.so")
SIMLIBS = os.path.abspath(os.path.join(ct.BUILD, "tests", "simgpu", ".libs"))
for path in (MODULE, BUNDLED, ct.SIMRUN, ct.DPRO_RUN):
    if not os.path.exists(path):
        print("skip: %s not built" % path)
        sys.exit(ct.SKIP)
SELF = os.path.abspath(__file__)


def job_env(outdir, preload, libpath):
    """The environment of a job: the collector preloaded or not, LD_LIBRARY_PATH to the
    stand-ins or unset (the module's RUNPATH then finds them), nothing of the caller's."""
    env = ct.env_with(outdir, preload=preload)
    if preload:
        # absolute: the collector points NVTX_INJECTION64_PATH at its own path only then
        env["LD_PRELOAD"] = ct.ld_preload(os.path.abspath(ct.COLLECTOR))
    else:
        env = ct.sanitizer_env(env)  # the sanitizer runtime alone, or no LD_PRELOAD
    for k in ("NVTX_INJECTION64_PATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(k, None)
    if libpath:
        env["LD_LIBRARY_PATH"] = SIMLIBS
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


def job_lines(r):
    """The JSON lines the jobs printed, by rank."""
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["rank"]] = d
    return out


def check_trace(doc, label, seen, iters):
    """Checks one rank's trace against what the job did (seen: its JSON line)."""
    meta, ev = doc["meta"], doc["events"]
    ct.check(meta.get("cupti") == "enabled", "%s: cupti enabled (%s)" % (label, meta.get("cupti")))
    ct.check(doc["summary"]["dropped"] == 0, "%s: nothing dropped" % label)
    launches = [e for e in ev if e["kind"] == "api" and e["name"] == "cudaLaunchKernel"]
    failed = [e for e in launches if e["result"] != 0]
    ok = [e for e in launches if e["result"] == 0]
    ct.check(len(launches) == LAUNCHES_PER_ITER * iters + 1 and len(failed) == 1 and
             failed[0]["result"] == CUDA_ERROR_INVALID_CONFIGURATION,
             "%s: %d launches, the bad one with its code %s"
             % (label, len(launches), [e["result"] for e in failed]))
    want_names = {name: iters for name in KERNEL_NAMES}
    ct.check(dict(collections.Counter(e["name2"] for e in ok)) == want_names,
             "%s: launches named after the kernels" % label)
    kernels = [e for e in ev if e["kind"] == "kernel"]
    mine = [e for e in kernels if e["name"] in KERNEL_NAMES]
    nccl = [e for e in kernels if e["name"].startswith("ncclDevKernel_AllReduce")]
    ct.check(dict(collections.Counter(e["name"] for e in mine)) == want_names and
             len(nccl) == iters and len(kernels) == len(mine) + len(nccl),
             "%s: %d kernels from CUPTI (%d ours, %d NCCL)"
             % (label, len(kernels), len(mine), len(nccl)))
    # Every device record links to its call, but for the device synchronisation each
    # cudaFree makes (simgpu records it, CONTEXT_SYNCHRONIZE with cudaFree's id): frees are
    # memory events, which carry no correlation id.
    host = {e["corr"]: e for e in ev if e["kind"] in ("api", "collective")}
    device = [e for e in ev if e["kind"] in ("kernel", "memcpy", "memset", "sync")]
    unlinked = [e for e in device if e["corr"] not in host]
    ct.check(len(unlinked) == FREES and
             all(e["kind"] == "sync" and e["sub"] == SYNC_CONTEXT for e in unlinked),
             "%s: %d device records linked to their call, not the %d of cudaFree (%s)"
             % (label, len(device) - len(unlinked), FREES,
                [(e["kind"], e["sub"]) for e in unlinked]))
    ct.check(all(host[k["corr"]]["stream"] == k["stream"] for k in kernels if k["corr"] in host),
             "%s: launch and kernel name the same stream" % label)
    colls = [e for e in ev if e["kind"] == "collective"]
    ct.check(len(colls) == iters and all(e["name"] == "ncclAllReduce" for e in colls) and
             [e["seq"] for e in colls] == list(range(iters)) and
             all(e["count"] == GRAD_COUNT and e["bytes"] == 4 * GRAD_COUNT for e in colls),
             "%s: %d all-reduces, seq 0..%d, %d floats" % (label, len(colls), iters - 1,
                                                          GRAD_COUNT))
    ct.check(colls and ok and colls[0]["stream"] != ok[0]["stream"],
             "%s: all-reduces on the comm stream, launches on the compute stream" % label)
    copies = [e for e in ev if e["kind"] == "memcpy"]
    copy_calls = [e for e in ev if e["kind"] == "api" and e["name"] == "cudaMemcpyAsync"]
    ct.check(len(copies) == len(copy_calls) == iters, "%s: %d copies" % (label, len(copies)))
    count = collections.Counter(e["name"] for e in ev if e["kind"] == "api")
    ct.check(count["cudaEventRecord"] == 2 * iters and count["cudaStreamWaitEvent"] == 2 * iters
             and count["cudaStreamSynchronize"] == iters,
             "%s: event records %d, waits %d, synchronisations %d"
             % (label, count["cudaEventRecord"], count["cudaStreamWaitEvent"],
                count["cudaStreamSynchronize"]))
    memory = sorted(e["bytes"] for e in ev if e["kind"] == "memory")
    ct.check(memory == [1 << 16, 1 << 16, 4 * GRAD_COUNT, 4 * GRAD_COUNT],
             "%s: 2 allocations and their frees (%s)" % (label, memory))
    steps = [e["name"] for e in ev if e["kind"] == "marker" and e["name"].startswith("step ")]
    ct.check(steps == ["step %d" % i for i in range(iters)],
             "%s: NVTX ranges %s" % (label, steps))
    tids = {e["tid"] for e in ev if e["kind"] in ("api", "collective", "memory", "marker")}
    ct.check(tids == {seen["cuda_tid"]}, "%s: host events on the calling thread %s (%s)"
             % (label, seen["cuda_tid"], sorted(tids)))


def case(label, module, mode, libpath, dpro_run=False):
    """Runs the job without and with the collector; compares; checks the trace."""
    cmd = [sys.executable, SELF, "--child", module, mode, str(ITERS)]
    base = ct.run(cmd, env=job_env(ct.tmpdir(), False, libpath))
    out = ct.tmpdir()
    traced_cmd = [ct.DPRO_RUN, "-o", out, "--"] + cmd if dpro_run else cmd
    traced = ct.run(traced_cmd, env=job_env(out, not dpro_run, libpath))
    want, got = job_lines(base).get(0), job_lines(traced).get(0)
    ct.check(base.returncode == 0 and want is not None,
             "%s: runs without the collector (%s)" % (label, base.stderr[-300:]))
    ct.check(traced.returncode == 0 and got is not None,
             "%s: runs under the collector (%s)" % (label, traced.stderr[-300:]))
    if want is None or got is None:
        return
    ct.check(not want["global"] and not got["global"],
             "%s: the module's libraries are not in the global scope" % label)
    ct.check(got["codes"] == want["codes"],
             "%s: the %d return codes are those without the collector" % (label, got["n"]))
    if mode == "thread":
        ct.check(got["cuda_tid"] != got["main_tid"],
                 "%s: CUDA first touched from a second thread" % label)
    files = ct.traces(out)
    ct.check(len(files) == 1, "%s: one trace (%d)" % (label, len(files)))
    if files:
        check_trace(ct.dump(files[0])[0], label, got, ITERS)
    return got


# The stand-ins through LD_LIBRARY_PATH, the loop on the main thread.
case("LD_LIBRARY_PATH", MODULE, "main", True)

# A second thread, the stand-ins through the module's RUNPATH only.
seen = case("thread+RUNPATH", MODULE, "thread", False)
if seen:
    ct.check(any(p.startswith(SIMLIBS + "/libcupti") for p in seen["libs"]),
             "thread+RUNPATH: CUPTI found next to libcudart (%s)" % seen["libs"])

# A bundled, renamed runtime (no soname the collector knows), under dpro-run.
seen = case("bundled libcudart-5f1c2a9e", BUNDLED, "thread", True, dpro_run=True)
if seen:
    ct.check([os.path.basename(p) for p in seen["libs"] if "libcudart" in p] ==
             ["libcudart-5f1c2a9e.so.13.0.0"], "bundled: only the renamed runtime loaded (%s)"
             % seen["libs"])

# Two ranks under simrun, each one through dpro-run.
cmd = [sys.executable, SELF, "--child", MODULE, "main", str(ITERS)]
simrun = [ct.SIMRUN, "-n", "2", "--timeout", "60", "--simgpu-libdir", SIMLIBS, "--"]
base = ct.run(simrun + cmd, env=job_env(ct.tmpdir(), False, False), timeout=90)
out = ct.tmpdir()
traced = ct.run(simrun + [ct.DPRO_RUN, "-o", out, "--"] + cmd,
                env=job_env(out, False, False), timeout=90)
want, got = job_lines(base), job_lines(traced)
ct.check(base.returncode == 0 and sorted(want) == [0, 1],
         "2 ranks: run without the collector (%s)" % base.stderr[-300:])
ct.check(traced.returncode == 0 and sorted(got) == [0, 1],
         "2 ranks: run under the collector (%s)" % traced.stderr[-300:])
ct.check(all(got.get(r, {}).get("codes") == want.get(r, {}).get("codes") for r in (0, 1)),
         "2 ranks: return codes are those without the collector")
files = ct.traces(out)
ct.check(len(files) == 2, "2 ranks: two traces (%d)" % len(files))
docs = {int(d["meta"].get("rank", -1)): d for d in (ct.dump(f)[0] for f in files)}
keys = {}
for rank in sorted(docs):
    if rank in got:
        check_trace(docs[rank], "rank %d" % rank, got[rank], ITERS)
    colls = ct.events(docs[rank], "collective")
    keys[rank] = [(e["comm"], e["seq"], e["count"]) for e in colls]
    comms = docs[rank]["comms"]
    ct.check(len(comms) == 1 and comms[0]["size"] == 2 and comms[0]["rank"] == rank,
             "rank %d: communicator row (size 2)" % rank)
ct.check(len(keys) == 2 and keys.get(0) == keys.get(1),
         "2 ranks: the same (comm hash, seq, count) on both ranks")
ct.finish()
