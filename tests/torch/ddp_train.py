#!/usr/bin/env python3
"""ddp_train.py: a small transformer stack and a small conv net trained with
torch.nn.parallel.DistributedDataParallel (backend nccl), one process per rank (under
simrun or torchrun).  The knobs real users turn are flags: --bucket-cap-mb,
--grad-as-bucket-view, --static-graph, --accum N (gradient accumulation: no_sync() on the
first N-1 micro-batches), --checkpoint (torch.utils.checkpoint on every other block),
--comm-hook fp16 (DDP's fp16 compression hook), --cuda-graph (the whole step captured in
one CUDA graph, below), --compile {none,default,reduce-overhead} (torch.compile, below).
--runs "MODEL:KNOB,KNOB;..." trains several configurations one after the other in one
process (knobs: bucket=MB, view, static, accum=N, ckpt, fp16, graph; --compile applies to
each), each a fresh model and DDP.

--cuda-graph follows PyTorch's whole-network capture with DDP (CUDA semantics notes,
"Usage with DistributedDataParallel", NCCL >= 2.9.6: full-backward capture): the process
group starts with TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (DDP's asynchronous error handling
off), DDP is built on a side stream, 11 eager DDP steps warm up on that stream (not timed,
not among --steps), then one step is captured with torch.cuda.graph: what an eager step
launches but the batch's copy (optimizer.zero_grad(set_to_none=False) on the gradients
the warm-up made, the forward, the backward with DDP's bucket all-reduces, issued from
its autograd hooks into the capture, and optimizer.step()).  Each of the --steps steps copies a fresh batch into the captured
input and replays the graph: one cudaGraphLaunch instead of the step's kernel and NCCL
launches.  torch.autograd.graph.set_override_stale_capture_stream(True): the
AccumulateGrad nodes that DDP keeps from its construction refer to a stream that is not
the capture's; the override puts their work on the capturing stream.  Not with --accum
(the micro-batches under no_sync() are another graph each) nor --checkpoint.

--compile MODE wraps the model in torch.compile (mode "default" or "reduce-overhead") before
DDP: DDP(torch.compile(model)), as torch 2.15's Dynamo skips DistributedDataParallel's
forward when DDP itself is compiled (torch.compile(DDP(model)) runs eager).  Inductor
compiles (and reduce-overhead records its CUDA graphs) in the first steps:
COMPILE_WARMUP steps run before the --steps steps, neither timed nor among them.
Inductor's and Triton's caches are the caller's (TORCHINDUCTOR_CACHE_DIR,
TRITON_CACHE_DIR).  With --cuda-graph (--compile default only), the eager warm-up steps
of the capture compile, and the compiled step (its Triton kernels) is captured.

Convolutions run with torch.backends.cudnn.enabled = False (the simulated device has no
cuDNN stand-in: torch's own im2col + cuBLAS kernels run instead).

After the steps each rank writes OUT/rank<R>.json: per run a checksum of its parameters'
bytes and of its gradients' bytes after the last backward (CPU arithmetic on copies, so it
means the same on a real GPU and on the simulated one, whose kernels compute nothing; the
steps before synchronise only, as a loop that logs its loss does), the wall-clock time of
every step but the first (iter_us: from one synchronisation after the backward to the
next), torch.cuda.max_memory_reserved() / max_memory_allocated() over the run, and the
caching allocator's state before the steps (before_steps: memory_reserved(),
memory_allocated()) and after the first (first_step: memory_reserved(),
max_memory_allocated()).  --step-ranges FROM puts each step from step FROM on in an NVTX
range "step <i>" (torch.cuda.nvtx), which the replay takes as iteration markers (FROM 1:
the first step unmarked, as where a profiler starts after it).  Before the model is built
each rank fills the caching allocator's memory with bytes of its own, so that memory no
collective overwrote differs between ranks."""
import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.utils.checkpoint as ckpt


class Block(nn.Module):
    """A pre-norm transformer block: attention and an MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.n1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.n2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.n1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


class Transformer(nn.Module):
    def __init__(self, dim, layers, heads, checkpoint):
        super().__init__()
        self.inp = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.out = nn.Linear(dim, 16)
        self.checkpoint = checkpoint

    def forward(self, x):
        x = self.inp(x)
        for i, b in enumerate(self.blocks):
            if self.checkpoint and i % 2 == 0:
                x = ckpt.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        return self.out(x.mean(dim=1))


class ConvNet(nn.Module):
    def __init__(self, width, layers, checkpoint):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
            for _ in range(layers))
        self.head = nn.Linear(width, 10)
        self.checkpoint = checkpoint

    def forward(self, x):
        x = self.stem(x)
        for i, b in enumerate(self.blocks):
            if self.checkpoint and i % 2 == 0:
                x = ckpt.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        return self.head(x.mean(dim=(2, 3)))


def checksum(tensors):
    """A checksum of the tensors' bytes, computed on CPU copies."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        b = t.detach().cpu().contiguous().view(-1).view(torch.uint8).to(torch.int64)
        w = torch.arange(1, b.numel() + 1, dtype=torch.int64) % 65521
        total = (total * 1000003 + int((b * w).sum())) % (1 << 61)
    return total


def fill_allocator(rank, mib):
    """Fills mib MiB of the caching allocator's memory, small and large blocks, with bytes
    of this rank's own (copied from the host), then gives it back to the allocator."""
    g = torch.Generator().manual_seed(1000 + rank)
    held = []
    for size in [256 << 10] * 16 + [(mib << 20) // 4] * 4:
        held.append(torch.randint(0, 256, (size,), dtype=torch.uint8, generator=g).cuda())
    torch.cuda.synchronize()
    del held


def parse_runs(args):
    """The configurations: --runs, else one from the flags."""
    if not args.runs:
        return [dict(model=args.model, bucket=args.bucket_cap_mb, view=args.grad_as_bucket_view,
                     static=args.static_graph, accum=args.accum, ckpt=args.checkpoint,
                     hook=args.comm_hook, graph=args.cuda_graph, compile=args.compile)]
    runs = []
    for spec in args.runs.split(";"):
        model, _, knobs = spec.partition(":")
        r = dict(model=model, bucket=args.bucket_cap_mb, view=False, static=False, accum=1,
                 ckpt=False, hook="none", graph=False, compile=args.compile)
        for k in filter(None, knobs.split(",")):
            key, _, val = k.partition("=")
            if key == "bucket":
                r["bucket"] = float(val)
            elif key == "accum":
                r["accum"] = int(val)
            elif key in ("view", "static", "ckpt", "graph"):
                r[key] = True
            elif key == "fp16":
                r["hook"] = "fp16"
            else:
                raise SystemExit("ddp_train.py: --runs %r: unknown knob %r" % (spec, k))
        if model not in ("transformer", "conv"):
            raise SystemExit("ddp_train.py: --runs %r: unknown model %r" % (spec, model))
        runs.append(r)
    for r in runs:
        if r["graph"] and (r["accum"] > 1 or r["ckpt"]):
            raise SystemExit("ddp_train.py: --cuda-graph captures one step of one batch: not "
                             "with --accum or --checkpoint")
        if r["graph"] and r["compile"] == "reduce-overhead":
            raise SystemExit("ddp_train.py: --cuda-graph and --compile reduce-overhead: one "
                             "capture at a time")
    return runs


GRAPH_WARMUP = 11  # eager DDP steps before a capture (PyTorch's DDP capture recipe)
# steps before the timed ones under --compile: Inductor compiles the forward in the first and
# the backward in its backward; reduce-overhead's CUDA graph trees warm up, then record
COMPILE_WARMUP = 3


def eager_step(ddp, opt, make, dev, accum, to_none=False):
    """One step without capture: accum micro-batches, the first accum-1 under no_sync();
    synchronises after the backward. Returns the time of that synchronisation; the caller
    runs opt.step(). to_none: the gradients set to None, not zeroed (reduce-overhead: a
    gradient its CUDA graph made is overwritten by the next replay, so it is not accumulated
    into)."""
    opt.zero_grad(set_to_none=to_none)
    for micro in range(accum):
        last = micro == accum - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            x = make().to(dev)
            ddp(x).float().pow(2).mean().backward()
    torch.cuda.synchronize()
    return time.monotonic()


def capture_step(ddp, opt, make, dev, side):
    """--cuda-graph: GRAPH_WARMUP eager steps on the side stream DDP was built on, then one
    step (zero_grad, forward, backward with DDP's all-reduces, opt.step()) captured.
    Returns (the graph, its static input)."""
    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP):
            eager_step(ddp, opt, make, dev, 1)
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    static_x = make().to(dev)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the eager step's work: its zero_grad() on the warm
        opt.zero_grad(set_to_none=False)  # gradients included, the batch's copy not
        ddp(static_x).float().pow(2).mean().backward()
        opt.step()
    torch.cuda.synchronize()
    return graph, static_x


def train(run, args, rank, dev):
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    if run["model"] == "transformer":
        model = Transformer(args.dim, args.layers, 4, run["ckpt"]).to(dev)
        make = lambda: torch.randn(args.batch, args.seq, args.dim)  # noqa: E731
    else:
        model = ConvNet(args.width, args.layers, run["ckpt"]).to(dev)
        make = lambda: torch.randn(args.batch, 3, args.image, args.image)  # noqa: E731
    net = model
    if run["compile"] != "none":  # DDP(torch.compile(model)): the docstring says why
        net = torch.compile(model, mode=run["compile"])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # a capture needs DDP built on a side stream; without one, the current stream
    with torch.cuda.stream(side) if run["graph"] else contextlib.nullcontext():
        ddp = nn.parallel.DistributedDataParallel(
            net, device_ids=[dev], bucket_cap_mb=run["bucket"],
            gradient_as_bucket_view=run["view"], static_graph=run["static"])
    if run["hook"] == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    graph = None
    if run["graph"]:
        graph, static_x = capture_step(ddp, opt, make, dev, side)
    to_none = run["compile"] == "reduce-overhead"
    for _ in range(COMPILE_WARMUP if run["compile"] != "none" and not run["graph"] else 0):
        eager_step(ddp, opt, make, dev, run["accum"], to_none)
        opt.step()
    grads = 0
    torch.cuda.reset_peak_memory_stats()
    before = dict(reserved=torch.cuda.memory_reserved(), allocated=torch.cuda.memory_allocated())
    first = None
    t0 = time.monotonic()
    syncs = []
    for step in range(args.steps):
        if 0 <= args.step_ranges <= step:
            torch.cuda.nvtx.range_push("step %d" % step)
        if graph is None:
            syncs.append(eager_step(ddp, opt, make, dev, run["accum"], to_none))
        else:
            static_x.copy_(make())
            graph.replay()
            torch.cuda.synchronize()
            syncs.append(time.monotonic())
        if step == args.steps - 1:
            grads = checksum(p.grad for p in model.parameters())
        if graph is None:
            opt.step()
        if 0 <= args.step_ranges <= step:
            torch.cuda.nvtx.range_pop()
        if step == 0:
            torch.cuda.synchronize()
            first = dict(reserved=torch.cuda.memory_reserved(),
                         max_allocated=torch.cuda.max_memory_allocated())
    torch.cuda.synchronize()
    return dict(run, params=checksum(model.parameters()), grads=grads,
                seconds=round(time.monotonic() - t0, 3),
                iter_us=[round((b - a) * 1e6, 1) for a, b in zip(syncs, syncs[1:])],
                max_memory_reserved=torch.cuda.max_memory_reserved(),
                max_memory_allocated=torch.cuda.max_memory_allocated(),
                before_steps=before, first_step=first)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["transformer", "conv"], default="transformer")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--grad-as-bucket-view", action="store_true")
    ap.add_argument("--static-graph", action="store_true")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step (no_sync)")
    ap.add_argument("--checkpoint", action="store_true", help="checkpoint every other block")
    ap.add_argument("--comm-hook", choices=["none", "fp16"], default="none")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="capture the whole step in a CUDA graph (see the docstring)")
    ap.add_argument("--compile", choices=["none", "default", "reduce-overhead"], default="none",
                    help="DDP(torch.compile(model, mode=MODE)) (see the docstring)")
    ap.add_argument("--runs", default="", help='"MODEL:KNOB,...;..." (see the docstring)')
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--image", type=int, default=16)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--fill-mib", type=int, default=64)
    ap.add_argument("--step-ranges", type=int, default=-1, metavar="FROM",
                    help='steps FROM on inside an NVTX range "step <i>" each (iteration '
                    'markers; -1: none)')
    ap.add_argument("--out", default="", help="folder for rank<R>.json")
    args = ap.parse_args()
    runs = parse_runs(args)
    if any(r["graph"] for r in runs):
        # PyTorch's DDP capture recipe: before the process group starts
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
        torch.autograd.graph.set_override_stale_capture_stream(True)

    torch.backends.cudnn.enabled = False
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.cuda.current_device()
    dist.init_process_group("nccl", device_id=torch.device("cuda", dev))
    rank, world = dist.get_rank(), dist.get_world_size()
    fill_allocator(rank, args.fill_mib)
    results = [train(r, args, rank, dev) for r in runs]
    dist.barrier()
    dist.destroy_process_group()
    rec = dict(rank=rank, world=world, runs=results)
    if args.out:
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
            json.dump(rec, f)
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
