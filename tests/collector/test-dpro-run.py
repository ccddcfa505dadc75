"""dpro-run: options, exit codes, the environment it hands to the command."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
if not os.path.exists(ct.DPRO_RUN):
    print("skip: dpro-run not built")
    sys.exit(ct.SKIP)

env = ct.sanitizer_env()
env["DPRO_COLLECTOR"] = ct.COLLECTOR

r = ct.run([ct.DPRO_RUN, "--help"], env=env)
ct.check(r.returncode == 0 and "usage: dpro-run" in r.stdout, "--help")
r = ct.run([ct.DPRO_RUN, "--version"], env=env)
ct.check(r.returncode == 0 and r.stdout.startswith("dpro-run "), "--version")
r = ct.run([ct.DPRO_RUN, "--bogus", "--", "true"], env=env)
ct.check(r.returncode == 2, "unknown option: exit 2")
r = ct.run([ct.DPRO_RUN], env=env)
ct.check(r.returncode == 2, "no command: exit 2")
r = ct.run([ct.DPRO_RUN, "--flush-ms", "x", "--", "true"], env=env)
ct.check(r.returncode == 2, "bad number: exit 2")
r = ct.run([ct.DPRO_RUN, "--", "/nonexistent/cmd"], env=env)
ct.check(r.returncode == 127, "missing command: exit 127")

out = ct.tmpdir()
r = ct.run([ct.DPRO_RUN, "-o", out, "--flush-ms", "50", "--stacks=2", "--", ct.COLL_JOB,
            "launches", "10"], env=env)
ct.check(r.returncode == 0 and "launches=10" in r.stdout, "runs the command")
ct.check("traces go to " + out in r.stderr, "says where traces go")
files = ct.traces(out)
ct.check(len(files) == 1, "one trace")
if files:
    doc = ct.dump(files[0])[0]
    ct.check(doc["meta"].get("setting.DPRO_FLUSH_MS") == "50", "--flush-ms reaches the trace")
    ct.check(doc["meta"].get("setting.DPRO_STACK_SAMPLE") == "2", "--stacks=2 reaches the trace")
    launches = ct.events(doc, "api", "cudaLaunchKernel")
    with_stack = [e for e in launches if e["stack_frames"] > 0]
    ct.check(len(launches) == 10, "10 launches recorded")
    ct.check(len(with_stack) == 5 or doc["meta"].get("stacks") == "unavailable",
             "one launch in 2 carries a call stack (%d)" % len(with_stack))

rest = ct.ld_preload("libm.so.6")
env2 = dict(env, LD_PRELOAD=rest)
r = ct.run([ct.DPRO_RUN, "-o", ct.tmpdir(), "--", "sh", "-c", "echo $LD_PRELOAD"], env=env2)
ct.check(r.stdout.strip() == os.path.realpath(ct.COLLECTOR) + ":" + rest or
         r.stdout.strip() == ct.COLLECTOR + ":" + rest,
         "collector first in LD_PRELOAD, the rest kept (%s)" % r.stdout.strip())

out = ct.tmpdir()
r = ct.run([ct.DPRO_RUN, "-o", out, "--no-cuda", "--", ct.COLL_JOB, "launches", "10"], env=env)
ct.check(r.returncode == 0 and ct.traces(out) == [], "--no-cuda: nothing recorded")
ct.finish()
