#!/usr/bin/env python3
"""--what-if-ranks' communication time against the realised one, on world-physics jobs
(docs/fidelity.md): each job is recorded at N_FROM and at N_TO ranks in its world
(tools/dpro-run, simrun, ddp-sim JOB --iterations 12 --warmup 3); each dpro build given
predicts the N_TO-rank job's communication per iteration from the N_FROM-rank trace
(dpro-replay --warmup 3 --what-if-ranks N_TO --json: what_if.breakdown.communication_us),
compared with the one the N_TO-rank trace measures (breakdown.measured.communication_us).
The same traces for every build; only the job's environment names the world. Not a test
(no bound): a measurement. Prints one line per job and build, and the load average.

usage (from the build directory; traces kept in $MEASURE_DIR, default
/tmp/dpro-measure-ranks):
  measure_more_ranks.py N_FROM N_TO GPUS_PER_NODE "PROFILE:SEED:JOB ..." BUILD...
e.g. measure_more_ranks.py 2 4 8 "h200:813924406:--preset,resnet50,--layers,4,--batch,64" . /tmp/base
(JOB: ddp-sim's options, comma-separated; the first BUILD records)"""
import json, os, subprocess, sys
N_FROM, N_TO, GPN = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
JOBS = [j.split(":", 2) for j in sys.argv[4].split()]
BUILDS = [os.path.abspath(b) for b in sys.argv[5:]]
OUT = os.environ.get("MEASURE_DIR", "/tmp/dpro-measure-ranks")
os.makedirs(OUT, exist_ok=True)


def record(prof, seed, job, n):
    b = BUILDS[0]
    d = "%s/%s-%s-g%d-n%d-%s" % (OUT, prof, seed, GPN, n, job.replace(",", "").replace("-", ""))
    if not os.path.exists(d + "/done"):
        subprocess.run(["rm", "-rf", d])
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}
        env.update(SIMGPU_PHYSICS="world", SIMGPU_WORLD_SEED=seed, SIMGPU_PROFILE=prof,
                   SIMGPU_GPUS_PER_NODE=str(GPN), SIMRUN_SIMGPU_LIBDIR=b + "/tests/simgpu/.libs")
        env.pop("LD_PRELOAD", None)
        subprocess.run(["nice", b + "/tools/dpro-run", "-o", d, "--", b + "/tests/simgpu/simrun", "-n",
                        str(n), "--", b + "/tests/simgpu/ddp-sim"] + job.split(",") +
                       ["--iterations", "12", "--warmup", "3"], env=env, capture_output=True, check=True)
        open(d + "/done", "w").close()
    return d


def replay(build, d, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}
    r = subprocess.run([build + "/tools/dpro-replay", d, "--warmup", "3", "--json"] + extra,
                       capture_output=True, text=True, env=env, check=True)
    return json.loads(r.stdout)


print("load average before: %s" % open("/proc/loadavg").read().strip(), flush=True)
for prof, seed, job in JOBS:
    small, big = record(prof, seed, job, N_FROM), record(prof, seed, job, N_TO)
    real = replay(BUILDS[0], big, [])["breakdown"]["measured"]["communication_us"]
    for b in BUILDS:
        j = replay(b, small, ["--what-if-ranks", str(N_TO)])
        pred = j["what_if"]["breakdown"]["communication_us"]
        ar = [m for m in j["collective_model"] if m["op"] == "allreduce"]
        algos = " ".join("%s %.0f-%.0f" % (a["algorithm"], a["from_bytes"], a["to_bytes"])
                         for a in (ar[0].get("algorithms", []) if ar else []))
        print("%s seed %s %s, %d -> %d ranks (%d per node), build %s: communication %.1f us "
              "realised, %.1f us predicted (%+.1f %%); all-reduce algorithms: %s" % (
                  prof, seed, job.replace(",", " "), N_FROM, N_TO, GPN, b, real, pred,
                  (pred - real) / real * 100, algos or "-"), flush=True)
print("load average after: %s" % open("/proc/loadavg").read().strip())
