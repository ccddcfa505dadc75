"""The collector runs inside someone else's job: one check per way it could hurt or mislead
it (harden-job modes on the simulated device).

- hooks never block: a thread's first hook while the writer converts a launch whose name
  lookup is slow returns at once (the registry lock covers only a snapshot of the ring list);
- exec in a vfork child looks nothing up (every exec* is resolved at load): a vfork + execve
  while another thread holds the loader's lock is not delayed;
- 5000 communicators created and destroyed: each keeps its own hash (slots are freed);
- a collective that passes through unrecorded still advances its communicator's sequence
  number: later (hash, seq) keys match the other rank's;
- one process on two devices: the legacy and per-thread streams are told apart per device,
  the device switched with cudaSetDevice, cuCtxSetCurrent or both;
- a kernel whose module is unloaded before the writer drains keeps its name;
- a libcupti of another API version (other record layouts) is refused with one line;
- every trace of a fork chain names the library versions (one cache slot per function);
- a process's first record, committed after the writer's look found none and before its
  drain (DPRO_TEST_DRAIN_PAUSE_MS holds that moment open), reaches the trace: the drain
  before the file is opened discarded it (a fork child's one call, lost under load);
- a writer thread that cannot start (DPRO_TEST_WRITER_START_FAILS) loses nothing: said
  once, the job runs, the records wait in the rings and are written at exit, at an exec,
  or by a thread started on a later attempt; CUPTI's buffers meanwhile are held up to a
  bound (DPRO_TEST_CUPTI_QUEUE_MAX lowers it), the rest dropped and counted;
- the exit waits for a slow writer (DPRO_TEST_FINISH_PAUSE_MS) at most DPRO_EXIT_WAIT_MS,
  said once, the job's exit status kept; a writer that finishes in time loses nothing;
- bad settings are warned about once and the default used; a DPRO_OUTPUT over 4 KB records
  nothing (never a directory of the cut name);
- a row that cannot be written (thread, communicator, ...) is counted in meta writer_errors
  and said once;
- CUDA's teardown at exit (before the collector's exit handler): the device records are
  flushed on CUPTI's context-destroy callback.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
HARDEN = os.path.join(ct.BUILD, "tests", "collector", "harden-job")
SLOWCTOR = os.path.join(ct.BUILD, "tests", "collector", ".libs", "libslowctor.so")
if not (os.path.exists(HARDEN) and os.path.exists(ct.SIMRUN)):
    print("skip: harden-job or simrun not built")
    sys.exit(ct.SKIP)


def kv(stdout):
    """The key=value pairs of a job's output."""
    out = {}
    for word in stdout.split():
        if "=" in word:
            k, v = word.split("=", 1)
            out[k] = v
    return out


def one_trace(out, what):
    files = ct.traces(out)
    ct.check(len(files) == 1, "%s: one trace (%d)" % (what, len(files)))
    return ct.dump(files[0])[0] if files else None


# ---- hooks never block ----------------------------------------------------------------
out = ct.tmpdir()
r = ct.run([HARDEN, "first-hook"], env=ct.env_with(out, DPRO_CUPTI=0,
                                                   SIMGPU_FUNC_NAME_DELAY_MS=1500))
got = kv(r.stdout)
ct.check(r.returncode == 0 and "first_hook_ms" in got, "first-hook job runs (%s)" % r.stderr[-300:])
ms = float(got.get("first_hook_ms", "1e9"))
ct.check(ms < 500, "a thread's first hook does not wait for the writer's drain (%.1f ms)" % ms)
doc = one_trace(out, "first-hook")
if doc:
    launches = ct.events(doc, "api", "cuLaunchKernel")
    ct.check(len(launches) == 2 and all(e["name2"] == "slow_named_kernel" for e in launches),
             "first-hook: both launches recorded with the kernel's name")

# ---- exec in a vfork child ------------------------------------------------------------
out = ct.tmpdir()
r = ct.run([HARDEN, "vfork-exec", SLOWCTOR], env=ct.env_with(out, DPRO_CUPTI=0,
                                                             SLOWCTOR_MS=1500))
got = kv(r.stdout)
ct.check(r.returncode == 0 and got.get("child_status") == "0",
         "vfork-exec job runs, the child execs (%s %s)" % (r.stdout, r.stderr[-300:]))
ms = float(got.get("vfork_ms", "1e9"))
ct.check(ms < 500, "exec from a vfork child does not wait on the loader's lock (%.1f ms)" % ms)

# ---- 5000 communicators ---------------------------------------------------------------
N = 5000
out = ct.tmpdir()
r = ct.run([HARDEN, "comms", str(N)], env=ct.env_with(out, DPRO_CUPTI=0,
                                                      SIMGPU_NCCL_KEEP_HANDLES=1,
                                                      DPRO_RING_EVENTS=1 << 18,
                                                      SIMGPU_NCCL_LAT_US=0), timeout=120)
ct.check(r.returncode == 0 and ("collectives=%d" % N) in r.stdout,
         "comms job runs (%s)" % r.stderr[-300:])
doc = one_trace(out, "comms")
if doc:
    hashes = {c["hash"] for c in doc["comms"]}
    colls = ct.events(doc, "collective")
    ct.check(doc["summary"]["dropped"] == 0, "comms: nothing dropped")
    ct.check(len(doc["comms"]) == N and len(hashes) == N, "%d communicator rows (%d, %d hashes)"
             % (N, len(doc["comms"]), len(hashes)))
    bad = [e for e in colls if e["comm"] not in hashes or e["seq"] != 0]
    ct.check(len(colls) == N and not bad,
             "every collective names its communicator's hash, seq 0 (%d of %d wrong)"
             % (len(bad), len(colls)))
    ct.check(len({e["comm"] for e in colls}) == N, "a hash of its own per communicator")

# ---- a pass-through collective still advances seq --------------------------------------
out = ct.tmpdir()
r = ct.run([ct.SIMRUN, "-n", "2", "--timeout", "60", "--", HARDEN, "seq-gap"],
           env=ct.env_with(out, DPRO_CUPTI=0), timeout=90)
ct.check(r.returncode == 0, "seq-gap job runs (%s)" % r.stderr[-300:])
files = ct.traces(out)
docs = {int(d["meta"]["rank"]): d for d in (ct.dump(f)[0] for f in files)}
ct.check(sorted(docs) == [0, 1], "seq-gap: two traces")
if sorted(docs) == [0, 1]:
    keys = {rk: [(e["comm"], e["seq"], e["count"]) for e in ct.events(d, "collective")]
            for rk, d in docs.items()}
    ct.check(len(keys[0]) == 5 and len(keys[1]) == 4,
             "rank 0 recorded 5 all-reduces, rank 1 the 4 after its unrecorded one (%d, %d)"
             % (len(keys[0]), len(keys[1])))
    ct.check(keys[0][1:] == keys[1], "the later (hash, seq) keys match across ranks: %s vs %s"
             % (keys[0][1:], keys[1]))

# ---- two devices, one process ---------------------------------------------------------
# switching with cudaSetDevice and cuCtxSetCurrent, or with either alone: the collector
# keeps each thread's current device until one of them changes it
for how in ("both", "runtime", "driver"):
    out = ct.tmpdir()
    r = ct.run([HARDEN, "two-devices", how],
               env=ct.env_with(out, DPRO_CUPTI_LIB=ct.SIM_CUPTI, SIMGPU_DEVICE_COUNT=2))
    ct.check(r.returncode == 0 and "launches=12" in r.stdout,
             "two-devices (%s) job runs (%s)" % (how, r.stderr[-300:]))
    doc = one_trace(out, "two-devices (%s)" % how)
    if doc:
        host = {e["corr"]: e for e in ct.events(doc, "api")}
        kernels = ct.events(doc, "kernel")
        linked = [k for k in kernels if k["corr"] in host]
        ct.check(len(kernels) == 12 and len(linked) == 12,
                 "two-devices (%s): 12 kernels, all linked" % how)
        wrong = [(host[k["corr"]]["stream"], k["stream"], k["device"]) for k in linked
                 if host[k["corr"]]["stream"] != k["stream"]]
        ct.check(not wrong, "two-devices (%s): each launch names its kernel's stream on both "
                 "devices (wrong: %s)" % (how, wrong))
        ct.check(len({k["stream"] for k in kernels}) == 4,
                 "two-devices (%s): four streams: legacy and per-thread of each device" % how)

# ---- a kernel whose module is unloaded -------------------------------------------------
out = ct.tmpdir()
r = ct.run([HARDEN, "unload"], env=ct.env_with(out, DPRO_CUPTI=0, DPRO_FLUSH_MS=2000,
                                               DPRO_DRAIN_MS=1000))
ct.check(r.returncode == 0 and "unloaded=1" in r.stdout, "unload job runs (%s)" % r.stderr[-300:])
doc = one_trace(out, "unload")
if doc:
    names = [e["name2"] for e in ct.events(doc, "api", "cuLaunchKernel")]
    ct.check(names == ["jit_unloaded_kernel"], "the launch keeps its kernel's name (%s)" % names)


# ---- a libcupti of another version ----------------------------------------------------
out = ct.tmpdir()
r = ct.run([ct.DRV_JOB], env=ct.env_with(out, DPRO_CUPTI_LIB=ct.SIM_CUPTI, SIMGPU_CUPTI_VERSION=24))
ct.check(r.returncode == 0 and "launches=5" in r.stdout, "old-CUPTI job runs (%s)" % r.stderr[-300:])
ct.check(r.stderr.count("libcupti's API version is 24") == 1,
         "a libcupti of another version is refused with one line (%s)" % r.stderr[-300:])
doc = one_trace(out, "old CUPTI")
if doc:
    ct.check(doc["meta"].get("cupti") == "version", "old CUPTI: meta cupti=version (%s)"
             % doc["meta"].get("cupti"))
    ct.check(ct.events(doc, "kernel") == [] and len(ct.events(doc, "api", "cuLaunchKernel")) == 3,
             "old CUPTI: no device records read, the hooked launches recorded")


# ---- versions in every trace of a fork chain -------------------------------------------
out = ct.tmpdir()
r = ct.run([HARDEN, "fork-chain", "5"], env=ct.env_with(out, DPRO_CUPTI=0))
ct.check(r.returncode == 0 and "chain=5" in r.stdout, "fork-chain job runs (%s)" % r.stderr[-300:])
docs = [ct.dump(f)[0] for f in ct.traces(out)]
have = [("cuda_runtime_version" in d["meta"], "nccl_version" in d["meta"]) for d in docs]
ct.check(len(docs) == 5 and all(a and b for a, b in have),
         "each of the 5 traces of a fork chain names the library versions (%s)" % have)

# ---- a first record between the writer's look and its drain ----------------------------
# the push starts the writer and records nothing; its first look (DPRO_DRAIN_MS) finds no
# record and holds 1 s before the drain; the pop records at 200 ms, inside that second
out = ct.tmpdir()
r = ct.run([HARDEN, "late-first", "200"], env=ct.env_with(out, DPRO_CUPTI=0, DPRO_DRAIN_MS=1,
                                                          DPRO_TEST_DRAIN_PAUSE_MS=1000))
ct.check(r.returncode == 0 and "ranges=1" in r.stdout, "late-first job runs (%s)" % r.stderr[-300:])
doc = one_trace(out, "late first record")
if doc:
    names = [e["name"] for e in ct.events(doc, "marker")]
    ct.check(names == ["late_first"], "the late first record is in the trace (%s)" % names)

# ---- a writer thread that cannot start ------------------------------------------------
# every start fails: the exit writes the trace in the exiting thread
out = ct.tmpdir()
r = ct.run([HARDEN, "comms", "3"], env=ct.env_with(out, DPRO_CUPTI=0,
                                                   DPRO_TEST_WRITER_START_FAILS=1000000))
ct.check(r.returncode == 0 and "collectives=3" in r.stdout,
         "no writer thread: the job runs (%s)" % r.stderr[-300:])
ct.check(r.stderr.count("cannot start the writer thread") == 1,
         "no writer thread: said once (%s)" % r.stderr[-300:])
doc = one_trace(out, "no writer thread")
if doc:
    ct.check(len(ct.events(doc, "collective")) == 3 and "anchor_end_realtime_ns" in doc["meta"],
             "no writer thread: the 3 collectives written at exit, the trace ended (%d)"
             % len(ct.events(doc, "collective")))
# a ring that fills meanwhile drops and counts, as with a writer too slow
out = ct.tmpdir()
r = ct.run([HARDEN, "exec-after", "1000"],
           env=ct.env_with(out, DPRO_CUPTI=0, DPRO_RING_EVENTS=256,
                           DPRO_TEST_WRITER_START_FAILS=1000000))
ct.check(r.returncode == 0 and "queries=1000" in r.stdout,
         "no writer thread, then exec: the job runs (%s)" % r.stderr[-300:])
doc = one_trace(out, "no writer thread, then exec")
if doc:
    kept = len(ct.events(doc, "api", "cudaStreamQuery"))
    dropped = doc["summary"]["dropped"]
    ct.check(kept == 256 and kept + dropped == 1000,
             "no writer thread, then exec: the ring's 256 written before the exec, the rest "
             "counted as dropped (%d kept, %d dropped)" % (kept, dropped))
# the first start fails, the second thread's first hook starts the writer
out = ct.tmpdir()
r = ct.run([HARDEN, "first-hook"], env=ct.env_with(out, DPRO_CUPTI=0,
                                                   DPRO_TEST_WRITER_START_FAILS=1))
ct.check(r.returncode == 0 and r.stderr.count("cannot start the writer thread") == 1,
         "writer started on the second attempt: the job runs, said once (%s)" % r.stderr[-300:])
doc = one_trace(out, "writer started on the second attempt")
if doc:
    ct.check(len(ct.events(doc, "api", "cuLaunchKernel")) == 2,
             "writer started on the second attempt: both launches written")

# CUPTI's completed buffers wait for the writer too, at most CUPTI_QUEUE_MAX of them (here
# DPRO_TEST_CUPTI_QUEUE_MAX=1): the rest are dropped and counted, never held without bound
DDP = [ct.SIMRUN, "-n", "1", "--", ct.DDP_SIM, "--iterations", "10", "--warmup", "0",
       "--op-overhead-us", "0"]
device = {}
for most in (0, 1):
    out = ct.tmpdir()
    r = ct.run(DDP, env=ct.env_with(out, DPRO_CUPTI_LIB=ct.SIM_CUPTI, SIMGPU_PHYSICS="simple",
                                    DPRO_TEST_WRITER_START_FAILS=1000000,
                                    DPRO_TEST_CUPTI_QUEUE_MAX=most))
    ct.check(r.returncode == 0, "no writer thread, ddp-sim with CUPTI (queue %d): runs (%s)"
             % (most, r.stderr[-300:]))
    files = ct.traces(out)
    doc = ct.dump(files[0], counts=True)[0] if len(files) == 1 else None
    if doc:
        device[most] = (sum(n for k, n in doc["counts"].items()
                            if k.split(":")[0] in ("kernel", "memcpy", "memset")),
                        doc["summary"]["dropped"])
ct.check(len(device) == 2 and device[0][0] > 0 and device[0][1] == 0,
         "no writer thread: every device record written at exit (%s)" % (device.get(0),))
# (the dropped count takes every record of a buffer, the correlation records too)
ct.check(len(device) == 2 and 0 < device[1][0] < device[0][0] and sum(device[1]) >= device[0][0],
         "no writer thread, one CUPTI buffer held: the others' records dropped and counted "
         "(kept, dropped: %s of %s)" % (device.get(1), device.get(0)))

# ---- the exit's wait for a slow writer -------------------------------------------------
out = ct.tmpdir()
t0 = time.monotonic()
r = ct.run([HARDEN, "comms", "3"], env=ct.env_with(out, DPRO_CUPTI=0, DPRO_EXIT_WAIT_MS=300,
                                                   DPRO_TEST_FINISH_PAUSE_MS=30000))
secs = time.monotonic() - t0
ct.check(r.returncode == 0 and "collectives=3" in r.stdout,
         "writer stuck at exit: the job's own exit status (%s)" % r.stderr[-300:])
ct.check(secs < 8, "writer stuck for 30 s at exit: the job exits after DPRO_EXIT_WAIT_MS=300, not 10 s "
         "(%.1f s)" % secs)
ct.check(r.stderr.count("did not finish within DPRO_EXIT_WAIT_MS=300 ms") == 1,
         "writer stuck at exit: said once (%s)" % r.stderr[-300:])
out = ct.tmpdir()
r = ct.run([HARDEN, "comms", "3"], env=ct.env_with(out, DPRO_CUPTI=0,
                                                   DPRO_TEST_FINISH_PAUSE_MS=1000))
ct.check(r.returncode == 0 and "did not finish" not in r.stderr,
         "writer slow at exit, in time: the job runs, nothing said (%s)" % r.stderr[-300:])
doc = one_trace(out, "writer slow at exit, in time")
if doc:
    ct.check(len(ct.events(doc, "collective")) == 3 and "anchor_end_realtime_ns" in doc["meta"],
             "writer slow at exit, in time: every collective written, the trace ended")

# ---- bad settings ----------------------------------------------------------------------
for var, value, key, want in (("DPRO_RING_EVENTS", "abc", "setting.DPRO_RING_EVENTS", "32768"),
                              ("DPRO_RING_EVENTS", "-5", "setting.DPRO_RING_EVENTS", "32768"),
                              ("DPRO_ZLIB_LEVEL", "99", "setting.DPRO_ZLIB_LEVEL", "1"),
                              ("DPRO_FLUSH_MS", "0", "setting.DPRO_FLUSH_MS", "200"),
                              ("DPRO_CLOCK", "garbage", None, None)):
    out = ct.tmpdir()
    r = ct.run([HARDEN, "fork-chain", "1"], env=ct.env_with(out, DPRO_CUPTI=0, **{var: value}))
    lines = [l for l in r.stderr.splitlines() if ("%s=%s" % (var, value)) in l]
    ct.check(r.returncode == 0 and len(lines) == 1 and "using" in lines[0],
             "%s=%s: warned once, the default used (%s)" % (var, value, r.stderr[-300:]))
    doc = one_trace(out, "%s=%s" % (var, value))
    if doc and key:
        ct.check(doc["meta"].get(key) == want, "%s=%s: %s=%s in force (%s)"
                 % (var, value, key, want, doc["meta"].get(key)))
    if doc and var == "DPRO_CLOCK":
        plain = ct.tmpdir()
        ct.run([HARDEN, "fork-chain", "1"], env=ct.env_with(plain, DPRO_CUPTI=0))
        ref = ct.dump(ct.traces(plain)[0])[0]
        ct.check(doc["meta"].get("collector_stamps") == ref["meta"].get("collector_stamps"),
                 "DPRO_CLOCK=garbage: the stamps of the default (auto)")

# ---- a DPRO_OUTPUT too long ------------------------------------------------------------
base = ct.tmpdir()
long_out = os.path.join(base, "d" * 250, *(["e" * 250] * 20))
r = ct.run([HARDEN, "fork-chain", "1"], env=ct.env_with(long_out, DPRO_CUPTI=0))
ct.check(r.returncode == 0 and r.stderr.count("DPRO_OUTPUT is longer than") == 1,
         "a DPRO_OUTPUT over 4 KB: the job runs, one line says so (%s)" % r.stderr[-300:])
ct.check(os.listdir(base) == [], "a DPRO_OUTPUT over 4 KB: nothing created (%s)"
         % os.listdir(base))


# ---- failed row writes are counted ----------------------------------------------------
SQLFAIL = os.path.join(ct.BUILD, "tests", "collector", ".libs", "libsqlfail.so")
for table in ("threads", "communicators"):
    out = ct.tmpdir()
    env = ct.env_with(out, DPRO_CUPTI=0, SQLFAIL_TABLE=table)
    env["LD_PRELOAD"] = SQLFAIL + ":" + ct.COLLECTOR
    r = ct.run([HARDEN, "comms", "3"], env=env)
    ct.check(r.returncode == 0 and "collectives=3" in r.stdout,
             "%s rows failing: the job runs (%s)" % (table, r.stderr[-300:]))
    ct.check(r.stderr.count("could not be written") == 1, "%s rows failing: said once (%s)"
             % (table, r.stderr[-300:]))
    doc = one_trace(out, "%s rows failing" % table)
    if doc:
        n = int(doc["meta"].get("writer_errors", "0"))
        want = 1 if table == "threads" else 3
        ct.check(n == want, "%s rows failing: meta writer_errors=%d (%d)" % (table, want, n))
        ct.check(len(ct.events(doc, "collective")) == 3, "%s rows failing: the events kept"
                 % table)
out = ct.tmpdir()
r = ct.run([HARDEN, "comms", "1"], env=ct.env_with(out, DPRO_CUPTI=0))
doc = one_trace(out, "no failure")
ct.check(doc is not None and doc["meta"].get("writer_errors") == "0",
         "no failure: meta writer_errors=0")


# ---- the runtime's teardown before the exit handler -----------------------------------
out = ct.tmpdir()
r = ct.run([ct.DRV_JOB], env=ct.env_with(out, DPRO_CUPTI_LIB=ct.SIM_CUPTI, SIMGPU_TEARDOWN_AT_EXIT=1,
                                         SIMGPU_CUPTI_DELIVER_MS=60000, DPRO_FLUSH_MS=60000,
                                         DPRO_DRAIN_MS=1000))
ct.check(r.returncode == 0 and "launches=5" in r.stdout, "teardown job runs (%s)" % r.stderr[-300:])
doc = one_trace(out, "teardown")
if doc:
    ct.check(len(ct.events(doc, "kernel")) == 5,
             "the kernels are flushed at context destruction, before CUDA's teardown (%d of 5)"
             % len(ct.events(doc, "kernel")))

ct.finish()
