"""fork and vfork from a recording job, under load: a Python job (the collector preloaded, the
simulated libcudart in the global scope) keeps a thread making hooked calls while the main
thread starts 1000 children: half with subprocess (vfork + exec in CPython), half with
os.fork (the child makes one hooked call and exits normally, so it writes a trace of its
own). The writer meanwhile drains and commits all the time (DPRO_DRAIN_MS=1,
DPRO_FLUSH_MS=1): a fork in the middle of its SQLite or zlib work must not leave a child
stuck on a lock held by a thread that does not exist in the child. Checked: no child hangs
(each is given 10 s), no fork waits past its 5 s for the writer's work lock (the writer
takes up no new work while a fork waits: under load it took the lock back 1 ms after
releasing it, keeping forks waiting up to 0.6 s in 150), every fork child's trace is
readable and holds its call (a missing one is named, with what the collector said; under
load 1 in 500 was lost: the child's one record, committed just after the writer's first
look found its ring empty, went to the drain that ran before any file was open; the
hardening test's late first record holds that moment open without load), the job exits 0.

`test-fork-storm.py --job CUDART N` is the job itself."""
import collections
import ctypes
import os
import subprocess
import sys
import threading
import time

CHILD_TIMEOUT_S = 10


def job(cudart, n):
    ctypes.CDLL(cudart, mode=os.RTLD_GLOBAL)
    glob = ctypes.CDLL(None)  # the collector's hooks come first in the global scope
    query = glob.cudaStreamQuery
    query.argtypes = [ctypes.c_void_p]
    stop = threading.Event()

    def load():
        while not stop.is_set():
            for _ in range(20):
                query(None)
            time.sleep(0.001)

    query(None)
    th = threading.Thread(target=load, daemon=True)
    th.start()
    hung = forks = spawned = 0
    fork_pids = []
    for i in range(n):
        if i % 2:
            try:
                subprocess.run(["/bin/true"], timeout=CHILD_TIMEOUT_S, check=True)
                spawned += 1
            except subprocess.TimeoutExpired:
                hung += 1
            continue
        pid = os.fork()
        if pid == 0:
            query(None)
            sys.exit(0)  # atexit runs: the child's trace is finished
        forks += 1
        fork_pids.append(pid)
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if status != 0:
                    hung += 1
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                hung += 1
                break
            time.sleep(0.0005)
    stop.set()
    th.join()
    print("forks=%d spawned=%d hung=%d" % (forks, spawned, hung))
    print("fork pids: " + " ".join(str(p) for p in fork_pids))
    return 0


if len(sys.argv) > 3 and sys.argv[1] == "--job":
    sys.exit(job(sys.argv[2], int(sys.argv[3])))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
CUDART = os.path.join(ct.BUILD, "tests", "simgpu", ".libs", "libcudart.so.13")
if not os.path.exists(CUDART):
    print("skip: tests/simgpu not built")
    sys.exit(ct.SKIP)

N = int(os.environ.get("FORK_STORM_N", "1000"))
out = ct.tmpdir()
t0 = time.monotonic()
r = ct.run([sys.executable, os.path.abspath(__file__), "--job", CUDART, str(N)],
           env=ct.env_with(out, DPRO_CUPTI=0, DPRO_DRAIN_MS=1, DPRO_FLUSH_MS=1,
                            DPRO_RING_EVENTS=1024), timeout=300)
summary = (r.stdout.splitlines() or [""])[0]
print("job: %.1f s, %s" % (time.monotonic() - t0, summary))
ct.check(r.returncode == 0 and ("forks=%d spawned=%d hung=0" % (N // 2, N // 2)) in r.stdout,
         "the job forks %d and spawns %d children, none hangs (%s %s)"
         % (N // 2, N // 2, summary, r.stderr[-500:]))
warnings = [l for l in r.stderr.splitlines() if "dpro-collector" in l]
# a fork the writer kept from its work lock for 5 s (the child may hang, or lose its trace)
ct.check(not [l for l in warnings if "writer thread was busy" in l],
         "every fork waited for the writer's work: %s" % warnings[:5])
files = ct.traces(out)
ct.check(len(files) == N // 2 + 1, "a trace per fork child and the parent's (%d)" % len(files))
try:
    # events counted, not listed: the parent's trace holds every call of the load thread
    # (the listed events of 501 traces took the reader 2.7 GB)
    docs = ct.dump(out, counts=True)
except RuntimeError as e:
    docs = []
    ct.check(False, "every trace readable (%s)" % e)
# a pid the system gave two fork children (pid_max 32768, others forking meanwhile) names
# two traces (the second gets a .1 suffix): counted per pid, never folded by it
traced = collections.Counter(int(d["meta"]["pid"]) for d in docs)
children = [d for d in docs if d["counts"].get("api:cudaStreamQuery") == 1]
forked = collections.Counter(int(p) for l in r.stdout.splitlines()
                             if l.startswith("fork pids:") for p in l.split()[2:])
missing = sorted(p for p, n in forked.items() if traced[p] < n)
ct.check(not missing, "fork children without a trace: %s (pids given twice: %d; the "
         "collector said: %s)" % (missing[:10], sum(n > 1 for n in forked.values()),
                                  warnings[:5]))
ct.check(len(docs) == len(files) and len(children) == N // 2,
         "every trace readable; each fork child's holds its one call (%d of %d)"
         % (len(children), N // 2))
ct.finish()
