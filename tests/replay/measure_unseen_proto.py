#!/usr/bin/env python3
"""Collectives priced in a protocol the trace never ran (docs/fidelity.md, "Bucket sizes in
an unseen protocol"): for each seed, ddp-sim is recorded on N ranks in the world physics
with the base bucket caps and with the target's, in the same world; dpro-optimize
--what-if predicts the target's buckets from the base trace, with the collective model
`nearest` (a size outside the measured ones on the nearest segment's line) and
`piecewise` (in the protocol NCCL's tuner picks there). Compared: the all-reduces'
transfer time per iteration (each all-reduce's last end minus its last arrival, summed per
iteration; the waits left out), realised in the target's trace against predicted in the
plan's simulated timeline. Not a test (no bound): a measurement.

usage (from the build directory; traces kept in $MEASURE_DIR, default
/tmp/dpro-measure-proto; $MEASURE_PROFILE: the device profile, else the world's):
  measure_unseen_proto.py PRESET LAYERS RANKS GPUS_PER_NODE "BASE_MB,FIRST_MB" "TARGET_MB,FIRST_MB" "SEEDS"
e.g. measure_unseen_proto.py bert-large 2 2 8 "25,25" "0.25,0.25" "21 22"
"""
import json, os, statistics, subprocess, sys

B = os.environ.get("top_builddir", os.getcwd())
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-proto")
PROFILE = os.environ.get("MEASURE_PROFILE", "")  # the device profile (a100, h100, h200); "": the world's
ITERS, WARMUP = 12, 2
os.makedirs(OUT, exist_ok=True)


def env(seed, gpn):
    e = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=B + "/tests/simgpu/.libs", SIMGPU_PHYSICS="world",
             SIMGPU_WORLD_SEED=str(seed), SIMGPU_GPUS_PER_NODE=str(gpn))
    if PROFILE:
        e["SIMGPU_PROFILE"] = PROFILE
    e.pop("LD_PRELOAD", None)
    return e


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}


def transfers(chrome):
    """The all-reduces' transfer time per iteration (us) in a timeline: the transfer_us of
    each rank's all-reduce events inside that rank's iterations, summed, over the ranks'
    iterations; and the bytes seen."""
    ch = json.load(open(chrome))
    ev = ch["traceEvents"] if isinstance(ch, dict) else ch
    its = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "iteration":
            its.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    tot, sizes, k = 0.0, set(), 0
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "collective" and "AllReduce" in e["name"]:
            if any(a <= e["ts"] < b for a, b in its.get(e["pid"], [])):
                tot += e["args"]["transfer_us"]
                sizes.add(e["args"]["bytes"])
                k += e["args"]["transfer_us"] > 0  # a plan's merged buckets: 0
    n = sum(len(v) for v in its.values())
    return tot / n if n else 0.0, sorted(sizes), k / n if n else 0


def record(seed, gpn, n, preset, layers, bmb, fmb):
    d = "%s/%ss%d-g%d-n%d-%s%d-b%g-f%g" % (OUT, PROFILE, seed, gpn, n, preset, layers, bmb, fmb)
    if not os.path.exists(d + ".done"):
        subprocess.run(["rm", "-rf", d])
        p = subprocess.run(["nice", B + "/tools/dpro-run", "-o", d, "--", B + "/tests/simgpu/simrun", "-n", str(n),
                            "--", B + "/tests/simgpu/ddp-sim", "--preset", preset, "--layers", str(layers),
                            "--iterations", str(ITERS), "--warmup", str(WARMUP), "--bucket-mb", str(bmb),
                            "--first-bucket-mb", str(fmb)], env=env(seed, gpn), capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("record failed: " + p.stderr[-2000:])
        open(d + ".done", "w").close()
    return d


def measured(d):
    subprocess.run([B + "/tools/dpro-export", d, "--chrome", d + ".chrome", "-f"], env=clean_env(),
                   capture_output=True, check=True)
    c = transfers(d + ".chrome")
    os.remove(d + ".chrome")
    return c


def predicted(d, bmb, fmb, cm):
    out = d + ".plan-%s.chrome" % cm
    r = subprocess.run([B + "/tools/dpro-optimize", d, "--json", "--quiet", "-w", str(WARMUP), "--what-if",
                        "--bucket-mb %g --first-bucket-mb %g" % (bmb, fmb), "--collective-model", cm,
                        "--chrome", out, "-f"], env=clean_env(), capture_output=True, text=True)
    j = json.loads(r.stdout)
    s = j["strategies"][0] if j["strategies"] else {}
    c = transfers(out)
    os.remove(out)
    return c, s


def main():
    preset, layers, n, gpn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    base = tuple(map(float, sys.argv[5].split(",")))
    target = tuple(map(float, sys.argv[6].split(",")))
    for seed in map(int, sys.argv[7].split()):
        bd = record(seed, gpn, n, preset, layers, *base)
        td = record(seed, gpn, n, preset, layers, *target)
        rt, sizes, ni = measured(td)
        bt, bsizes, _ = measured(bd)
        row = "seed %d %s L%d n%d gpn%d %s -> %s: recorded %.1f us (%d-%d B), realised %.1f us (%d-%d B, %.1f per iteration)" % (
            seed, preset, layers, n, gpn, base, target, bt, bsizes[0], bsizes[-1], rt, sizes[0], sizes[-1], ni)
        for cm in ("nearest", "piecewise"):
            (pt, ps, pn), s = predicted(bd, target[0], target[1], cm)
            row += "; %s %.1f us (%+.1f %%, %.1f per iteration)%s" % (
                cm, pt, (pt - rt) / rt * 100, pn,
                " unseen %s" % json.dumps(s["unseen_protocol"]) if "unseen_protocol" in s else "")
        print(row, flush=True)


main()
