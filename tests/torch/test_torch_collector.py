#!/usr/bin/env python3
"""test_torch_collector.py: the collector's checks on a real PyTorch job: DDP (backend
nccl) on 2 ranks of the simulated device (tests/torch/traced_train.py) under dpro-run.

Per rank: CUPTI enabled and nothing dropped; every kernel, copy and memset CUPTI reported
is linked by its correlation id to the host call that launched it (a runtime launch, a
copy, or the NCCL collective around NCCL's own kernels); the NVTX ranges of
torch.cuda.nvtx (dpro_step_<i>, once per step) and of record_function under emit_nvtx
(dpro_forward, once per step) and the operators' own ranges; the autograd engine's thread
(pt_autograd_*) launching the backward kernels; one device allocation of a multiple of 2 MiB per segment of the caching
allocator (torch.cuda.memory_stats' segment count).  Across ranks: the same communicator
hash, the same collectives (hash, sequence number, operation, bytes), the same kernel
counts.  ProcessGroupNCCL's watchdog thread (unnamed in torch 2.15) is not checked: in
a run this short it makes no CUDA call in most runs (its calls, when it makes some, are
printed with the other threads').

Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (DPRO_RUN as dpro_run, SIMRUN as simrun,  # noqa: E402
                      TRACE_DUMP as trace_dump, VENV_PY as venv_py, check, finish,
                      require_torch, sanitizer_env)

require_torch(simrun, dpro_run, trace_dump)
TRAIN = os.path.join(HERE, "traced_train.py")
STEPS = 4
SEGMENT = 2 << 20  # the caching allocator's segments are multiples of 2 MiB



def check_rank(doc, rec):
    """The per-rank checks on one trace (trace-dump's document) and the job's own record;
    returns the kernel count by name and the collectives."""
    rank = rec["rank"]
    ev = doc["events"]
    names = doc["thread_names"]
    check(doc["meta"].get("cupti") == "enabled", "rank %d: cupti %s" % (rank, doc["meta"]))
    check(doc["summary"]["dropped"] == 0, "rank %d: dropped %s" % (rank, doc["summary"]))

    # every device operation linked to its launch
    host = {e["corr"]: e for e in ev if e["kind"] in ("api", "collective") and e["corr"]}
    for kind in ("kernel", "memcpy", "memset"):
        ops = [e for e in ev if e["kind"] == kind]
        lost = [e for e in ops if e["corr"] not in host]
        check(kind != "kernel" or len(ops) > 100, "rank %d: kernels: %d" % (rank, len(ops)))
        check(not lost, "rank %d: %d of %d %s records have no host call (first: %s)"
              % (rank, len(lost), len(ops), kind, lost[:1]))
    kernels = [e for e in ev if e["kind"] == "kernel"]
    by_launch = collections.Counter(host[k["corr"]]["name"] for k in kernels if k["corr"] in host)
    check(by_launch["ncclAllReduce"] > 0 and by_launch["__cudaLaunchKernel"] > 0,
          "rank %d: kernels by the call that launched them: %s" % (rank, by_launch))

    # NVTX: torch.cuda.nvtx ranges, record_function's and the operators' under emit_nvtx
    markers = [e for e in ev if e["kind"] == "marker"]
    steps = collections.Counter(m["name"] for m in markers if m["name"].startswith("dpro_step_"))
    check(steps == collections.Counter("dpro_step_%d" % i for i in range(STEPS)),
          "rank %d: one dpro_step range per step: %s" % (rank, steps))
    fwd = [m for m in markers if m["name"].split(",")[0] == "dpro_forward"]
    check(len(fwd) == STEPS, "rank %d: one dpro_forward range per step: %d" % (rank, len(fwd)))
    step_ranges = sorted((m["t0"], m["t1"]) for m in markers if m["name"].startswith("dpro_step_"))
    check(all(any(s0 <= f["t0"] and f["t1"] <= s1 for s0, s1 in step_ranges) for f in fwd),
          "rank %d: each dpro_forward inside a dpro_step range" % rank)
    ops = sum(1 for m in markers if m["name"].startswith("aten::"))
    check(ops > 100, "rank %d: the operators' NVTX ranges (aten::*): %d" % (rank, ops))

    # threads: the autograd engine's launches the backward, the watchdog polls
    launches = collections.defaultdict(collections.Counter)
    for e in ev:
        if e["kind"] in ("api", "collective"):
            launches[e["tid"]][e["name"]] += 1
    autograd = [t for t in launches if names.get(str(t), "").startswith("pt_autograd")]
    check(any(launches[t]["__cudaLaunchKernel"] + launches[t]["cudaLaunchKernel"] > 0
              for t in autograd),
          "rank %d: an autograd thread (pt_autograd_*) launches kernels: %s"
          % (rank, {t: names.get(str(t)) for t in launches}))
    main_tid = max((t for t in launches if t not in autograd), key=lambda t: sum(launches[t].values()))
    others = {t: dict(launches[t]) for t in launches if t != main_tid and t not in autograd}

    # the caching allocator's segments
    allocs = [e for e in ev if e["kind"] == "memory" and e["sub"] == 1 and e["value"] == 0]
    segments = [a for a in allocs if a["bytes"] and a["bytes"] % SEGMENT == 0]
    check(len(segments) == rec["segments"],
          "rank %d: %d device allocations of 2 MiB multiples, torch reports %d segments: %s"
          % (rank, len(segments), rec["segments"], [a["bytes"] for a in allocs]))
    colls = sorted((e["comm"], e["seq"], e["name"], e["bytes"]) for e in ev
                   if e["kind"] == "collective")
    print("rank %d: %d kernels, %d copies, %d memsets linked; %d NVTX ranges; %d collectives; "
          "%d segments; autograd threads %s; other threads' calls %s"
          % (rank, len(kernels), sum(1 for e in ev if e["kind"] == "memcpy"),
             sum(1 for e in ev if e["kind"] == "memset"), len(markers), len(colls),
             len(segments), autograd, others))
    return collections.Counter(k["name"] for k in kernels), colls


env = sanitizer_env(dict(os.environ, SIMGPU_PHYSICS="simple", SIMGPU_NCCL_TIMEOUT_S="60"))
tmp = tempfile.mkdtemp(prefix="dpro-torch-coll-")
try:
    trace = os.path.join(tmp, "trace")
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    r = subprocess.run([dpro_run, "-o", trace, "--", simrun, "-n", "2", "--timeout", "150", "--",
                        venv_py, TRAIN, "--steps", str(STEPS), "--out", out],
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "DDP under dpro-run (rc %d): %s" % (r.returncode, r.stderr[-4000:]))
    d = subprocess.run([trace_dump, trace], capture_output=True, text=True, timeout=120)
    check(d.returncode == 0, "trace-dump: %s" % d.stderr)
    docs = {}
    for line in d.stdout.splitlines():
        doc = json.loads(line)
        docs[int(doc["meta"]["rank"])] = doc
    check(sorted(docs) == [0, 1], "one trace per rank: %s" % sorted(docs))
    results = []
    for rank in sorted(docs):
        with open(os.path.join(out, "rank%d.json" % rank)) as f:
            results.append(check_rank(docs[rank], json.load(f)))
    if len(results) == 2:
        (k0, c0), (k1, c1) = results
        check(k0 == k1, "kernel counts by name differ across ranks: %s"
              % {n: (k0[n], k1[n]) for n in set(k0) | set(k1) if k0[n] != k1[n]})
        check(len(c0) > 0 and c0 == c1, "collectives (hash, seq, op, bytes) differ across ranks: "
              "%d vs %d, first difference %s"
              % (len(c0), len(c1), [p for p in zip(c0, c1) if p[0] != p[1]][:1]))
        hashes = [{c["hash"] for c in docs[r]["comms"]} for r in (0, 1)]
        check(hashes[0] == hashes[1] and {c[0] for c in c0} <= hashes[0],
              "communicator hashes: %s" % hashes)
        seqs = collections.defaultdict(list)
        for c in c0:
            seqs[c[0]].append(c[1])
        check(all(s == list(range(len(s))) for s in seqs.values()),
              "sequence numbers per communicator run 0, 1, ...: %s" % dict(seqs))
        print("across ranks: %d kernel names, %d kernels, %d collectives matched"
              % (len(k0), sum(k0.values()), len(c0)))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
