"""An output directory reached through a symlinked component (common on clusters:
/scratch -> /lustre/...): a job under `dpro-run -o LINK/traces` records into the directory
the link points to (created by the collector through the link), and a symlink at the trace
file itself is never followed.

Both halves are needed: the collector creates the directory through the link, and
dpro_writer_open resolves the directory once and refuses only a link at the file."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
if not (os.path.exists(ct.DPRO_RUN) and os.path.exists(ct.DRV_JOB)):
    print("skip: dpro-run or drv-job not built")
    sys.exit(ct.SKIP)

base = ct.tmpdir()
real = os.path.join(base, "lustre", "project")
os.makedirs(real)
link = os.path.join(base, "scratch")
os.symlink(os.path.join(base, "lustre"), link)
out = os.path.join(link, "project", "run1", "traces")
env = dict(ct.sanitizer_env(), DPRO_CUPTI_LIB=ct.SIM_CUPTI)
r = ct.run([ct.DPRO_RUN, "-o", out, "--", ct.DRV_JOB], env=env)
ct.check(r.returncode == 0 and "launches=5" in r.stdout, "the job runs under dpro-run (%s)"
         % r.stderr[-300:])
ct.check("recording stops" not in r.stderr, "recording does not stop (%s)" % r.stderr[-300:])
files = ct.traces(os.path.join(real, "run1", "traces"))
ct.check(len(files) == 1 and os.path.getsize(files[0]) > 0,
         "one trace, in the directory the link points to (%s)" % files)
if files:
    doc = ct.dump(files[0])[0]
    ct.check(len(ct.events(doc, "api", "cuLaunchKernel")) == 5, "the trace holds the launches")
ct.finish()
