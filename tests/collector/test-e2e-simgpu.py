"""End to end on the simulated device: a 4-rank ddp-sim under the collector gives 4 traces
whose kernels, copies, collectives and markers match what the job did (counts and order);
each collective carries the same (communicator hash, sequence number) on every rank;
every device record links to the host call that caused it. Then CUPTI taken by another
tool (SIMGPU_CUPTI_BUSY): said once, cupti=busy, host-side events still recorded. Then a
second CUPTI client starting after the collector (share-job, Kineto's calls without torch):
CUPTI shared, the client gets exactly the kernels launched while it had them enabled, each
the collector's record of the same correlation id, on the client's clock (2.5 ticks a ns,
shifted); with DPRO_CUPTI_SHARE=0 it takes CUPTI instead (cupti=taken)."""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import colltest as ct  # noqa: E402

ct.skip_unless_usable()
if not (os.path.exists(ct.SIMRUN) and os.path.exists(ct.DDP_SIM)):
    print("skip: tests/simgpu not built")
    sys.exit(ct.SKIP)

RANKS, ITERS, WARMUP = 4, 3, 1
out = ct.tmpdir()
r = ct.run([ct.SIMRUN, "-n", str(RANKS), "--timeout", "60", "--", ct.DDP_SIM, "--iterations",
            str(ITERS), "--warmup", str(WARMUP), "--layers", "2"], env=ct.env_with(out),
           timeout=90)
ct.check(r.returncode == 0, "ddp-sim under the collector runs (%s)" % r.stderr[-500:])
job = {}
for line in r.stdout.splitlines():
    if line.startswith("{"):
        d = json.loads(line)
        job[d["rank"]] = d
files = ct.traces(out)
ct.check(len(files) == RANKS, "one trace per rank (%d)" % len(files))
docs = {int(d["meta"]["rank"]): d for d in (ct.dump(f)[0] for f in files)}
ct.check(sorted(docs) == list(range(RANKS)), "ranks 0..3 in meta")

coll_keys = {}
for rank, doc in sorted(docs.items()):
    meta, ev = doc["meta"], doc["events"]
    steps = ITERS + WARMUP
    ct.check(meta.get("cupti") == "enabled", "rank %d: cupti enabled" % rank)
    ct.check(meta.get("world_size") == str(RANKS), "rank %d: world_size" % rank)
    ct.check(doc["summary"]["dropped"] == 0, "rank %d: nothing dropped" % rank)
    launches = [e for e in ev if e["kind"] == "api" and "Launch" in e["name"]]
    kernels = [e for e in ev if e["kind"] == "kernel"]
    colls = [e for e in ev if e["kind"] == "collective"]
    nccl_kernels = [e for e in kernels if e["name"].startswith("ncclDevKernel")]
    want = job.get(rank, {})
    if want:
        ct.check(len(launches) == want["kernels_per_iter"] * steps,
                 "rank %d: %d launches = kernels_per_iter x steps (%d)"
                 % (rank, len(launches), want["kernels_per_iter"] * steps))
        allreduces = [e for e in colls if e["name"] == "ncclAllReduce"]
        ct.check(len(allreduces) == want["allreduces_per_iter"] * steps,
                 "rank %d: %d all-reduces" % (rank, len(allreduces)))
    ct.check(len(kernels) == len(launches) + len(colls),
             "rank %d: a kernel per launch and per collective (%d = %d + %d)"
             % (rank, len(kernels), len(launches), len(colls)))
    ct.check(len(nccl_kernels) == len(colls), "rank %d: one NCCL kernel per collective" % rank)
    # every device record links to a host call
    host = {e["corr"]: e for e in ev if e["kind"] in ("api", "collective")}
    device = [e for e in ev if e["kind"] in ("kernel", "memcpy", "memset", "sync")]
    unlinked = [e for e in device if e["corr"] not in host]
    ct.check(not unlinked, "rank %d: all %d device records linked (%d not)"
             % (rank, len(device), len(unlinked)))
    # copies: one device copy per copy call
    copy_calls = [e for e in ev if e["kind"] == "api" and e["name"].startswith("cudaMemcpy")]
    copies = [e for e in ev if e["kind"] == "memcpy"]
    ct.check(len(copies) == len(copy_calls) > 0, "rank %d: %d copies" % (rank, len(copies)))
    # order: on each stream the kernels ran in the order they were launched
    by_stream = collections.defaultdict(list)
    for k in kernels:
        by_stream[k["stream"]].append(k)
    in_order = True
    for stream_kernels in by_stream.values():
        launch_times = [host[k["corr"]]["t0"] for k in stream_kernels if k["corr"] in host]
        in_order &= launch_times == sorted(launch_times)
    ct.check(in_order, "rank %d: kernels run in launch order per stream" % rank)
    ct.check(all(host[k["corr"]]["stream"] == k["stream"] for k in kernels if k["corr"] in host),
             "rank %d: launch and kernel name the same stream" % rank)
    ct.check(all(k["t0"] >= host[k["corr"]]["t0"] for k in kernels if k["corr"] in host),
             "rank %d: no kernel starts before its launch (one clock)" % rank)
    # markers: one NVTX range per iteration, in order
    iters = [e["name"] for e in ev if e["kind"] == "marker" and e["name"].startswith("iteration")]
    ct.check(iters == ["iteration %d" % i for i in range(steps)],
             "rank %d: iteration markers %s" % (rank, iters))
    coll_keys[rank] = [(e["comm"], e["seq"], e["sub"], e["count"]) for e in colls]
    ct.check([s for _, s, _, _ in coll_keys[rank]] == list(range(len(colls))),
             "rank %d: sequence numbers 0..%d in call order" % (rank, len(colls) - 1))
    ct.check(len(doc["comms"]) == 1 and doc["comms"][0]["size"] == RANKS and
             doc["comms"][0]["rank"] == rank, "rank %d: communicator row" % rank)

ref = coll_keys.get(0)
ct.check(ref and all(coll_keys[r] == ref for r in coll_keys),
         "the same (comm hash, seq, op, count) on every rank")

# CUPTI taken by another tool
out = ct.tmpdir()
r = ct.run([ct.SIMRUN, "-n", "1", "--", ct.DDP_SIM, "--iterations", "1", "--warmup", "0",
            "--layers", "1"], env=ct.env_with(out, SIMGPU_CUPTI_BUSY=1), timeout=60)
files = ct.traces(out)
ct.check(r.returncode == 0 and len(files) == 1, "CUPTI busy: the job runs, one trace")
ct.check(r.stderr.count("CUPTI is taken") == 1, "CUPTI busy: said once")
if files:
    doc = ct.dump(files[0])[0]
    ct.check(doc["meta"].get("cupti") == "busy", "CUPTI busy: meta cupti=busy")
    ct.check(ct.events(doc, "kernel") == [] and len(ct.events(doc, "api", "cudaLaunchKernel")) > 0,
             "CUPTI busy: host-side launches recorded, no device records")


SHARED_SAID = "CUPTI is shared with another tool"
TAKEN_SAID = "CUPTI's device records are taken by another tool"
got = ct.share_run()
if got:
    mine, records, err, doc = got
    meta = doc["meta"]
    ct.check(err.count(SHARED_SAID) == 1 and err.count(TAKEN_SAID) == 0,
             "shared: said once that CUPTI is shared, never taken: %s" % err[-1000:])
    ct.check(meta.get("cupti") == "enabled" and meta.get("cupti_shared") == "clock" and
             meta.get("cupti_shared_records") == "20" and meta.get("cupti_shared_lost") == "0",
             "shared: meta %s" % {k: v for k, v in meta.items() if k.startswith("cupti")})
    kernels = {e["corr"]: e for e in ct.events(doc, "kernel")}
    launches = sorted(e["corr"] for e in ct.events(doc, "api", "cuLaunchKernel"))
    ct.check(len(kernels) == 30 and len(launches) == 30 and sorted(kernels) == launches,
             "shared: the collector keeps its 30 kernels: %d, %d launches"
             % (len(kernels), len(launches)))
    ct.check(records == 20 and sorted(mine) == launches[5:25],
             "shared: the client gets the 20 kernels launched while it had them enabled, "
             "the 6th to the 25th launch: %d records, %s" % (records, sorted(mine)))
    # the same record, converted to the client's ticks and back: the same times within a
    # few ns (the anchors' reading), the same durations
    off = [(c, s - kernels[c]["t0"], e - kernels[c]["t1"]) for c, (s, e) in mine.items()
           if c in kernels and (abs(s - kernels[c]["t0"]) > 2000 or
                                abs((e - s) - (kernels[c]["t1"] - kernels[c]["t0"])) >
                                0.01 * (kernels[c]["t1"] - kernels[c]["t0"]))]
    ct.check(mine and not off, "shared: the client's kernel times are the collector's, "
             "converted (corr, start and end apart ns): %s" % off[:3])
got = ct.share_run(DPRO_CUPTI_SHARE="0")
if got:
    mine, records, err, doc = got
    taken = int(doc["meta"].get("cupti_taken_ns", 0))
    ct.check(err.count(TAKEN_SAID) == 1 and err.count(SHARED_SAID) == 0 and
             doc["meta"].get("cupti") == "taken" and taken > 0,
             "DPRO_CUPTI_SHARE=0: CUPTI taken, said once: %s %s" % (doc["meta"], err[-1000:]))
    # (and the records CUPTI had not delivered yet when it was taken: it hands them to its
    # new client)
    launches = sorted(e["corr"] for e in ct.events(doc, "api", "cuLaunchKernel"))
    ct.check(len(launches) == 30 and set(launches[5:25]) <= set(mine) and
             not [e for e in ct.events(doc, "kernel") if e["t0"] > taken],
             "DPRO_CUPTI_SHARE=0: the client gets its 20 kernels (of %d), the collector none "
             "after CUPTI was taken" % len(mine))

# driver launches: hooked (cuLaunchKernel) and not (a library's own pointer into libcuda)
out = ct.tmpdir()
r = ct.run([ct.DRV_JOB], env=ct.env_with(out, DPRO_CUPTI_LIB=ct.SIM_CUPTI))
files = ct.traces(out)
ct.check(r.returncode == 0 and "launches=5" in r.stdout and len(files) == 1,
         "driver job runs (%s)" % r.stderr[-300:])
if files:
    doc = ct.dump(files[0])[0]
    launches = ct.events(doc, "api", "cuLaunchKernel")
    kernels = ct.events(doc, "kernel")
    corrs = {e["corr"] for e in launches}
    ct.check(len(launches) == 5, "driver: 5 launches, 2 of them seen only by CUPTI (%d)"
             % len(launches))
    ct.check(len(kernels) == 5 and all(k["corr"] in corrs for k in kernels),
             "driver: 5 kernels, each linked to its launch")
    ct.check(all(e["name2"] == "triton_poi_fused_add_0" for e in launches),
             "driver: kernel names from cuFuncGetName")
    ct.check(sorted(e["grid"][0] for e in launches) == [8, 8, 8, 16, 16],
             "driver: launch parameters from the callback")
ct.finish()
