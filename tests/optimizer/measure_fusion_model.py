#!/usr/bin/env python3
"""The fused-kernel model, fixed cost against per-name hinge, on world-physics jobs
(docs/models.md): for each seed and batch, ddp-sim is profiled without and with
--fuse-small in the same world; dpro-optimize, on the first trace, predicts the device
time of the kernels fusion makes of its chains (models.fusion_fused_kernels_us, with
fusion_chain_kernels_us, their measured time); the fused trace measures the fused kernels
(the names ddp-sim gives them). Compared as the fused / unfused ratio, so that both sides
count the same iterations. Not a test (no bound): a measurement.

usage (from the build directory; traces in $MEASURE_DIR, default /tmp/dpro-measure-fusion):
  measure_fusion_model.py PRESET LAYERS "BATCHES" "SEEDS"
e.g. measure_fusion_model.py resnet50 4 "8 32" "21 22 23\""""
import json, os, subprocess, sys
B = os.environ.get("top_builddir", os.getcwd())
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-fusion")
os.makedirs(OUT, exist_ok=True)
SMALL = ("vectorized_elementwise_kernel", "vectorized_elementwise_kernel_backward")
FUSED = ("triton_poi_fused_elementwise", "triton_poi_fused_elementwise_backward")


def record(seed, preset, layers, batch, fuse):
    d = "%s/s%d-%s%d-b%d%s" % (OUT, seed, preset, layers, batch, "-fused" if fuse else "")
    if not os.path.isdir(d):
        e = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=B + "/tests/simgpu/.libs", SIMGPU_PHYSICS="world",
                 SIMGPU_WORLD_SEED=str(seed))
        e.pop("LD_PRELOAD", None)
        subprocess.run(["nice", B + "/tools/dpro-run", "-o", d, "--", B + "/tests/simgpu/simrun", "-n", "2", "--",
                        B + "/tests/simgpu/ddp-sim", "--preset", preset, "--layers", str(layers), "--batch",
                        str(batch), "--iterations", "12", "--warmup", "2"] + (["--fuse-small"] if fuse else []),
                       env=e, capture_output=True, check=True)
    return d


def kernel_us(d, names):
    j = json.loads(subprocess.run([B + "/tools/dpro-info", "--kernels=50", "--json", d], capture_output=True,
                                  text=True, check=True).stdout)
    return sum(k["total_us"] for r in j["kernels"]["per_rank"] for k in r["top_kernels"] if k["name"] in names)


preset, layers = sys.argv[1], int(sys.argv[2])
for batch in [int(b) for b in sys.argv[3].split()]:
    for seed in [int(s) for s in sys.argv[4].split()]:
        base, fused = record(seed, preset, layers, batch, 0), record(seed, preset, layers, batch, 1)
        real = kernel_us(fused, FUSED) / kernel_us(base, SMALL)
        pred = {}
        for fm in ("fixed", "hinge"):
            j = json.loads(subprocess.run([B + "/tools/dpro-optimize", base, "--json", "--quiet", "--what-if",
                                           "--fuse-small", "--fusion-model", fm], capture_output=True,
                                          text=True, check=True).stdout)["models"]
            pred[fm] = j["fusion_fused_kernels_us"] / j["fusion_chain_kernels_us"]
            chains = j["fusion_chains_hinge"] if fm == "hinge" else j["fusion_chains"]
        print("%s%d batch %d seed %d: realised fused/unfused %.3f; fixed %.3f (%+.1f%%), hinge %.3f (%+.1f%%), "
              "chains by hinge %d" % (preset, layers, batch, seed, real, pred["fixed"],
                                      100 * (pred["fixed"] - real) / real, pred["hinge"],
                                      100 * (pred["hinge"] - real) / real, chains), flush=True)
