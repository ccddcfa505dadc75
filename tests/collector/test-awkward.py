"""The collector never breaks the job: one check per awkward case, on coll-job (a
do-nothing libcudart, no libnccl): errno, fork (follow and stop), forks while a writer
thread is starting (120 children forking a grandchild 0-200 us after their first hook: no
grandchild hangs, each writes its trace), exec, a thread that exits early, SIGKILL,
SIGTERM, a full disk (RLIMIT_FSIZE), an unwritable output directory, missing libraries
(hooks answer an error code, never crash), and a job that binds itself to one CPU (the
host_cpu_list meta row is the process's set at the collector's start)."""
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
JOB = ct.COLL_JOB


def launches(doc):
    return len(ct.events(doc, "api", "cudaLaunchKernel"))


# errno is the real call's
out = ct.tmpdir()
r = ct.run([JOB, "errno"], env=ct.env_with(out))
ct.check(r.returncode == 0 and "errno_kept=1" in r.stdout, "errno preserved across hooks")

# fork, DPRO_FORK=follow: the child writes its own file
if ct.fork_follow_unsupported():
    print("skip: fork follow: %s" % ct.fork_follow_unsupported())
else:
    out = ct.tmpdir()
    r = ct.run([JOB, "fork", "5", "3"], env=ct.env_with(out, DPRO_FORK="follow"))
    ct.check(r.returncode == 0, "fork job runs (follow)")
    docs = [ct.dump(f)[0] for f in ct.traces(out)]
    counts = sorted(launches(d) for d in docs)
    ct.check(counts == [3, 10], "follow: parent 10 launches, child 3 in its own file (%s)" % counts)
    ct.check(len({d["meta"]["pid"] for d in docs}) == 2, "follow: two pids")

    # fork while the writer thread is starting: in the ASan build a thread's start holds
    # an allocator lock that the child would inherit locked (6 of 120 grandchildren hung
    # before the collector's atfork handler waited for the start)
    out = ct.tmpdir()
    r = ct.run([JOB, "fork-early", "120"], env=ct.env_with(out, DPRO_FORK="follow",
                                                          DPRO_CUPTI=0), timeout=600)
    ct.check(r.returncode == 0 and "early_forks=120 hung=0" in r.stdout,
             "early forks: no grandchild hangs (%s %s)" % (r.stdout.strip(), r.stderr[-300:]))
    ct.check(len(ct.traces(out)) == 241, "early forks: a trace per process, 241 (%d)"
             % len(ct.traces(out)))

# fork, DPRO_FORK=stop: the child records nothing
out = ct.tmpdir()
r = ct.run([JOB, "fork", "5", "3"], env=ct.env_with(out, DPRO_FORK="stop"))
docs = [ct.dump(f)[0] for f in ct.traces(out)]
ct.check(r.returncode == 0 and [launches(d) for d in docs] == [10],
         "stop: one file, the parent's 10 launches (%s)" % [launches(d) for d in docs])

# exec: what was recorded before exec is flushed; the new image (same pid) gets a new name
out = ct.tmpdir()
r = ct.run([JOB, "exec", "4"], env=ct.env_with(out))
files = ct.traces(out)
counts = sorted(launches(ct.dump(f)[0]) for f in files)
ct.check(r.returncode == 0 and counts == [3, 4],
         "exec: 4 launches before, 3 after, two files (%s, %s)" % (counts, files))

# a thread that exits early: its ring is still drained
out = ct.tmpdir()
r = ct.run([JOB, "thread-exit", "7"], env=ct.env_with(out))
docs = [ct.dump(f)[0] for f in ct.traces(out)]
ok = len(docs) == 1 and launches(docs[0]) == 14
ct.check(r.returncode == 0 and ok, "thread exit: 14 launches kept")
if docs:
    tids = {e["tid"] for e in ct.events(docs[0], "api", "cudaLaunchKernel")}
    ct.check(len(tids) == 2 and docs[0]["threads"] == 2, "thread exit: two threads named")


def run_until_ready(env):
    p = subprocess.Popen([JOB, "loop"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    return p, line.strip() == "ready"


# SIGKILL: what was flushed before the last interval stays readable
out = ct.tmpdir()
p, ready = run_until_ready(ct.env_with(out, DPRO_FLUSH_MS=50))
time.sleep(0.4)
p.kill()
p.wait()
files = ct.traces(out)
n = launches(ct.dump(files[0])[0]) if files else 0
ct.check(ready and n >= 1000, "SIGKILL: trace readable with the launches before (%d)" % n)

# SIGTERM: flushed, then the job dies of SIGTERM as it would have
out = ct.tmpdir()
p, ready = run_until_ready(ct.env_with(out, DPRO_FLUSH_MS=10000))
time.sleep(0.3)
p.send_signal(signal.SIGTERM)
p.wait(timeout=20)
files = ct.traces(out)
n = launches(ct.dump(files[0])[0]) if files else 0
ct.check(p.returncode == -signal.SIGTERM, "SIGTERM: job ends by SIGTERM (%s)" % p.returncode)
ct.check(ready and n >= 1000, "SIGTERM: flushed although the flush interval is 10 s (%d)" % n)


# a full disk: the file may not grow beyond 32 KiB (the whole trace takes 61 KiB); the
# job goes on, one warning
def small_files():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10))


out = ct.tmpdir()
r = ct.run([JOB, "launches", "300000"], env=ct.env_with(out, DPRO_FLUSH_MS=20),
           preexec_fn=small_files)
ct.check(r.returncode == 0 and "launches=300000" in r.stdout, "full disk: the job completes")
ct.check(r.stderr.count("recording stops") == 1,
         "full disk: warned once (%r)" % r.stderr[-300:])

# an unwritable output directory
r = ct.run([JOB, "launches", "10"], env=ct.env_with("/dev/null/dpro"))
ct.check(r.returncode == 0 and "launches=10" in r.stdout, "unwritable dir: the job completes")
ct.check(r.stderr.count("recording stops") == 1, "unwritable dir: warned once")

# missing libraries: no libnccl, a libcudart without cudaMallocHost
out = ct.tmpdir()
r = ct.run([JOB, "missing"], env=ct.env_with(out))
ct.check(r.returncode == 0, "missing libraries: no crash")
ct.check("ncclAllReduce=2" in r.stdout, "missing libnccl: ncclSystemError (%s)" % r.stdout)
ct.check("cudaMallocHost=303" in r.stdout,
         "missing symbol: cudaErrorSharedObjectInitFailed (%s)" % r.stdout)

# a full ring: records are dropped and counted, the count lands in the trace
out = ct.tmpdir()
r = ct.run([JOB, "launches", "20000"],
           env=ct.env_with(out, DPRO_RING_EVENTS=256, DPRO_DRAIN_MS=1000, DPRO_FLUSH_MS=1000))
files = ct.traces(out)
doc = ct.dump(files[0])[0] if files else None
if doc:
    dropped, kept = doc["summary"]["dropped"], launches(doc)
    ct.check(dropped > 0 and kept + dropped >= 20000,
             "full ring: %d launches kept + %d dropped (counted) >= 20000" % (kept, dropped))
else:
    ct.check(False, "full ring: a trace")

# nothing recorded, nothing written: processes that never call CUDA leave no file
out = ct.tmpdir()
r = ct.run(["/bin/true"], env=ct.env_with(out))
ct.check(r.returncode == 0 and ct.traces(out) == [], "no CUDA calls, no trace file")



def cpu_list(cpus):
    """Linux's cpulist text of a set of CPU ids ("0-3,8")."""
    runs = []
    for c in sorted(cpus):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def meta_rows(path):
    """The meta table of a trace file, read-only."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    rows = dict(db.execute("SELECT key, value FROM meta"))
    db.close()
    return rows


# the CPUs in host_cpus / host_cpu_list are the process's at the collector's start, not
# the writer thread's at the end: a job that binds its main thread to one CPU before its
# first hook (the writer thread then starts on that CPU) or after it (the writer keeps the
# wider set) has the start's set there, and the set it ended with in host_cpu_list_end
start = os.sched_getaffinity(0)
for when in ("early", "late"):
    out = ct.tmpdir()
    r = ct.run([JOB, "rebind", "5", when], env=ct.env_with(out))
    files = ct.traces(out)
    meta = meta_rows(files[0]) if len(files) == 1 else {}
    cpu = int(r.stdout.split("rebound=")[1].split()[0]) if "rebound=" in r.stdout else -2
    print("rebind %s: rebound=%d, host_cpus %s, host_cpu_list %s, host_cpu_list_end %s"
          % (when, cpu, meta.get("host_cpus"), meta.get("host_cpu_list"),
             meta.get("host_cpu_list_end")))
    ct.check(r.returncode == 0 and meta.get("host_cpus") == str(len(start)) and
             meta.get("host_cpu_list") == cpu_list(start),
             "rebind %s: host_cpus and host_cpu_list are the start's, %d: %s" % (
                 when, len(start), cpu_list(start)))
    want_end = str(cpu) if cpu >= 0 else None
    ct.check(meta.get("host_cpu_list_end") == want_end,
             "rebind %s: host_cpu_list_end %s (the set at the end where it differs)" % (
                 when, want_end))

# files are not world-readable or writable
out = ct.tmpdir()
ct.run([JOB, "launches", "1"], env=ct.env_with(out))
files = ct.traces(out)
ct.check(files and (os.stat(files[0]).st_mode & 0o777) == 0o640, "trace mode 0640")
ct.finish()
