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
/tmp/dpro-measure-proto):
  measure_unseen_proto.py PRESET LAYERS RANKS GPUS_PER_NODE "BASE_MB,FIRST_MB" "TARGET_MB,FIRST_MB" "SEEDS"
e.g. measure_unseen_proto.py bert-large 2 2 8 "25,25" "0.25,0.25" "21 22"
"""
import json, os, statistics, subprocess, sys

B = os.environ.get("top_builddir", os.getcwd())
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-proto")
ITERS, WARMUP = 12, 2
os.makedirs(OUT, exist_ok=True)


def env(seed, gpn):
    e = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=B + "/tests/simgpu/.libs", SIMGPU_PHYSICS="world",
             SIMGPU_WORLD_SEED=str(seed), SIMGPU_GPUS_PER_NODE=str(gpn))
    e.pop("LD_PRELOAD", None)
    return e


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}


def transfers(chrome):
    """Per all-reduce (comm, seq): (bytes, last end - last start, first start), in us."""
    ch = json.load(open(chrome))
    ev = ch["traceEvents"] if isinstance(ch, dict) else ch
    grp = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "collective" and "AllReduce" in e["name"]:
            grp.setdefault((e["args"].get("comm"), e["args"].get("seq")), []).append(e)
    return [(g[0]["args"].get("bytes", 0), max(x["ts"] + x["dur"] for x in g) - max(x["ts"] for x in g),
             min(x["ts"] for x in g)) for g in grp.values()]


def per_iter(colls, per):
    """The transfer time per iteration: per all-reduces an iteration, each the mean of colls."""
    return statistics.mean(c[1] for c in colls) * per if colls else 0.0


def record(seed, gpn, n, preset, layers, bmb, fmb):
    d = "%s/s%d-g%d-n%d-%s%d-b%g-f%g" % (OUT, seed, gpn, n, preset, layers, bmb, fmb)
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
        real = measured(td)
        # the compared iterations: the recorded ones after the warm-up; all-reduces per
        # iteration: the target trace's over its ITERS + WARMUP steps
        per = len(real) / (ITERS + WARMUP)
        k = int(round(per * ITERS))
        rt = per_iter(sorted(real, key=lambda c: c[2])[-k:], per)
        sizes = sorted({c[0] for c in real})
        row = "seed %d %s L%d n%d gpn%d %s -> %s: %.1f all-reduces/iter, %d-%d B; realised %.1f us" % (
            seed, preset, layers, n, gpn, base, target, per, sizes[0], sizes[-1], rt)
        for cm in ("nearest", "piecewise"):
            pc, s = predicted(bd, target[0], target[1], cm)
            pt = per_iter(pc, per)
            row += "; %s %.1f us (%+.1f %%, %d colls)%s" % (
                cm, pt, (pt - rt) / rt * 100, len(pc),
                " unseen %s" % json.dumps(s["unseen_protocol"]) if "unseen_protocol" in s else "")
        print(row, flush=True)


main()
