#!/usr/bin/env python3
"""The world physics end to end (SIMGPU_PHYSICS=world): ddp-sim runs to the end on two
ranks in worlds of every profile (plain, and captured into a CUDA graph), and no part of
dpro (its sources outside tests/) names a world's settings or parameters: dpro must learn
the physics from traces.  Nothing here is timed."""
import os
import sys

SRC = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(SRC, "tests", "simgpu"))
from simgpu_test import DDP_SIM, SIMRUN, check, ddp, skip_unless_built  # noqa: E402

# dpro's own code: what must not know the world.
DPRO_DIRS = ["collector", "replay", "optimizer", "common", "schemas", "tools"]
HIDDEN = ["SIMGPU_WORLD_SEED", "SIMGPU_PROFILE", "SIMGPU_PHYSICS", "SIMGPU_GPUS_PER_NODE",
          "simgpu_world", "world.h"]


def scan_sources():
    """Fails when a dpro source file names a world setting."""
    for d in DPRO_DIRS:
        for root, _, files in os.walk(os.path.join(SRC, d)):
            for f in files:
                path = os.path.join(root, f)
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        text = fh.read()
                except OSError:
                    continue
                for h in HIDDEN:
                    check(h not in text, "%s names %s: dpro must not see the world" % (path, h))


scan_sources()
skip_unless_built(SIMRUN, DDP_SIM)
JOB = ["--preset", "resnet50", "--layers", "2", "--iterations", "2", "--warmup", "1"]
for profile, seed, extra in [("a100", "3", []), ("h100", "4", ["--cuda-graph"]),
                             ("h200", "5", ["--dtype", "bf16"])]:
    world = {"SIMGPU_PHYSICS": "world", "SIMGPU_PROFILE": profile, "SIMGPU_WORLD_SEED": seed}
    rows = ddp(2, JOB + extra, physics=world)
    check(len(rows) == 2 and all(len(r["iter_us"]) == 2 for r in rows),
          "%s world %s: %s" % (profile, seed, rows))
    print("ok: %s world %s %s: %s us" % (profile, seed, " ".join(extra),
                                         [r["mean_iter_us"] for r in rows]))
print("ok: worlds run; dpro's sources name no world setting")
