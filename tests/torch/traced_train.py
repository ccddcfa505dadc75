#!/usr/bin/env python3
"""traced_train.py: the transformer of ddp_train.py trained with DistributedDataParallel
(backend nccl), one process per rank, marked the way users mark their training loops, for
the tests that trace it (tests/torch/test_torch_collector.py, test_torch_profiler.py).

Each step is an NVTX range "dpro_step_<i>" (torch.cuda.nvtx.range_push/pop) and its
forward a torch.autograd.profiler.record_function("dpro_forward"), which emit_nvtx() turns
into NVTX ranges as it does every operator's.  --profile FILE runs the steps from
--profile-from on under torch.profiler instead of emit_nvtx (CPU and CUDA activity, no
schedule, so no ProfilerStep range: each step is a record_function "dpro_step_<i>" too)
and exports its Kineto trace of this rank to FILE with "%d" replaced by the rank.
--async-steps keeps the host from waiting for the device inside the steps (the input is
drawn on the device, no synchronisation at a step's end), so that past DDP's first 10
iterations, whose logger waits for the device, a busy device paces the job.

Each rank writes OUT/rank<R>.json: the caching allocator's segment count
(torch.cuda.memory_stats: cudaMalloc calls made and freed), the names of the process's
threads (/proc/self/task/*/comm), the steps run and each step's time (host, from its start
to the synchronisation at its end, or to its last call with --async-steps: wall clock, and
the process's CPU time, all threads) and, with --thread-cpu-from K, each thread's CPU time
from step K's start to the last step's end, summed by thread name (thread_cpu_s: the
threads' own CPU clocks, nanosecond resolution; read outside the timed steps)."""
import argparse
import contextlib
import glob
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.autograd.profiler import emit_nvtx, record_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_train import Transformer  # noqa: E402


def thread_names():
    """The names of this process's threads."""
    names = []
    for path in glob.glob("/proc/self/task/*/comm"):
        try:
            with open(path) as f:
                names.append(f.read().strip())
        except OSError:
            pass  # the thread exited meanwhile
    return sorted(names)


def thread_cpu():
    """Each thread's CPU seconds by name (threads of one name summed): the kernel's
    per-thread CPU clock, clockid ((~tid) << 3) | 6 (CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED),
    readable for any thread of this process."""
    cpu = {}
    for path in glob.glob("/proc/self/task/*/comm"):
        tid = int(path.split("/")[4])
        try:
            with open(path) as f:
                name = f.read().strip()
            t = time.clock_gettime(((~tid) << 3) | 6)
        except OSError:
            continue  # the thread exited meanwhile
        cpu[name] = cpu.get(name, 0.0) + t
    return cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--bucket-cap-mb", type=float, default=0.05)
    ap.add_argument("--no-emit-nvtx", action="store_true",
                    help="no operator NVTX ranges (emit_nvtx) around the steps")
    ap.add_argument("--async-steps", action="store_true",
                    help="the steps never wait for the device (the input drawn on it, no "
                    "torch.cuda.synchronize() at a step's end): the host runs ahead of a busy "
                    "device, its time (a profiler's) hidden")
    ap.add_argument("--profile", default="", help="Kineto trace file (%%d: the rank)")
    ap.add_argument("--profile-from", type=int, default=0,
                    help="with --profile: the first step profiled (DDP's logger synchronises "
                    "with the device in each of the first 10 iterations)")
    ap.add_argument("--thread-cpu-from", type=int, default=-1,
                    help="record each thread's CPU time from this step on (thread_cpu_s)")
    ap.add_argument("--out", default="", help="folder for rank<R>.json")
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.cuda.current_device()
    dist.init_process_group("nccl", device_id=torch.device("cuda", dev))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = Transformer(args.dim, args.layers, 4, False).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev],
                                              bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    p = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    # emit_nvtx and torch.profiler both drive the autograd profiler: one at a time
    step_s, step_cpu_s = [], []
    cpu0 = {}
    nvtx = contextlib.nullcontext() if args.profile or args.no_emit_nvtx else emit_nvtx()
    with nvtx:
        for step in range(args.steps):
            if p and step == args.profile_from:
                p.start()
            if step == args.thread_cpu_from:
                cpu0 = thread_cpu()
            t0, c0 = time.monotonic(), time.process_time()
            torch.cuda.nvtx.range_push("dpro_step_%d" % step)
            # under the profiler the step is a record_function too (Kineto has no NVTX)
            with record_function("dpro_step_%d" % step) if p else contextlib.nullcontext():
                opt.zero_grad(set_to_none=False)
                if args.async_steps:
                    x = torch.randn(args.batch, args.seq, args.dim, device=dev)
                else:  # a copy from pageable memory: the host waits for the device
                    x = torch.randn(args.batch, args.seq, args.dim).to(dev)
                with record_function("dpro_forward"):
                    y = ddp(x)
                y.float().pow(2).mean().backward()
                opt.step()
                if not args.async_steps:
                    torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            step_s.append(time.monotonic() - t0)
            step_cpu_s.append(time.process_time() - c0)
            if p and step >= args.profile_from:
                p.step()
    cpu1 = thread_cpu() if cpu0 else {}
    if p:
        p.stop()
        p.export_chrome_trace(args.profile.replace("%d", str(rank)))
    stats = torch.cuda.memory_stats()
    threads = thread_names()
    dist.barrier()
    dist.destroy_process_group()
    rec = dict(rank=rank, steps=args.steps, segments=stats["segment.all.allocated"],
               segments_freed=stats["segment.all.freed"], threads=threads,
               step_s=[round(t, 6) for t in step_s],
               step_cpu_s=[round(t, 6) for t in step_cpu_s])
    if cpu0:
        rec["thread_cpu_s"] = {k: round(v - cpu0.get(k, 0.0), 6) for k, v in cpu1.items()}
        rec["thread_cpu_steps"] = args.steps - args.thread_cpu_from
    if args.out:
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
            json.dump(rec, f)
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
