#!/usr/bin/env python3
"""compile_model.py MODE STEPS: a plain (no DDP) stack of 4 blocks of Linear(256, 256), GELU,
LayerNorm and Dropout, then Linear(256, 10), trained STEPS SGD steps on a batch of 64, run
eagerly (MODE eager), under torch.compile (compile) or torch.compile(mode="reduce-overhead")
(reduce-overhead).  For docs/figures.md's eager/compiled comparison: profile the eager run,
ask dpro-optimize, run the advice, compare (under simrun and dpro-run)."""
import sys

import torch

mode, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
blocks = []
for i in range(4):
    blocks += [torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
               torch.nn.Dropout(0.1)]
m = torch.nn.Sequential(*blocks, torch.nn.Linear(256, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
if mode == "eager":
    run = m
elif mode == "compile":
    run = torch.compile(m)
elif mode == "reduce-overhead":
    run = torch.compile(m, mode="reduce-overhead")
else:
    sys.exit("compile_model.py: MODE must be eager, compile or reduce-overhead, not %r" % mode)
x = torch.randn(64, 256).cuda()
for i in range(steps):
    opt.zero_grad()
    run(x).float().pow(2).mean().backward()
    opt.step()
torch.cuda.synchronize()
print("ok")
