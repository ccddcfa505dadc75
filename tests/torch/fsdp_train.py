#!/usr/bin/env python3
"""fsdp_train.py: a small MLP stack trained with FSDP2 (torch.distributed.fsdp.fully_shard,
backend nccl), one process per rank (under simrun or torchrun): every block is sharded,
then the root.  Flags: --reshard-after-forward 0|1, --prefetch N (explicit forward and
backward prefetch of the next / previous N blocks), --accum K (gradient accumulation: K
micro-batches of --batch per optimizer step, the gradients reduce-scattered only in the
last one's backward: set_requires_gradient_sync(False) before the others), --runs
"R:P;..." (several (reshard, prefetch) configurations one after the other in one process).

Each rank builds the model from a seed of its own, so the parameters FSDP2 shards differ
between the ranks; after the steps each rank gathers the full parameters (full_tensor:
an all-gather) and writes OUT/rank<R>.json with a checksum of their bytes (CPU arithmetic
on copies), which agrees across the ranks only when the all-gathers moved the shards,
the wall-clock time of every step but the first (iter_us: from one synchronisation after
the backward to the next), torch.cuda.max_memory_reserved() / max_memory_allocated()
over the run, and the caching allocator's state before the steps (before_steps:
memory_reserved(), memory_allocated()) and after the first (first_step: memory_reserved(),
max_memory_allocated()). --step-ranges FROM puts each step from step FROM on in an NVTX
range "step <i>" (torch.cuda.nvtx), which the replay takes as iteration markers (FROM 1:
the first step unmarked, as where a profiler starts after it)."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard



def checksum(tensors):
    """A checksum of the tensors' bytes, computed on CPU copies."""
    total = 0
    for t in tensors:
        b = t.detach().cpu().contiguous().view(-1).view(torch.uint8).to(torch.int64)
        w = torch.arange(1, b.numel() + 1, dtype=torch.int64) % 65521
        total = (total * 1000003 + int((b * w).sum())) % (1 << 61)
    return total


def train(rank, dev, reshard, prefetch, args):
    torch.manual_seed(100 + rank)
    blocks = [nn.Sequential(nn.Linear(args.dim, 2 * args.dim), nn.ReLU(),
                            nn.Linear(2 * args.dim, args.dim)) for _ in range(args.layers)]
    model = nn.Sequential(*blocks, nn.Linear(args.dim, 8)).to(dev)
    for b in blocks:
        fully_shard(b, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    if prefetch > 0:
        for i, b in enumerate(blocks):
            b.set_modules_to_forward_prefetch(blocks[i + 1:i + 1 + prefetch])
            b.set_modules_to_backward_prefetch(blocks[max(0, i - prefetch):i][::-1])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.cuda.reset_peak_memory_stats()
    before = dict(reserved=torch.cuda.memory_reserved(), allocated=torch.cuda.memory_allocated())
    first = None
    syncs = []
    for step in range(args.steps):
        if 0 <= args.step_ranges <= step:
            torch.cuda.nvtx.range_push("step %d" % step)
        for micro in range(args.accum):
            model.set_requires_gradient_sync(micro == args.accum - 1)
            x = torch.randn(args.batch, args.dim).to(dev)
            model(x).float().pow(2).mean().backward()
        torch.cuda.synchronize()
        syncs.append(time.monotonic())
        opt.step()
        opt.zero_grad()
        if 0 <= args.step_ranges <= step:
            torch.cuda.nvtx.range_pop()
        if step == 0:
            torch.cuda.synchronize()
            first = dict(reserved=torch.cuda.memory_reserved(),
                         max_allocated=torch.cuda.max_memory_allocated())
    torch.cuda.synchronize()
    memory = dict(max_memory_reserved=torch.cuda.max_memory_reserved(),
                  max_memory_allocated=torch.cuda.max_memory_allocated(),
                  before_steps=before, first_step=first)
    full = [p.full_tensor() for p in model.parameters()]
    torch.cuda.synchronize()
    return dict(reshard=reshard, prefetch=prefetch, accum=args.accum, params=checksum(full),
                shards=checksum(p.to_local() for p in model.parameters()),
                iter_us=[round((b - a) * 1e6, 1) for a, b in zip(syncs, syncs[1:])], **memory)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reshard-after-forward", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--runs", default="", help='"RESHARD:PREFETCH;..."')
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--step-ranges", type=int, default=-1, metavar="FROM",
                    help='steps FROM on inside an NVTX range "step <i>" each (iteration '
                    'markers; -1: none)')
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    confs = [(args.reshard_after_forward, args.prefetch)]
    if args.runs:
        try:
            confs = [tuple(int(v) for v in r.split(":")) for r in args.runs.split(";")]
        except ValueError:
            raise SystemExit("fsdp_train.py: --runs %r: want RESHARD:PREFETCH;..." % args.runs)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.cuda.current_device()
    dist.init_process_group("nccl", device_id=torch.device("cuda", dev))
    rank, world = dist.get_rank(), dist.get_world_size()
    runs = [train(rank, dev, bool(r), p, args) for r, p in confs]
    dist.barrier()
    dist.destroy_process_group()
    rec = dict(rank=rank, world=world, runs=runs)
    if args.out:
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
            json.dump(rec, f)
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
