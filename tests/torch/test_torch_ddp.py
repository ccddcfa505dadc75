#!/usr/bin/env python3
"""test_torch_ddp.py: torch DistributedDataParallel (backend nccl) on the simulated
device, 2 ranks under simrun (tests/torch/ddp_train.py).

1. Five configurations in one job: the transformer plain; with 10 KiB buckets,
   gradient_as_bucket_view and static_graph; with 2 micro-batches under no_sync() and
   torch.utils.checkpoint; the conv net plain; with the fp16 compression hook and 50 KiB
   buckets.  Each rank starts from weights of its own seed and fills the caching
   allocator with bytes of its own, so only data that NCCL really moved agree
   (SIMGPU_NCCL_DATA=1: every operation moves its data): after the steps the checksums
   of the parameters (DDP's broadcast from rank 0) and of the gradients (its all-reduced
   buckets) must be equal on both ranks.
2. The transformer once under dpro-run (8 steps, no markers): dpro-info shows the NCCL and
   compute kernels of both ranks, both traces hold the same collectives (communicator,
   sequence number, operation, bytes), dpro-replay finds the steady steps from the kernel
   sequence's period and replays them, and dpro-optimize advises DDP's bucket_cap_mb and
   estimates the peak memory within 10 % of torch.cuda.max_memory_reserved(); from the
   copies back into the gradients it learns the parameter sizes: on a wider model traced
   with one bucket, the plan for bucket_cap_mb=0.5, applied (a traced run of 3 steps),
   makes the all-reduces it predicts, their count and bytes (DDP's buckets of whole
   parameters); the plan for 2 micro-batches under no_sync() predicts the device operations
   of the applied run's extra micro-batch. The reports show CUPTI's mangled kernel names
   demangled: dpro-optimize's fusion plans and framework evidence, dpro-replay's
   perturbation rows name at::native:: kernels and no "_ZN" name (they once read
   "_ZN2at6native53_GLOBAL__N__...").
3. The transformer with --cuda-graph (the whole step captured with torch.cuda.graph, DDP's
   all-reduces inside) under dpro-run: parameters and gradients agree across the ranks
   (only the replayed all-reduces make them agree), each rank's trace holds one
   cudaGraphLaunch per step and an NCCL all-reduce kernel per replay (the captured
   ncclAllReduce call launches nothing itself).

Skips (77) without venv/ (make venv) or with DPRO_TORCH=0."""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchlib import (BUILD, DPRO_INFO as dpro_info, DPRO_RUN as dpro_run,  # noqa: E402
                      SIMRUN as simrun, TRACE_DUMP as trace_dump, VENV_PY as venv_py,
                      check, finish, require_torch, sanitizer_env, step_allreduces,
                      step_device_ops)

dpro_replay = os.path.join(BUILD, "tools", "dpro-replay")
dpro_optimize = os.path.join(BUILD, "tools", "dpro-optimize")
require_torch(simrun, dpro_run, dpro_info, dpro_replay, dpro_optimize, trace_dump)
TRAIN = os.path.join(HERE, "ddp_train.py")
RUNS = ("transformer:;transformer:bucket=0.01,view,static;transformer:accum=2,ckpt;"
        "conv:;conv:fp16,bucket=0.05")

STEPS = 8  # of the traced run
GRAPH_STEPS = 4  # replays of the captured step


def run_records(out):
    """The runs rank 0 wrote to OUT/rank0.json (empty if none)."""
    path = os.path.join(out, "rank0.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["runs"]


env = dict(os.environ)
env["SIMGPU_PHYSICS"] = "simple"
env["SIMGPU_NCCL_TIMEOUT_S"] = "60"
# Every NCCL operation moves its data: the checksums below read DDP's broadcast and
# all-reduced buckets, which by default (over 64 KiB) move none (tests/simgpu/README.md).
env["SIMGPU_NCCL_DATA"] = "1"
env = sanitizer_env(env)


def whole_parameter_buckets(tmp):
    """DDP's buckets hold whole parameters: on a trace of one 6.3 MiB bucket (--dim 256,
    bucket_cap_mb=200) dpro-optimize learns the 28 parameter sizes from DDP's copies back
    into the gradients, and its plan for bucket_cap_mb=0.5, applied, makes the all-reduces
    it predicts, byte for byte (cut at any byte the plan made 13 where DDP makes 7), each
    bucket ready at its last parameter's copy into the bucket."""
    runs = {}
    for name, knobs, steps in (("whole", "bucket=200", STEPS), ("whole-applied", "bucket=0.5", 3),
                               ("accum-applied", "bucket=200,accum=2", 5)):
        trace = os.path.join(tmp, name + "-trace")
        out = os.path.join(tmp, name)
        os.mkdir(out)
        r = subprocess.run([dpro_run, "-o", trace, "--"]
                           + job(out, "transformer:" + knobs, steps, ["--dim", "256"]),
                           env=env, capture_output=True, text=True, timeout=200)
        check(r.returncode == 0, "%s under dpro-run (rc %d): %s"
              % (knobs, r.returncode, r.stderr[-4000:]))
        runs[name] = (trace, sorted(glob.glob(os.path.join(trace, "rank*.dpro"))))
    micro_batch_launches(runs["whole"], runs["accum-applied"])
    op = subprocess.run([dpro_optimize, runs["whole"][0], "--json", "--quiet", "--what-if",
                         "bucket_cap_mb=0.5"], capture_output=True, text=True, timeout=120)
    if not check(op.returncode == 0, "dpro-optimize --what-if (rc %d): %s"
                 % (op.returncode, op.stderr[-2000:])):
        return
    j = json.loads(op.stdout)
    check(j["models"]["bucket_params"] == 28, "28 parameter sizes learnt from DDP's copies: %s"
          % j["models"].get("bucket_params"))
    # each bucket ready at its last parameter's copy into the bucket (the kernels of the
    # all-reduce's gating kernel's name), not at a byte share of the backward's time
    check(j["models"].get("partition_bytes") == "parameter_copies"
          and j["models"].get("partition_units_by_copies") == 1,
          "the bucket's bytes placed by DDP's copies into it: %s" % j["models"])
    knobs = j["strategies"][0]["knobs"] if j["strategies"] else {}
    predicted = knobs.get("bucket_bytes", [])
    realised = step_allreduces(runs["whole-applied"][1][0]) if runs["whole-applied"][1] else None
    check(realised is not None, "the applied run's last step: all-reduces adding up to the "
          "first step's one bucket")
    realised = realised or []
    check(knobs.get("buckets") == len(realised) and predicted == realised,
          "bucket_cap_mb=0.5: the plan's all-reduces %s, the applied run's %s"
          % (predicted, realised))
    print("bucket_cap_mb=0.5 on one 6.3 MiB bucket: %d all-reduces a step predicted, %d "
          "realised, bytes equal: %s" % (len(predicted), len(realised), predicted == realised))


def micro_batch_launches(base, applied):
    """The plan's micro-batch under no_sync() launches what the applied run's does: its
    predicted device operations (micro_batch_launches of no_sync=2 on the one-bucket trace
    base) are the applied run's steady step (accum=2) less the trace's (the commonest count
    of a step on rank 0: counts do not depend on the load). Without the operations only
    the synchronised micro-batch runs (DDP's copies into the bucket and back, the
    gradients' zeroing) and with the forward priced, 170 of the 170; main priced 187.
    The host makes and copies 1/k of the batch in each of k micro-batches (workload.h:
    WL_MICRO_INPUT): the micro-batch of no_sync=2 costs the host more than no_sync=4's, by
    a quarter of the input copy's call and the gap before it (main: the same for every k)."""
    plans = {}
    for k in (2, 4):
        op = subprocess.run([dpro_optimize, base[0], "--json", "--quiet", "--what-if",
                             "no_sync=%d" % k], capture_output=True, text=True, timeout=120)
        if not check(op.returncode == 0 and base[1] and applied[1], "dpro-optimize --what-if "
                     "no_sync=%d (rc %d): %s" % (k, op.returncode, op.stderr[-2000:])):
            return
        top = json.loads(op.stdout)["strategies"]
        plans[k] = top[0] if top else {}
    host = [plans[k].get("micro_batch_host_us", 0) for k in (2, 4)]
    check(host[0] > host[1] > 0, "the micro-batch's host time, no_sync=2: %g us, no_sync=4: "
          "%g us (the input's share should shrink with the micro-batch)" % tuple(host))
    predicted = plans[2].get("micro_batch_launches")
    steps = [step_device_ops(t[1][0]) or [0] for t in (base, applied)]
    common = [collections.Counter(s).most_common(1)[0][0] for s in steps]
    check(predicted == common[1] - common[0],
          "no_sync=2: the micro-batch predicted to launch %s device operations, the applied "
          "run's %d (steps of %d and %d; per step %s, %s)"
          % (predicted, common[1] - common[0], common[1], common[0], steps[1], steps[0]))
    print("no_sync=2: the micro-batch under no_sync() launches %s device operations "
          "predicted, %d realised; its host time %.1f us (no_sync=4: %.1f us)"
          % (predicted, common[1] - common[0], host[0], host[1]))


def job(out, runs, steps, extra=()):
    return [simrun, "-n", "2", "--timeout", "150", "--", venv_py, TRAIN, "--runs", runs,
            "--steps", str(steps), "--out", out] + list(extra)


tmp = tempfile.mkdtemp(prefix="dpro-torch-ddp-")
try:
    # 1. the knobs: parameters and gradients agree across the ranks
    out = os.path.join(tmp, "knobs")
    os.mkdir(out)
    r = subprocess.run(job(out, RUNS, 3), env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "5 DDP configurations on 2 ranks (rc %d): %s"
          % (r.returncode, r.stderr[-4000:]))
    recs = []
    for rank in range(2):
        path = os.path.join(out, "rank%d.json" % rank)
        if check(os.path.exists(path), "rank %d wrote %s" % (rank, path)):
            with open(path) as f:
                recs.append(json.load(f))
    if len(recs) == 2:
        a, b = recs[0]["runs"], recs[1]["runs"]
        check(len(a) == 5 and len(b) == 5, "5 runs on each rank: %d, %d" % (len(a), len(b)))
        for x, y in zip(a, b):
            name = "%s %s" % (x["model"], {k: x[k] for k in ("bucket", "view", "static",
                                                              "accum", "ckpt", "hook")})
            check(x["params"] != 0, "%s: parameters hold data (checksum 0)" % name)
            check(x["params"] == y["params"],
                  "%s: parameters differ across ranks: %d vs %d" % (name, x["params"], y["params"]))
            check(x["grads"] == y["grads"],
                  "%s: gradients differ across ranks: %d vs %d" % (name, x["grads"], y["grads"]))
            print("%s: %.2f s, parameters and gradients agree" % (name, x["seconds"]))

    # 2. under the collector: kernels, matched collectives, replay
    trace = os.path.join(tmp, "trace")
    out = os.path.join(tmp, "traced")
    os.mkdir(out)
    r = subprocess.run([dpro_run, "-o", trace, "--"] + job(out, "transformer:bucket=0.05", STEPS),
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "DDP under dpro-run (rc %d): %s" % (r.returncode, r.stderr[-4000:]))
    files = sorted(glob.glob(os.path.join(trace, "rank*.dpro")))
    check(len(files) == 2, "one trace per rank: %s" % files)
    info = subprocess.run([dpro_info, "--json", "--kernels=50", trace], capture_output=True,
                          text=True, timeout=60)
    if check(info.returncode == 0, "dpro-info: %s" % info.stderr):
        per_rank = json.loads(info.stdout)["kernels"]["per_rank"]
        check(len(per_rank) == 2, "dpro-info: kernels of 2 ranks: %d" % len(per_rank))
        for k in per_rank:
            cat = k["categories"]
            names = [t["name"] for t in k["top_kernels"]]
            check(cat["communication"]["count"] > 0 and cat["compute"]["count"] > 0,
                  "rank %d: communication and compute kernels: %s" % (k["rank"], cat))
            check(any(n.startswith("ncclDevKernel_AllReduce") for n in names),
                  "rank %d: an NCCL all-reduce kernel among %s" % (k["rank"], names[:10]))
    colls = []
    for f in files:
        d = subprocess.run([trace_dump, f], capture_output=True, text=True, timeout=60)
        if check(d.returncode == 0 and d.stdout, "trace-dump %s: %s" % (f, d.stderr)):
            ev = json.loads(d.stdout.splitlines()[0])["events"]
            colls.append(sorted((e["comm"], e["seq"], e["name"], e["bytes"])
                                for e in ev if e["kind"] == "collective"))
    if len(colls) == 2:
        ar = [c for c in colls[0] if c[2] == "ncclAllReduce"]
        check(len(ar) >= 3, "rank 0: an all-reduce per step at least: %d" % len(ar))
        check(colls[0] == colls[1], "both ranks' collectives match (comm, seq, op, bytes): "
              "%d vs %d, first difference %s" % (len(colls[0]), len(colls[1]),
                                                 [p for p in zip(colls[0], colls[1])
                                                  if p[0] != p[1]][:1]))
        print("traced: %d collectives per rank, %d all-reduces, matched" % (len(colls[0]), len(ar)))
    rp = subprocess.run([dpro_replay, trace, "--json"], capture_output=True, text=True,
                        timeout=120)
    if check(rp.returncode == 0, "dpro-replay (rc %d): %s" % (rp.returncode, rp.stderr[-2000:])):
        j = json.loads(rp.stdout)
        check(j["ranks"] == 2 and j["collectives"] > 0 and j["simulated_iter_us"] > 0,
              "dpro-replay: 2 ranks, collectives, a simulated iteration: %s"
              % {k: j.get(k) for k in ("ranks", "collectives", "simulated_iter_us")})
        # no markers: the steps come from the kernel sequence's period, the first step
        # (other kernels: gradients and optimizer state created) and the closing barrier
        # left out; an iteration is a step, a fraction of the traced run
        methods = [q["iteration_method"] for q in j["per_rank"]]
        check(methods == ["kernel-period"] * 2, "iterations from the kernel period: %s" % methods)
        check(j["iterations"] >= 2, "at least 2 steady iterations of %d steps compared: %d"
              % (STEPS, j["iterations"]))
        check("no iterations found" not in rp.stderr, "dpro-replay: %s" % rp.stderr[-500:])
        span_us = max(r["seconds"] for r in run_records(out)) * 1e6
        check(0 < j["measured_iter_us"] < span_us / (STEPS - 2),
              "an iteration (%.0f us) is a step of the %d-step run (%.0f us)"
              % (j["measured_iter_us"], STEPS, span_us))
        print("replay: %d iterations (kernel period), measured %.0f us, simulated %.0f us, "
              "%d collectives" % (j["iterations"], j["measured_iter_us"], j["simulated_iter_us"],
                                  j["collectives"]))
    # kernel names demangled where the reports print them
    for cmd in ([dpro_optimize, trace, "-q", "--strategies", "fusion", "--max-evals", "20"],
                [dpro_replay, trace, "--perturb", "3"]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        what = " ".join(os.path.basename(c) for c in cmd[:1] + cmd[2:])
        check(p.returncode == 0 and "at::native::" in p.stdout and "_ZN" not in p.stdout,
              "%s: kernel names demangled (rc %d, %s)"
              % (what, p.returncode, [w for w in p.stdout.split() if "_ZN" in w][:2]))
    # advice in PyTorch's terms, bucket sizes first (the 50 KiB buckets of the trace)
    op = subprocess.run([dpro_optimize, trace, "--json", "--quiet", "--strategies", "tensor"],
                        capture_output=True, text=True, timeout=120)
    if check(op.returncode == 0, "dpro-optimize (rc %d): %s" % (op.returncode, op.stderr[-2000:])):
        j = json.loads(op.stdout)
        check(j["framework"]["name"] == "pytorch-ddp", "framework: %s" % j["framework"])
        top = j["strategies"][0] if j["strategies"] else {}
        knobs = top.get("knobs", {})
        check(top.get("kind") in ("tensor_fusion", "tensor_partition")
              and "bucket_cap_mb" in knobs.get("torch_args", "")
              and "DDP(model, bucket_cap_mb=" in top.get("advice", ""),
              "a DDP bucket_cap_mb advice: %s" % top)
        print("optimize: %s: %.0f us predicted (x%.3f), %s buckets"
              % (knobs.get("torch_args"), top.get("predicted_iter_us", 0),
                 top.get("predicted_speedup", 0), knobs.get("buckets")))
        check(j["models"]["bucket_params"] > 0,
              "the parameter sizes learnt from DDP's copies back into the gradients: %s"
              % j["models"])
        whole_parameter_buckets(tmp)
        # the peak-memory estimate (from the allocator's segments in the trace) against
        # what the job's allocator reports: within 10 % of max_memory_reserved
        reserved = max((r.get("max_memory_reserved", 0) for r in run_records(out)), default=0)
        est = j["baseline_peak_memory_bytes"]
        check(reserved > 0 and abs(est - reserved) <= 0.10 * reserved,
              "peak memory estimated %d bytes, torch.cuda.max_memory_reserved() %d: not within "
              "10 %%" % (est, reserved))
        print("peak memory: estimated %.1f MiB, max_memory_reserved %.1f MiB"
              % (est / 1048576.0, reserved / 1048576.0))

    # 3. the whole step captured: agreement across ranks, graph launches in the trace
    trace = os.path.join(tmp, "graph-trace")
    out = os.path.join(tmp, "graph")
    os.mkdir(out)
    r = subprocess.run([dpro_run, "-o", trace, "--"] + job(out, "transformer:graph", GRAPH_STEPS),
                       env=env, capture_output=True, text=True, timeout=200)
    check(r.returncode == 0, "captured DDP step under dpro-run (rc %d): %s"
          % (r.returncode, r.stderr[-4000:]))
    recs = []
    for rank in range(2):
        path = os.path.join(out, "rank%d.json" % rank)
        if check(os.path.exists(path), "captured: rank %d wrote %s" % (rank, path)):
            with open(path) as f:
                recs.append(json.load(f)["runs"][0])
    if len(recs) == 2:
        x, y = recs
        check(x["graph"] and len(x["iter_us"]) == GRAPH_STEPS - 1,
              "the captured run: %d step times" % len(x["iter_us"]))
        check(x["params"] != 0 and x["params"] == y["params"] and x["grads"] == y["grads"],
              "captured step: parameters (%d, %d) and gradients (%d, %d) agree across ranks"
              % (x["params"], y["params"], x["grads"], y["grads"]))
    files = sorted(glob.glob(os.path.join(trace, "rank*.dpro")))
    check(len(files) == 2, "captured: one trace per rank: %s" % files)
    for f in files:
        d = subprocess.run([trace_dump, f], capture_output=True, text=True, timeout=60)
        if not check(d.returncode == 0 and d.stdout, "trace-dump %s: %s" % (f, d.stderr)):
            continue
        ev = json.loads(d.stdout.splitlines()[0])["events"]
        launches = sum(1 for e in ev if e["kind"] == "api" and e["name"] == "cudaGraphLaunch")
        calls = sum(1 for e in ev if e["kind"] == "collective" and e["name"] == "ncclAllReduce")
        kernels = sum(1 for e in ev if e["kind"] == "kernel"
                      and e["name"].startswith("ncclDevKernel_AllReduce"))
        check(launches == GRAPH_STEPS, "%s: one cudaGraphLaunch per step: %d of %d steps"
              % (os.path.basename(f), launches, GRAPH_STEPS))
        # the captured call launches its kernel in the replays only
        check(kernels == calls - 1 + GRAPH_STEPS,
              "%s: the replays' all-reduce kernels: %d kernels, %d ncclAllReduce calls (one "
              "captured), %d replays" % (os.path.basename(f), kernels, calls, GRAPH_STEPS))
        print("captured: %s: %d graph launches, %d all-reduce kernels for %d ncclAllReduce calls"
              % (os.path.basename(f), launches, kernels, calls))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
