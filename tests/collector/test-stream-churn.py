"""Streams destroyed and created again under the collector (coll-job churn, the do-nothing
libcudart, whose destroyed stream's handle is the next created one's, with a new id): the
hooks keep the last stream a thread named, and a stream's destruction must void that, so
each round's launches on its new stream carry that stream's id, every round's its own,
and the job's own stream keeps its id; and the job did reuse handles (else the run proves
nothing about a stale id)."""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
ROUNDS = 20
out = ct.tmpdir()
r = ct.run([ct.COLL_JOB, "churn", str(ROUNDS)], env=ct.env_with(out), timeout=60)
ct.check(r.returncode == 0, "coll-job churn under the collector runs (%s)" % r.stderr[-500:])
m = re.search(r"reused=(\d+)", r.stdout)
ct.check(m and int(m.group(1)) > 0, "the job reused stream handles: %s" % r.stdout.strip())
files = ct.traces(out)
ct.check(len(files) == 1, "one trace (%d)" % len(files))
launches = ct.events(ct.dump(files[0])[0], "api", "cudaLaunchKernel") if files else []
ct.check(len(launches) == 2 * ROUNDS + 1, "%d launches (%d)" % (2 * ROUNDS + 1, len(launches)))
by_stream = collections.Counter(e["stream"] for e in sorted(launches, key=lambda e: e["t0"]))
ids = sorted(by_stream.values())
# each created stream: two launches; the job's stream: one, at the end
ct.check(ids == [1] + [2] * ROUNDS,
         "a stream id a round (2 launches each) and the job's stream's: %s" % dict(by_stream))
ct.finish()
