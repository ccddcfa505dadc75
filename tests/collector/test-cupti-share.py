#!/usr/bin/env python3
"""CUPTI shared with a second activity client (share-job, Kineto's calls without torch) in
its hard cases, each a mode of share-job on simgpu: a client clock that steps every 64 us
(still shared, the copies within a step of the collector's times); a clock replaced by
another (the copies on the latest); a second profiler window
opened right after the first, nothing flushed between (the client gets the records of
both); the client registering its callbacks again from inside its buffer-completed
callback (no deadlock, nothing lost); buffers 3 bytes off alignment (the copies aligned in
them); buffers of 3 records (the 4th in the next one) and a kind the collector cannot copy
(refused, said once); buffers of at most 2 records (maxNumRecords); a fork (the child calls CUPTI, the parent goes on sharing); buffers too small for a record (each record counted lost, said once, nothing
written past them); the job exiting with the client's kind enabled and
its state destroyed at exit (no callback reaches it after that). In every case the
collector keeps all of its own 30 kernels."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
if not os.path.exists(ct.SHARE_JOB):
    print("skip: tests/collector/share-job not built")
    sys.exit(ct.SKIP)

SHARED_SAID = "CUPTI is shared with another tool"
TAKEN_SAID = "CUPTI's device records are taken by another tool"


def shared(mode, records_want, tolerance_ns):
    """Runs mode; checks that CUPTI was shared, the collector kept its 30 kernels and the
    client got records_want records, the kernels launched while it had them enabled (the
    6th to the 25th launch), each within tolerance_ns of the collector's times (records_want
    None: not the client's records). Returns share_run's answer."""
    got = ct.share_run(mode, timeout=30)
    if not got:
        return None
    mine, records, err, doc = got
    meta = doc["meta"]
    ct.check(err.count(SHARED_SAID) == 1 and TAKEN_SAID not in err,
             "%s: CUPTI shared, said once, never taken: %s" % (mode, err[-1000:]))
    kernels = {e["corr"]: e for e in ct.events(doc, "kernel")}
    launches = sorted(e["corr"] for e in ct.events(doc, "api", "cuLaunchKernel"))
    ct.check(len(kernels) == 30 and sorted(kernels) == launches,
             "%s: the collector keeps its 30 kernels: %d of %d launches"
             % (mode, len(kernels), len(launches)))
    if records_want is None:
        return got
    ct.check(records == records_want and sorted(mine) == launches[5:25] and
             meta.get("cupti_shared_records") == str(records_want) and
             meta.get("cupti_shared_lost") == "0",
             "%s: the client gets the %d kernels launched while it had them enabled: %d "
             "records, %s, meta %s" % (mode, records_want, records, sorted(mine),
                                       {k: v for k, v in meta.items() if "shared" in k}))
    off = [(c, s - kernels[c]["t0"], e - kernels[c]["t1"]) for c, (s, e) in mine.items()
           if c in kernels and (abs(s - kernels[c]["t0"]) > tolerance_ns or
                                abs(e - kernels[c]["t1"]) > tolerance_ns)]
    ct.check(not off, "%s: the client's times are the collector's within %d ns (corr, "
             "start and end apart): %s" % (mode, tolerance_ns, off[:3]))
    return got


# a clock of 64 us steps: two readings in a row are mostly equal; still a clock
shared("coarse", 20, 2 * 64000 * 2.5)
# a clock replaced by another before the buffers are registered: the latest one counts
shared("replace", 20, 2000)
# a second window at once: the first window's records, not yet delivered, still go to it
shared("windows", 20, 2000)
# registering again from inside the completed callback: CUPTI's thread calls it while
# delivering; the collector holds no lock of its own across the client's callbacks
shared("reregister", 20, 2000)
# a misaligned buffer: the copies start at its first 8-byte boundary
shared("odd", 20, 2000)
# buffers of 3 records: a record larger than the room left goes to the next buffer; a kind
# the collector cannot copy is refused, said once
got = shared("tight", 20, 2000)
if got:
    ct.check(got[2].count("is not enabled for the other tool") == 1 and
             "share-job: unsupported=2" in got[2],
             "tight: PC sampling refused, said once: %s" % got[2][-1000:])
# at most 2 records a buffer (maxNumRecords, CUPTI's contract): never more
got = shared("max2", 20, 2000)
ct.check(got and "records in a buffer" not in got[2],
         "max2: no buffer holds more than 2 records: %s" % (got[2][-1000:] if got else None))
# a fork after the client registered: the child calls CUPTI as the client would and ends;
# the parent's sharing goes on
got = shared("fork", 20, 2000)
ct.check(got and "share-job: child 0" in got[2],
         "fork: the child's CUPTI calls succeed: %s" % (got[2][-1000:] if got else None))
# buffers too small for any record: none written, each counted, said once
got = shared("small", None, 0)
if got:
    mine, records, err, doc = got
    meta = doc["meta"]
    ct.check(records == 0 and meta.get("cupti_shared_records") == "0" and
             meta.get("cupti_shared_lost") == "20" and err.count("no room") == 1,
             "small: the client's 20 records counted lost, said once: %d records, %s, %s"
             % (records, {k: v for k, v in meta.items() if "shared" in k}, err[-1000:]))
# exit with the kind on: the collector's last flush hands nothing to a client whose state
# its exit handler destroyed
got = shared("exit-on", None, 0)
ct.check(got and "late callback" not in got[2], "exit-on: no callback after the client's "
         "exit handler ran: %s" % (got[2][-1000:] if got else None))
ct.finish()
