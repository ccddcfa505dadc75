#!/usr/bin/env python3
"""The collective cost model, alpha-beta against piecewise, on world-physics jobs
(docs/models.md): for each seed, ddp-sim is profiled with the base bucket caps and with
each target's, in the same world; the model fitted on the base trace predicts each
target all-reduce size, compared with that size's median measured transfer (last end
minus last arrival, as the model is fitted). Not a test (no bound): a measurement.

usage (from the build directory; traces are kept in $MEASURE_DIR, default
/tmp/dpro-measure-coll):
  measure_coll_model.py PRESET LAYERS BASE_MB BASE_FIRST_MB "MB,FIRST_MB ..." "SEEDS" GPUS_PER_NODE
e.g. measure_coll_model.py resnet50 4 0.5 0.5 "0.1,0.1 2,1 25,1" "21 22 23" 1"""
import json, os, subprocess, sys, statistics
B = os.environ.get("top_builddir", os.getcwd())
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-coll")
os.makedirs(OUT, exist_ok=True)
def env(seed, gpn):
    e = dict(os.environ, SIMRUN_SIMGPU_LIBDIR=B + "/tests/simgpu/.libs", SIMGPU_PHYSICS="world",
             SIMGPU_WORLD_SEED=str(seed), SIMGPU_GPUS_PER_NODE=str(gpn))
    e.pop("LD_PRELOAD", None)
    return e
def record(seed, gpn, preset, layers, bmb, fmb):
    d = "%s/s%d-g%d-%s%d-b%g-f%g" % (OUT, seed, gpn, preset, layers, bmb, fmb)
    jf = d + ".json"
    if not os.path.exists(jf):
        subprocess.run(["rm", "-rf", d])
        p = subprocess.run(["nice", B + "/tools/dpro-run", "-o", d, "--", B + "/tests/simgpu/simrun", "-n", "2", "--",
                            B + "/tests/simgpu/ddp-sim", "--preset", preset, "--layers", str(layers),
                            "--iterations", "12", "--warmup", "2", "--bucket-mb", str(bmb),
                            "--first-bucket-mb", str(fmb)], env=env(seed, gpn), capture_output=True, text=True)
        ranks = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        its = [statistics.mean(r["iter_us"]) for r in ranks]
        subprocess.run([B + "/tools/dpro-export", d, "--chrome", d + ".chrome", "-f"], capture_output=True)
        ch = json.load(open(d + ".chrome"))
        ev = ch["traceEvents"] if isinstance(ch, dict) else ch
        grp = {}
        for e in ev:
            if e.get("ph") == "X" and e.get("cat") == "collective" and "AllReduce" in e["name"]:
                grp.setdefault((e["args"]["comm"], e["args"]["seq"]), []).append(e)
        colls = [(g[0]["args"]["bytes"], max(x["ts"] + x["dur"] for x in g) - max(x["ts"] for x in g))
                 for g in grp.values() if len(g) == 2]
        os.remove(d + ".chrome")
        json.dump({"iter_us": statistics.mean(its), "colls": colls}, open(jf, "w"))
    return d, json.load(open(jf))
def model(d, cm):
    r = subprocess.run([B + "/tools/dpro-replay", d, "--json", "--collective-model", cm], capture_output=True, text=True)
    j = json.loads(r.stdout)
    return [m for m in j["collective_model"] if m["op"] == "allreduce"][0]
def pw_at(m, x):
    s = m["segments"]
    at = lambda g, xx: g["alpha_us"] + (xx / g["bandwidth_GBps"] / 1000 if g["bandwidth_GBps"] > 0 else 0)
    if x <= s[0]["to_bytes"]: t = at(s[0], x)
    elif x >= s[-1]["from_bytes"]: t = at(s[-1], x)
    else:
        j = 0
        while j < len(s) - 1 and x > s[j]["to_bytes"]: j += 1
        if x >= s[j]["from_bytes"]: t = at(s[j], x)
        else:
            t0, t1 = at(s[j-1], s[j-1]["to_bytes"]), at(s[j], s[j]["from_bytes"])
            t = t0 + (t1 - t0) * (x - s[j-1]["to_bytes"]) / (s[j]["from_bytes"] - s[j-1]["to_bytes"])
    return max(t, 0)
def ab_at(m, x):
    return m["alpha_us"] + x / m["bandwidth_GBps"] / 1000
def predict_iter(d, bmb, fmb, cm):
    r = subprocess.run([B + "/tools/dpro-optimize", d, "--json", "--quiet", "--what-if",
                        "--bucket-mb %g --first-bucket-mb %g" % (bmb, fmb), "--collective-model", cm],
                       capture_output=True, text=True)
    j = json.loads(r.stdout)
    return j["strategies"][0]["predicted_iter_us"] if j["strategies"] else j["baseline_iter_us"]
rows = []
preset, layers = sys.argv[1], int(sys.argv[2])
base = (float(sys.argv[3]), float(sys.argv[4]))
targets = [tuple(map(float, t.split(","))) for t in sys.argv[5].split()]
seeds = [int(s) for s in sys.argv[6].split()]
gpn = int(sys.argv[7])
for seed in seeds:
    bd, bj = record(seed, gpn, preset, layers, *base)
    mp, ma = model(bd, "piecewise"), model(bd, "alpha-beta")
    for t in targets:
        td, tj = record(seed, gpn, preset, layers, *t)
        # per size: median measured transfer vs prediction
        by = {}
        for b, tr in tj["colls"]:
            by.setdefault(b, []).append(tr)
        ep, ea = [], []
        for b, l in by.items():
            meas = statistics.median(l)
            ep.append(abs(pw_at(mp, b) - meas) / meas * 100)
            ea.append(abs(ab_at(ma, b) - meas) / meas * 100)
        ip, ia = predict_iter(bd, t[0], t[1], "piecewise"), predict_iter(bd, t[0], t[1], "alpha-beta")
        real = tj["iter_us"]
        print("seed %d %s%d base %s -> %s: sizes %d, coll |err| mean old %.1f%% new %.1f%% (max %.1f / %.1f); "
              "iter base %.0f real %.0f pred old %.0f (%+.1f%%) new %.0f (%+.1f%%); segs %d" % (
              seed, preset, layers, base, t, len(by), statistics.mean(ea), statistics.mean(ep), max(ea), max(ep),
              bj["iter_us"], real, ia, (ia - real) / real * 100, ip, (ip - real) / real * 100, len(mp["segments"])), flush=True)
