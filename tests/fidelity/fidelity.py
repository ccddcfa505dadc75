#!/usr/bin/env python3
"""fidelity: dpro's predictions against the simulated device's hidden physics.

Each (world, what-if) pair is drawn from one base seed (DPRO_FIDELITY_SEED, default
DEFAULT_SEED; printed): a world (SIMGPU_WORLD_SEED, SIMGPU_PROFILE; tests/simgpu/README.md),
a ddp-sim job and one change to it. For each pair: the job is recorded under the collector
(2 ranks under simrun, tools/dpro-run) in that world; dpro predicts the changed job's
iteration time (dpro-optimize --what-if for the job's own options, dpro-replay
--what-if-scale-kernels for a device twice as fast or twice as slow, --what-if-slow-rank
for one slower GPU, --what-if-ranks for more ranks, the search of dpro-optimize for its own
advice); the changed job is run in the same world and measured.
The world's settings go to the job's environment only: dpro-replay and dpro-optimize run
with every SIMGPU_ variable removed from theirs (and test_world.py checks that dpro's
sources name none of them).

The changes (KINDS, drawn in turn so that each is covered alike):
  bucket-down     one all-reduce bucket of 100-256 MiB split into 0.5-2 MiB buckets
                  (tensor partition)
  bucket-up       the default 25 MiB buckets (1 MiB first) merged into 100-512 MiB ones
  fusion          --fuse-small (consecutive small kernels fused)
  cuda-graph      --cuda-graph (the step captured after warm-up)
  recompute       --recompute 0-K (the forward of the first layers recomputed)
  accumulation    --accum-steps 2 or 4 at the same samples per step
  kernels-x0.5    every kernel twice as fast (SIMGPU_SLOWDOWN=0.5 in the run)
  kernels-x2      every kernel twice as slow (SIMGPU_SLOWDOWN=2)
  advice          dpro-optimize's top recommendation, applied as it says
  advice-memory   the same under a memory budget of 0.6 x the measured peak
  straggler       one rank's GPU 1.25-2 times as slow (simrun --straggler RANK:F, which
                  sets SIMGPU_SLOWDOWN for that rank only: its kernels take F times as long)
  more-ranks      the same job on FIDELITY_MORE_RANKS ranks (default 8; weak scaling: the
                  same batch per rank; the drawn batch x MORE_RANKS_BATCH, so that the
                  device's time, not the hosts' sharing this machine's cores, makes the
                  iteration), all on this host as the recording's 2 (predicted with
                  --what-if-ranks-per-host N: the host-share model); every other one (pair
                  24 of 40) across two simulated nodes of N/2 (simrun --gpus-per-node; its
                  batch doubled until its changed job is device-bound on this machine:
                  device_bound_args,
                  predicted with --what-if-ranks-per-host N/2 --what-if-network GBPS:US,
                  the network as a user measures it: measure_network, an all-reduce
                  sweep in the manner of nccl-tests once per world)

Iteration times are ddp-sim's own (iter_us: host time between the per-iteration
synchronisations), the mean over ranks of the median over the measured iterations, as in
tests/optimizer/closed_loop.py. Each pair is run in FIDELITY_ATTEMPTS (3) attempts
(record, predict, change, measure) and each figure of its row is the median over them (the
change fixed at the first attempt). Both sides are measured alike: every run of a pair has
the same number of measured iterations, at least FIDELITY_ITERATIONS (20) and as many as
span FIDELITY_RUN_MS (400 ms) at the iteration of a probe run of the recorded job (at most
MAX_ITERATIONS), and the attempts alternate which run goes first (recorded, changed,
recorded), so that a burst of the machine's other work or a drift of its load weighs on
the recorded and the changed side alike, and each rank of a pair's runs is bound to one
CPU (simrun --bind-cpus; binds(): not the more-ranks kind's), so that where the kernel
wakes the ranks' threads does not decide a share of the iterations; the `runs` column
gives every attempt's recorded, predicted and realised iteration, `loads` the load average
(1 minute) at its start, `base_spread_pct` the recorded runs' spread. They are not
deterministic: the device runs in real time
on this machine's cores, so host time (launches, the framework's per-operator time, the
wake-ups between threads) and with it the arrival at collectives and what overlaps what
(the world's contention) depend on the machine's load; only each kernel's base duration
and noise are fixed by the world's seed. The table gives the load average and the spread
of the realised runs.

Per attempt: error = (realised - predicted) / predicted, predicted being dpro's median
iteration of the changed job (baseline_median_iter_us and predicted_median_iter_us of
dpro-optimize, simulated_median_iter_us and what_if.predicted_median_iter_us of
dpro-replay), the statistic of the realised figure; predicted speedup = dpro's own
baseline (the replay of the recorded run, its median iteration) / predicted; realised
speedup = the recorded run's measured iteration / the changed run's; their ratio. A pair's
error_pct and speedup_ratio_pct are the medians over its attempts of these: each attempt is
a whole measurement (its recording, the prediction from it, the changed run next to it),
so a burst of the machine's other work that stretches one attempt's recording and another
attempt's changed run does not pair the one with the other, as the median of each side
did (medians_error_pct and medians_speedup_ratio_pct, the suite's figure before 6 December
2026, 18:40 UTC; the medians_line). The row's times and speedups are the medians of each
side; and dpro's predicted peak memory against ddp-sim's (caching allocator) where dpro
predicts one.
mean_predicted_us and mean_error_pct: dpro's mean iteration (predicted_iter_us) against
the same realised median, the suite's figure before 6 December 2026. "Slower advice" counts the
advice pairs (dpro-optimize's recommendation) where dpro predicted a speedup (> 1) and the
job got slower (realised speedup < 1); the table also counts such changes of every kind.

Output: the per-pair table (FIDELITY_OUT, default fidelity/ in the build directory:
fidelity.tsv and fidelity.md) and, last, the line
  fidelity: N pairs, mean |error| X %, max Y %, worst realised/predicted speedup Z %,
  slower advice K
The simulated device runs in real time on this machine's cores, one thread per stream
sleeping until each operation's end: when the cores cannot keep up (a shared machine, or
many short operations: each costs the simulator host time), its records stay on the
device's own schedule while the host sees the work done later. The columns base_lag_us and
realised_lag_us give that lag for the recorded and the changed run (sync_lag: the end of
the last device record to the end of the iteration, median over iterations, mean over
ranks), realised_device_us the changed run's iteration up to its last device record, and
device_error_pct the prediction's error against that (not the suite's figure: a lag also
delays the other rank's arrival at the collectives). base_cpu_ms_per_iter and
realised_cpu_ms_per_iter are the CPU time (user and system) the recorded and the changed
job's processes took per iteration (warm-up and start included), cores_at_predicted the
changed job's over the predicted iteration: the cores it needs to run at the predicted
speed; above the machine's free cores, the realised figure is the machine's limit, not the
world's. base_stalls_per_s and realised_stalls_per_s are the host stalls a second
dpro-replay counts in the recorded and the changed run's trace (host_share:
what_if.host_share at the run's own ranks and layout); a recording that stalled more often
than its changed run carries stalls into the prediction that the changed run did not have
(docs/fidelity.md, "Fusion pair 3 decomposed"). The more-ranks kind is predicted with all
its ranks on this one host, as simrun runs them (--what-if-ranks-per-host N: the
host-share model scales the host time by the CPU the trace says the ranks want over the
cores it recorded); no_share_predicted_us and
no_share_error_pct are the prediction with the traced layout (no ranks added to a host,
no host time scaled), host_time_scale the scale applied and rank_wait_us the wait the
more ranks' arrival jitter adds at each collective (docs/models.md); for the pairs across
nodes no_network_predicted_us and no_network_error_pct the prediction without
--what-if-network (the network not predicted), line_rate_predicted_us and
line_rate_error_pct with the profile's NIC line rate instead of the measured network
(NIC_GBPS, no latency), net_busbw_gbps and net_crossing_us what measure_network gave.
Before the closing
line the suite names the pairs whose changed run lagged by more than LAG_SHARE (10 %) of
its iteration, with the others' mean |error|.

Environment: top_builddir (default .), DPRO_FIDELITY_SEED, FIDELITY_PAIRS (default 40),
FIDELITY_ITERATIONS (the fewest measured iterations per run, default 20), FIDELITY_RUN_MS
(400: the time a run's measured iterations should span; 0: FIDELITY_ITERATIONS only, no
probe), FIDELITY_ATTEMPTS (3),
FIDELITY_OUT, FIDELITY_KEEP=dir keeps the traces (of each pair's last attempt),
FIDELITY_KINDS=kind,kind runs only the pairs of those kinds (of the same draw),
FIDELITY_MORE_RANKS (8: the ranks of the more-ranks kind's changed job). Exit 0
with the line printed, 1 when a pair could not be run, 2 for a bad setting, 77 without the
simulated device. `make fidelity` runs it (tests/fidelity/local.mk).
"""
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "replay"))
from replay_testlib import traced_env  # noqa: E402

BUILD = os.environ.get("top_builddir", os.getcwd())
SIMRUN = os.path.join(BUILD, "tests", "simgpu", "simrun")
DDP_SIM = os.path.join(BUILD, "tests", "simgpu", "ddp-sim")
NCCL_PERF = os.path.join(BUILD, "tests", "simgpu", "nccl-perf")
LIBDIR = os.path.join(BUILD, "tests", "simgpu", ".libs")
DPRO_RUN = os.path.join(BUILD, "tools", "dpro-run")
REPLAY = os.path.join(BUILD, "tools", "dpro-replay")
OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")
EXPORT = os.path.join(BUILD, "tools", "dpro-export")

DEFAULT_SEED = 20261202
KINDS = ["bucket-down", "bucket-up", "fusion", "cuda-graph", "recompute", "accumulation",
         "kernels-x0.5", "kernels-x2", "advice", "advice-memory", "straggler", "more-ranks"]
PROFILES = ["a100", "h100", "h200"]
RANKS = 2
MORE_RANKS = 8  # FIDELITY_MORE_RANKS, read by main()
MORE_RANKS_BATCH = 4  # the more-ranks kind's job: the drawn batch times this
MAX_BATCH_DOUBLINGS = 4  # device_bound_args: the most a cross-node pair's batch is doubled
# The network between simulated nodes as its datasheet gives it: one NIC per GPU, its line
# rate in GB/s (DGX A100: ConnectX-6 HDR 200 Gb/s; DGX H100: ConnectX-7 NDR 400 Gb/s; H200
# systems as H100's); the line_rate_* columns. The prediction gets what measure_network
# measures, as a user runs nccl-tests on the cluster.
NIC_GBPS = {"a100": 25, "h100": 50, "h200": 50}
# measure_network's sweeps: nccl-perf's options for the bandwidth (8 B to 128 MiB) and for
# the latency (nccl-tests' small sizes, up to NET_SMALL_BYTES, timed over more iterations).
NET_SWEEP = ["-b", "8", "-e", "128M", "-f", "2", "-w", "5", "-n", "20"]
NET_SMALL_BYTES = 1024
NET_SMALL_SWEEP = ["-b", "8", "-e", str(NET_SMALL_BYTES), "-f", "2", "-w", "20", "-n", "200"]
NET_SMALL_REPEATS = 3
NETWORKS = {}  # (world seed, profile) -> measure_network's figures, once per world
WARMUP = 3
RUN_MS = 400  # FIDELITY_RUN_MS, read by main()
MAX_ITERATIONS = 400
COLUMNS = ["pair", "kind", "world_seed", "profile", "job", "change", "base_us", "replayed_us",
           "predicted_us", "realised_us", "error_pct", "predicted_speedup", "realised_speedup",
           "speedup_ratio_pct", "realised_spread_pct", "predicted_peak_mib", "realised_peak_mib",
           "peak_error_pct", "budget_mib", "base_lag_us", "realised_lag_us",
           "realised_device_us", "device_error_pct", "base_cpu_ms_per_iter", "realised_cpu_ms_per_iter",
           "cores_at_predicted", "base_stalls_per_s", "realised_stalls_per_s",
           "mean_predicted_us", "mean_error_pct", "no_share_predicted_us",
           "no_share_error_pct", "host_time_scale", "rank_wait_us", "no_network_predicted_us",
           "no_network_error_pct", "line_rate_predicted_us", "line_rate_error_pct",
           "net_busbw_gbps", "net_crossing_us", "loads", "iterations",
           "base_spread_pct", "runs", "medians_error_pct", "medians_speedup_ratio_pct"]


class PairError(Exception):
    """A step of a pair failed (the job, or dpro)."""


def draw_pairs(seed, n):
    """The n pairs of base seed `seed`: dicts of kind, world seed, profile, the job's
    ddp-sim options (preset, layers, batch, dtype), its batch."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        preset = rng.choice(["resnet50", "resnet50", "gpt", "bert-large"])
        if preset == "resnet50":
            layers, batch = rng.choice([3, 4]), rng.choice([16, 32, 64, 128])
        else:
            layers, batch = rng.choice([2, 3, 4]), rng.choice([4, 8, 16])
        job = ["--preset", preset, "--layers", str(layers), "--batch", str(batch),
               "--dtype", rng.choice(["fp32", "fp32", "tf32", "bf16"])]
        pairs.append({"pair": i + 1, "kind": kind, "world_seed": rng.randrange(1, 1 << 31),
                      "profile": rng.choice(PROFILES), "job": job, "batch": batch,
                      "rng": random.Random(rng.randrange(1 << 62))})
    return pairs


def world_env(pair, slowdown=None):
    """The environment of the pair's job: its world, nothing else of ours (in a sanitizer
    build with the sanitizer's runtime preloaded, as the collector's tests run jobs)."""
    env = traced_env({k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")})
    env.update(SIMGPU_PHYSICS="world", SIMGPU_WORLD_SEED=str(pair["world_seed"]),
               SIMGPU_PROFILE=pair["profile"], SIMRUN_SIMGPU_LIBDIR=LIBDIR)
    if slowdown is not None:
        env["SIMGPU_SLOWDOWN"] = repr(slowdown)
    return env


def dpro_env():
    """The environment of dpro's analysis: no SIMGPU_ setting at all."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SIMGPU_", "SIMRUN_"))}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def run_job(pair, args, trace_dir, iterations, slowdown=None, ranks=RANKS, straggler=None,
            per_node=None):
    """Runs ddp-sim with args on `ranks` ranks in the pair's world under the collector
    (straggler: "RANK:F", that rank's kernels F times as long; per_node: the ranks on
    simulated nodes of that many, simrun --gpus-per-node, else one node), each rank bound
    to one CPU when binds(pair). Returns (iteration us: the mean over ranks of their
    median, peak bytes, rank 0's JSON line, CPU ms the job's processes used per iteration,
    warm-up included)."""
    cmd = [SIMRUN, "-n", str(ranks), "--timeout", "150"]
    cmd += ["--bind-cpus"] if binds(pair) else []
    cmd += ["--straggler", straggler] if straggler else []
    cmd += ["--gpus-per-node", str(per_node)] if per_node else []
    cmd += ["--", DPRO_RUN, "-o", trace_dir, "--", DDP_SIM, "--iterations", str(iterations),
            "--warmup", str(WARMUP)] + args
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=world_env(pair, slowdown), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=180)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = 1e3 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (iterations + WARMUP)
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or len(rows) != ranks:
        raise PairError("job failed (status %d, %d JSON lines): %s\n%s"
                        % (p.returncode, len(rows), " ".join(cmd), p.stderr[-1500:]))
    rows.sort(key=lambda r: r["rank"])
    us = sum(median(r["iter_us"]) for r in rows) / len(rows)
    return us, max(r["peak_memory_bytes"] for r in rows), rows[0], cpu_ms


def binds(pair):
    """Whether the pair's runs bind each rank to one CPU (simrun --bind-cpus, as mpirun
    binds ranks to cores): when none of its runs has more ranks than the CPUs this process
    may use, and never for the more-ranks kind. Unbound, the kernel wakes a rank's threads beside the other rank's spinning
    host thread, and on a machine of 2 cores a share of the iterations that changes from
    run to run waits a timeslice (pair 3 recorded at 1,676-2,015 us unbound, 1,492-1,544
    bound; docs/fidelity.md, "Pair 3's two modes"). The more-ranks kind's runs are all
    unbound: its changed run's ranks share the CPUs as the kernel schedules them (the
    host-share model's case), and its recording tells dpro the host's CPUs by the ranks'
    affinity, which binding would make one."""
    if pair["kind"] == "more-ranks":
        return False
    return RANKS <= len(os.sched_getaffinity(0))


def nccl_perf(pair, per_node, sweep):
    """nccl-perf's rows (size B, time us, busbw GB/s) of an all-reduce sweep on 2 ranks in
    the pair's world, on nodes of per_node (1: two nodes, the network between them)."""
    cmd = [SIMRUN, "-n", "2", "--gpus-per-node", str(per_node), "--timeout", "60", "--",
           NCCL_PERF] + sweep
    p = subprocess.run(cmd, env=world_env(pair), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=90)
    rows = [tuple(float(x) for x in (f[0], f[2], f[4])) for f in
            (line.split() for line in p.stdout.splitlines() if line and line[0] != "#")]
    if p.returncode != 0 or not rows:
        raise PairError("network sweep failed (status %d): %s\n%s"
                        % (p.returncode, " ".join(cmd), p.stderr[-800:]))
    return rows


def measure_network(pair):
    """The network between two simulated nodes of the pair's world, as a user of the
    cluster measures it, once per world: an all-reduce sweep of nccl-perf (nccl-tests'
    all_reduce_perf) on two nodes of one GPU each. Returns (busbw GB/s: the sweep's peak,
    the figure nccl-tests' users quote; the latency a crossing adds, us: half of the least
    small-size time across the nodes less the least on one node of two GPUs, an all-reduce
    of two ranks crossing twice; those two times). The peak and the least times, of
    NET_SMALL_REPEATS small sweeps each side taken in turn, as the machine's load only
    lowers a bandwidth and lengthens a time (a burst of it starved a whole small sweep
    once). Nothing of the world's settings is read: only the program's output."""
    key = (pair["world_seed"], pair["profile"])
    if key not in NETWORKS:
        busbw = max(bw for _, _, bw in nccl_perf(pair, 1, NET_SWEEP))
        two, one = float("inf"), float("inf")
        for _ in range(NET_SMALL_REPEATS):
            two = min([two] + [t for _, t, _ in nccl_perf(pair, 1, NET_SMALL_SWEEP)])
            one = min([one] + [t for _, t, _ in nccl_perf(pair, 2, NET_SMALL_SWEEP)])
        NETWORKS[key] = (busbw, max(0.0, (two - one) / 2), two, one)
    return NETWORKS[key]


def dpro_json(cmd):
    p = subprocess.run(cmd, env=dpro_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    if p.returncode != 0:
        raise PairError("%s failed (status %d): %s" % (" ".join(cmd), p.returncode,
                                                        p.stderr[-800:]))
    return json.loads(p.stdout)


def sync_lag(trace_dir):
    """How far the simulated device ran behind the host's clock in the recording of
    trace_dir: per measured iteration (the first WARMUP left out) the time from the end of
    the rank's last device record to the end of the iteration (ddp-sim's NVTX range, which
    ends when loss.item()'s synchronisation returns), and the iteration without it (its
    start to the last device record). The device records are on the device's own schedule
    (each operation starts when its stream and dependencies let it); when the machine's
    cores cannot run the simulated device in real time, the host sees the work done that
    much later. Returns (lag us, device span us): the mean over ranks of their medians,
    or (None, None) when the trace has no iteration ranges. Reads dpro-export's timeline."""
    fd, path = tempfile.mkstemp(prefix="dpro-fidelity-", suffix=".json")
    os.close(fd)
    try:
        p = subprocess.run([EXPORT, trace_dir, "--chrome", path, "-f"], env=dpro_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300)
        if p.returncode != 0:
            raise PairError("dpro-export %s failed (status %d): %s"
                            % (trace_dir, p.returncode, p.stderr[-800:]))
        with open(path) as f:
            return lag_of_timeline(json.load(f))
    finally:
        os.unlink(path)


def device_lag(dev, a, b):
    """How far a rank's device ran behind its host in the iteration [a, b): (b - the end
    of its last device record, that end - a), over the records of dev ((start, end) of the
    rank's device tracks, "stream N" in dpro-export's timeline) that start in [a, b), the
    end taken at b at most; None if none does. The lag is the host's return from the
    iteration's synchronisation after the device's work: a host thread woken late, or an
    iteration ended by the host."""
    ends = [end for start, end in dev if a <= start < b]
    if not ends:
        return None
    last = min(max(ends), b)
    return b - last, last - a


def lag_of_timeline(chrome):
    """sync_lag's figures from a Chrome trace object as dpro-export writes it (one process
    per rank, tracks named "stream N" for the device, "iteration N" ranges on the
    iterations track)."""
    ev = chrome.get("traceEvents", [])
    streams, iters = set(), {}
    for e in ev:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            name = e.get("args", {}).get("name", "")
            if name.startswith("stream "):
                streams.add((e["pid"], e["tid"]))
            elif name == "iterations":
                iters[e["pid"]] = e["tid"]
    lags, spans = [], []
    for pid, tid in iters.items():
        its = sorted((e for e in ev if e.get("ph") == "X" and e["pid"] == pid and
                      e["tid"] == tid and e["name"].startswith("iteration")),
                     key=lambda e: e["ts"])[WARMUP:]
        dev = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                     if e.get("ph") == "X" and e["pid"] == pid and (pid, e["tid"]) in streams)
        lag, span = [], []
        for it in its:
            ls = device_lag(dev, it["ts"], it["ts"] + it["dur"])
            if ls is not None:
                lag.append(ls[0])
                span.append(ls[1])
        if lag:
            lags.append(median(lag))
            spans.append(median(span))
    if not lags:
        return None, None
    return sum(lags) / len(lags), sum(spans) / len(spans)


def host_share(trace_dir, ranks, per_host):
    """dpro-replay's host share of the trace in trace_dir (what_if.host_share of
    --what-if-ranks RANKS --what-if-ranks-per-host PER_HOST, the ranks and the layout the
    run had, which scales nothing and reports what the trace shows: the CPU its ranks used
    a second, their load on the host's cores, the stalls a second it counts, a host call
    over its place's median by the stall threshold it learns; docs/models.md). None where
    the trace gives no host share (no CPU samples)."""
    j = dpro_json([REPLAY, trace_dir, "--json", "--warmup", str(WARMUP), "--what-if-ranks",
                   str(ranks), "--what-if-ranks-per-host", str(per_host)])
    hs = j.get("what_if", {}).get("host_share", {})
    return hs if hs.get("known") else None


def stalls_per_s(trace_dir, ranks, per_host):
    """The host stalls a second dpro-replay counts in the trace of trace_dir (host_share's
    traced_stalls_per_s), or None."""
    hs = host_share(trace_dir, ranks, per_host)
    return hs["traced_stalls_per_s"] if hs else None


def base_args(pair):
    """The recorded job's options (what the change starts from). The more-ranks kind's job
    has MORE_RANKS_BATCH times the drawn batch: its kernels longer against the host work
    that MORE_RANKS ranks' hosts share this machine's cores for."""
    if pair["kind"] == "more-ranks":
        job = list(pair["job"])
        job[job.index("--batch") + 1] = str(pair["batch"] * MORE_RANKS_BATCH *
                                            pair.get("batch_factor", 1))
        return job
    if pair["kind"] == "bucket-down":
        mb = pair["rng"].choice(["100", "256"])
        return pair["job"] + ["--bucket-mb", mb, "--first-bucket-mb", mb]
    return list(pair["job"])


def change(pair, base_row, base_peak):
    """The change of a what-if pair: (ddp-sim options added, SIMGPU_SLOWDOWN or None), or
    for the kinds about ranks ([], {"straggler": "RANK:F"} or {"ranks": N})."""
    rng, kind = pair["rng"], pair["kind"]
    if kind == "straggler":
        return [], {"straggler": "%d:%g" % (rng.randrange(RANKS), rng.choice([1.25, 1.5, 2.0]))}
    if kind == "more-ranks":
        # every other more-ranks pair (the 2nd, 4th, ...: pair 24 of 40) runs across two
        # simulated nodes, the others on one
        two = (pair["pair"] // len(KINDS)) % 2 == 0 and MORE_RANKS % 2 == 0
        return [], {"ranks": MORE_RANKS, "per_node": MORE_RANKS // 2 if two else None}
    if kind == "bucket-down":
        mb = rng.choice(["0.5", "1", "2"])
        return ["--bucket-mb", mb, "--first-bucket-mb", mb], None
    if kind == "bucket-up":
        mb = rng.choice(["100", "256", "512"])
        return ["--bucket-mb", mb, "--first-bucket-mb", mb], None
    if kind == "fusion":
        return ["--fuse-small"], None
    if kind == "cuda-graph":
        return ["--cuda-graph"], None
    if kind == "recompute":
        return ["--recompute", "0-%d" % rng.randint(1, max(1, base_row["layers"] - 2))], None
    if kind == "accumulation":
        k = rng.choice([2, 4]) if pair["batch"] % 4 == 0 else 2
        return ["--accum-steps", str(k), "--batch", str(pair["batch"] // k)], None
    if kind.startswith("kernels-x"):
        return [], float(kind[len("kernels-x"):])
    raise ValueError(kind)


def change_text(added, slowdown):
    """The change column: what change() gave, as a user would set it."""
    if slowdown is None:
        return " ".join(added)
    if not isinstance(slowdown, dict):
        return "SIMGPU_SLOWDOWN=%g" % slowdown
    if "straggler" in slowdown:
        return "simrun --straggler %s" % slowdown["straggler"]
    if slowdown.get("per_node"):
        return "%d ranks, %d nodes of %d" % (slowdown["ranks"], slowdown["ranks"] //
                                              slowdown["per_node"], slowdown["per_node"])
    return "%d ranks" % slowdown["ranks"]


def predict(pair, base_dir, base_peak, added, slowdown):
    """dpro's prediction of the change from the recording in base_dir: (its replay of the
    recording, predicted iteration us, predicted peak bytes or None, the ddp-sim options
    added, the memory budget or None, the predicted mean iteration us). added None: the
    pair's advice is asked for. The replay and the prediction are dpro's median iterations
    (its typical iteration), the statistic of the realised figure (ddp-sim's median): a
    rare stall of the recording (a host hiccup of the world, a thread the machine
    preempted) moves dpro's mean iteration, the one dpro reports first, by its length over
    the iterations, in the recording's replay and in the prediction alike, and the realised
    median not at all."""
    opt = [OPTIMIZE, base_dir, "--json", "--quiet", "--warmup", str(WARMUP), "--batch",
           str(pair["batch"])]
    budget = int(0.6 * base_peak) if pair["kind"] == "advice-memory" else None
    if slowdown is not None:
        if isinstance(slowdown, dict):
            what = (["--what-if-slow-rank", slowdown["straggler"]] if "straggler" in slowdown
                    else ["--what-if-ranks", str(slowdown["ranks"])])
        else:
            what = ["--what-if-scale-kernels", repr(slowdown)]
        more_ranks = isinstance(slowdown, dict) and "ranks" in slowdown
        if more_ranks:
            # the changed job runs all its ranks on this host, as simrun does: the trace
            # gives the host's cores and the ranks' CPU demand (the host-share model); the
            # traced layout's prediction (no ranks added to a host) goes to a column
            j = dpro_json([REPLAY, base_dir, "--json", "--warmup", str(WARMUP)] + what)
            pair.setdefault("no_share", []).append(j["what_if"]["predicted_median_iter_us"])
            what += ["--what-if-ranks-per-host", str(slowdown.get("per_node") or slowdown["ranks"])]
            if slowdown.get("per_node"):
                # across nodes: without the network (not predicted) and with the NIC's line
                # rate to columns, and with the network as a user measures it
                j = dpro_json([REPLAY, base_dir, "--json", "--warmup", str(WARMUP)] + what)
                pair.setdefault("no_network", []).append(
                    j["what_if"]["predicted_median_iter_us"])
                j = dpro_json([REPLAY, base_dir, "--json", "--warmup", str(WARMUP)] + what +
                              ["--what-if-network", str(NIC_GBPS[pair["profile"]])])
                pair.setdefault("line_rate", []).append(j["what_if"]["predicted_median_iter_us"])
                pair["network"] = measure_network(pair)
                what += ["--what-if-network", "%.2f:%.2f" % pair["network"][:2]]
        j = dpro_json([REPLAY, base_dir, "--json", "--warmup", str(WARMUP)] + what)
        if "what_if" not in j:
            raise PairError("dpro-replay gave no what_if: %s" % j.get("diagnostics"))
        if more_ranks:
            hs = j["what_if"].get("host_share", {})
            pair.setdefault("host_scale", []).append(hs.get("host_time_scale", 1.0))
            pair.setdefault("rank_wait", []).append(j["what_if"].get("rank_wait_us", 0.0))
        return (j["simulated_median_iter_us"], j["what_if"]["predicted_median_iter_us"], None,
                added, None, j["what_if"]["predicted_iter_us"])
    if added is None:
        extra = ["--seed", "1", "--budget-s", "3"]
        if budget is not None:
            extra += ["--memory-budget", str(budget)]
        j = dpro_json(opt + extra)
        if not j["strategies"]:
            raise PairError("dpro-optimize recommended nothing for %s" % base_dir)
        added = j["strategies"][0]["knobs"]["ddp_sim_args"].split()
    else:
        j = dpro_json(opt + ["--what-if", " ".join(added)])
    top = j["strategies"][0]
    return (j["baseline_median_iter_us"], top["predicted_median_iter_us"],
            top["peak_memory_bytes"], added, budget, top["predicted_iter_us"])


def run_iterations(probe_us, iterations, run_ms):
    """Measured iterations per run for a job whose iteration took probe_us: at least
    `iterations`, and as many as span run_ms ms (at most MAX_ITERATIONS). A host-bound job
    of 3 ms iterations measured over 20 of them spans 60 ms, which one burst of the
    machine's other work covers whole; over 130 its median leaves such a burst out."""
    if run_ms <= 0 or probe_us <= 0:
        return iterations
    want = int(math.ceil(run_ms * 1e3 / probe_us))
    return max(iterations, min(want, MAX_ITERATIONS))


def one_pair(pair, work, iterations, attempts, run_ms=0):
    """Records, predicts, changes and measures one pair `attempts` times; returns its table
    row (dict): the medians over the attempts of the recorded run's iteration, dpro's
    replay of it, the prediction and the realised iteration (closed_loop.py's rule: the
    median of each side keeps a bias of the prediction whole and leaves out a run another
    job slowed down). The change is fixed at the first attempt (an advice: the first
    attempt's recommendation, predicted from each attempt's own recording after that).
    Both sides are measured the same way: with run_ms > 0 a probe run of the recorded job
    (not kept) sets the iterations of every run (run_iterations), and the attempts
    alternate which run goes first (the recorded one in the first, third, ...; the changed
    one in the others), so that the machine's load drifting during a pair weighs on both
    sides alike. The row's `runs` gives every attempt's recorded, predicted and realised
    iteration."""
    tag = "%02d-%s" % (pair["pair"], pair["kind"])
    base_dir, new_dir = os.path.join(work, tag + "-base"), os.path.join(work, tag + "-new")
    args = device_bound_args(pair, base_dir, iterations)
    added, slowdown, got = None, None, []
    if run_ms > 0:
        shutil.rmtree(base_dir, ignore_errors=True)
        iterations = run_iterations(run_job(pair, args, base_dir, iterations)[0], iterations,
                                    run_ms)
    for k in range(attempts):
        pair.setdefault("loads", []).append(os.getloadavg()[0])
        for d in (base_dir, new_dir):
            shutil.rmtree(d, ignore_errors=True)
        new = None
        if k % 2 == 1:  # the change is fixed: the changed run goes first
            new = changed_run(pair, args, new_dir, iterations, added, slowdown)
        base_us, base_peak, base_row, base_cpu = run_job(pair, args, base_dir, iterations)
        if k == 0 and not pair["kind"].startswith("advice"):
            added, slowdown = change(pair, base_row, base_peak)
        replayed, pred_us, pred_peak, added, budget, pred_mean = predict(
            pair, base_dir, base_peak, added, slowdown)
        if new is None:
            new = changed_run(pair, args, new_dir, iterations, added, slowdown)
        new_us, new_peak, _, new_cpu = new
        base_lag = sync_lag(base_dir)[0]
        new_lag, new_span = sync_lag(new_dir)
        ranks = slowdown.get("ranks", RANKS) if isinstance(slowdown, dict) else RANKS
        per_host = (slowdown.get("per_node") or ranks) if isinstance(slowdown, dict) else RANKS
        got.append((base_us, replayed, pred_us, new_us, pred_peak, new_peak, budget, base_lag,
                    new_lag, new_span, new_cpu, base_cpu, pred_mean,
                    stalls_per_s(base_dir, RANKS, RANKS), stalls_per_s(new_dir, ranks, per_host)))
    return pair_row(pair, args, added, slowdown, got, iterations)


def device_bound_args(pair, base_dir, iterations):
    """The recorded job's options (base_args), for a more-ranks pair across two simulated
    nodes with the batch doubled (at most MAX_BATCH_DOUBLINGS times) until the changed job
    would want at most a quarter of this machine's cores at the recorded iteration: the
    recording's CPU per iteration (its processes' own, warm-up and start included: an
    upper bound) times MORE_RANKS / RANKS over its iteration. simrun runs both simulated
    nodes on this machine's cores, which two real nodes would not share; the prediction
    gives each node the recorded host's CPUs, the layout a user of two nodes has. A
    changed job that is device-bound here is one such a user could run; a host-bound one
    measures this machine's sharing, which no user's two nodes have (docs/fidelity.md,
    "Pair 24 on a draw no test had seen"). Every other pair: base_args unchanged."""
    two = (pair["kind"] == "more-ranks" and (pair["pair"] // len(KINDS)) % 2 == 0 and
           MORE_RANKS % 2 == 0)
    args = base_args(pair)
    while two and pair.get("batch_factor", 1) < 2 ** MAX_BATCH_DOUBLINGS:
        shutil.rmtree(base_dir, ignore_errors=True)
        us, _, _, cpu_ms = run_job(pair, args, base_dir, iterations)
        wanted = cpu_ms * 1e3 * MORE_RANKS / RANKS / us
        print("pair %2d: recorded job at batch %s wants %.2f cores at %d ranks (%.1f ms of "
              "CPU an iteration of %.1f us)" % (pair["pair"], args[args.index("--batch") + 1],
                                                wanted, MORE_RANKS, cpu_ms, us),
              file=sys.stderr, flush=True)
        if wanted <= (os.cpu_count() or 1) / 4.0:
            break
        pair["batch_factor"] = pair.get("batch_factor", 1) * 2
        args = base_args(pair)
    return args


def changed_run(pair, args, new_dir, iterations, added, slowdown):
    """run_job of the pair's changed job (added options, a slowdown, or the kinds about
    ranks: their straggler or rank count)."""
    if isinstance(slowdown, dict):
        return run_job(pair, args, new_dir, iterations, ranks=slowdown.get("ranks", RANKS),
                       straggler=slowdown.get("straggler"), per_node=slowdown.get("per_node"))
    return run_job(pair, args + added, new_dir, iterations, slowdown)


def pair_row(pair, args, added, slowdown, got, iterations):
    """one_pair's row from its attempts' figures `got`."""
    base_us, replayed, pred_us, new_us = (median([g[i] for g in got]) for i in range(4))
    pred_mean = median([g[12] for g in got])
    lag = [median([g[i] for g in got]) if all(g[i] is not None for g in got) else None
           for i in (7, 8, 9)]
    stalls = [median([g[i] for g in got]) if all(g[i] is not None for g in got) else None
              for i in (13, 14)]
    pred_peak, new_peak, budget = got[0][4], max(g[5] for g in got), got[0][6]
    spread = 100.0 * (max(g[3] for g in got) - min(g[3] for g in got)) / new_us
    base_spread = 100.0 * (max(g[0] for g in got) - min(g[0] for g in got)) / base_us
    pred_x, real_x = replayed / pred_us, base_us / new_us
    # each attempt is a whole measurement (its recording, the prediction from it, the
    # changed run next to it): the median over the attempts of their own figures
    paired_err = median([100.0 * (g[3] - g[2]) / g[2] for g in got])
    paired_x = median([100.0 * (g[0] / g[3]) / (g[1] / g[2]) for g in got])
    what = change_text(added, slowdown)
    mib = lambda b: None if b is None or b < 0 else b / 1048576.0
    return {"pair": pair["pair"], "kind": pair["kind"], "world_seed": pair["world_seed"],
            "profile": pair["profile"], "job": " ".join(args), "change": what,
            "base_us": base_us, "replayed_us": replayed, "predicted_us": pred_us,
            "realised_us": new_us, "error_pct": paired_err,
            "predicted_speedup": pred_x, "realised_speedup": real_x,
            "speedup_ratio_pct": paired_x, "realised_spread_pct": spread,
            "predicted_peak_mib": mib(pred_peak),
            "realised_peak_mib": mib(new_peak) if mib(pred_peak) is not None else None,
            "peak_error_pct": 100.0 * (new_peak - pred_peak) / pred_peak
            if mib(pred_peak) is not None else None, "budget_mib": mib(budget),
            "base_lag_us": lag[0], "realised_lag_us": lag[1], "realised_device_us": lag[2],
            "device_error_pct": 100.0 * (lag[2] - pred_us) / pred_us
            if lag[2] is not None else None,
            "base_cpu_ms_per_iter": median([g[11] for g in got]),
            "realised_cpu_ms_per_iter": median([g[10] for g in got]),
            "cores_at_predicted": median([g[10] for g in got]) * 1e3 / pred_us,
            "base_stalls_per_s": stalls[0], "realised_stalls_per_s": stalls[1],
            "mean_predicted_us": pred_mean,
            "mean_error_pct": 100.0 * (new_us - pred_mean) / pred_mean,
            "no_share_predicted_us": median(pair["no_share"]) if "no_share" in pair else None,
            "no_share_error_pct": 100.0 * (new_us - median(pair["no_share"]))
            / median(pair["no_share"]) if "no_share" in pair else None,
            "host_time_scale": median(pair["host_scale"]) if "host_scale" in pair else None,
            "rank_wait_us": median(pair["rank_wait"]) if "rank_wait" in pair else None,
            "no_network_predicted_us": median(pair["no_network"])
            if "no_network" in pair else None,
            "no_network_error_pct": 100.0 * (new_us - median(pair["no_network"]))
            / median(pair["no_network"]) if "no_network" in pair else None,
            "line_rate_predicted_us": median(pair["line_rate"]) if "line_rate" in pair else None,
            "line_rate_error_pct": 100.0 * (new_us - median(pair["line_rate"]))
            / median(pair["line_rate"]) if "line_rate" in pair else None,
            "net_busbw_gbps": pair["network"][0] if "network" in pair else None,
            "net_crossing_us": pair["network"][1] if "network" in pair else None,
            "loads": " ".join("%.1f" % x for x in pair["loads"]),
            "iterations": iterations, "base_spread_pct": base_spread,
            "runs": " ".join("%.0f/%.0f/%.0f" % (g[0], g[2], g[3]) for g in got),
            "medians_error_pct": 100.0 * (new_us - pred_us) / pred_us,
            "medians_speedup_ratio_pct": 100.0 * real_x / pred_x}


def slower_than_said(r):
    """A change dpro predicted faster (speedup > 1) that made the job slower."""
    return r["predicted_speedup"] > 1.0 and r["realised_speedup"] < 1.0


def summary(rows):
    """The suite's closing line over rows."""
    errs = [abs(r["error_pct"]) for r in rows]
    slower = sum(1 for r in rows if r["kind"].startswith("advice") and slower_than_said(r))
    return ("fidelity: %d pairs, mean |error| %.1f %%, max %.1f %%, worst realised/predicted "
            "speedup %.0f %%, slower advice %d"
            % (len(rows), sum(errs) / len(errs), max(errs),
               min(r["speedup_ratio_pct"] for r in rows), slower))


def cell(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.1f" % v if abs(v) >= 100 else "%.3g" % v if abs(v) < 10 else "%.2f" % v
    return str(v)


def per_kind(rows):
    """Markdown lines: mean and max |error| and the worst speedup ratio per kind."""
    out = ["| kind | pairs | mean abs error % | max abs error % | worst realised/predicted "
           "speedup % | max realised spread % | max abs peak memory error % |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for k in KINDS:
        rs = [r for r in rows if r["kind"] == k]
        if rs:
            e = [abs(r["error_pct"]) for r in rs]
            m = [abs(r["peak_error_pct"]) for r in rs if r["peak_error_pct"] is not None]
            out.append("| %s | %d | %.1f | %.1f | %.0f | %.1f | %s |" % (
                k, len(rs), sum(e) / len(e), max(e), min(r["speedup_ratio_pct"] for r in rs),
                max(r["realised_spread_pct"] for r in rs), "%.1f" % max(m) if m else "-"))
    return out


def memory_line(rows):
    """The peak memory figures over rows: predicted against realised, and the budgets."""
    m = [abs(r["peak_error_pct"]) for r in rows if r["peak_error_pct"] is not None]
    b = [r for r in rows if r["budget_mib"] is not None]
    over = sum(1 for r in b if r["realised_peak_mib"] > r["budget_mib"])
    slower = [str(r["pair"]) for r in rows if slower_than_said(r)]
    return ("peak memory: %d pairs predicted, mean |error| %.1f %%, max %.1f %%; realised peak "
            "over the budget in %d of %d budgeted pairs. Changes of any kind predicted faster "
            "that made the job slower: %d (pairs %s)"
            % (len(m), sum(m) / len(m) if m else 0, max(m) if m else 0, over, len(b),
               len(slower), ", ".join(slower) or "none"))


def medians_line(rows):
    """The closing line's figures from the medians of each side (median realised against
    median predicted; the suite's figure before the attempts were paired)."""
    e = [abs(r["medians_error_pct"]) for r in rows]
    return ("median against median: mean |error| %.1f %%, max %.1f %%, worst realised/predicted "
            "speedup %.0f %%" % (sum(e) / len(e), max(e),
                                 min(r["medians_speedup_ratio_pct"] for r in rows)))


LAG_SHARE = 0.10  # a changed run whose device ran this share of its iteration behind


def lag_line(rows):
    """The pairs whose changed run's simulated device fell behind the host's clock by more
    than LAG_SHARE of the iteration (sync_lag): their realised time is the machine's."""
    lagged = [r for r in rows if r["realised_lag_us"] is not None and
              r["realised_lag_us"] > LAG_SHARE * r["realised_us"]]
    e = [abs(r["error_pct"]) for r in rows if r not in lagged]
    return ("device behind the host's clock by more than %d %% of the changed iteration: %d "
            "of %d pairs (%s); mean |error| of the others %s"
            % (100 * LAG_SHARE, len(lagged), len(rows),
               ", ".join("%d %s" % (r["pair"], r["kind"]) for r in lagged) or "none",
               "%.1f %%" % (sum(e) / len(e)) if e else "-"))


def write_tables(out_dir, rows, header):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "fidelity.tsv"), "w") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            f.write("\t".join("" if r[c] is None else str(r[c]) for c in COLUMNS) + "\n")
    with open(os.path.join(out_dir, "fidelity.md"), "w") as f:
        f.write(header + "\n\n| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n")
        for r in rows:
            f.write("| " + " | ".join(cell(r[c]) for c in COLUMNS) + " |\n")
        f.write("\n" + "\n".join(per_kind(rows)) + "\n\n" + memory_line(rows) + "\n\n" +
                lag_line(rows) + "\n\n" + medians_line(rows) + "\n\n" + summary(rows) + "\n")


def run_suite(seed, n, iterations, attempts, work, kinds=None, log=print, run_ms=0):
    """Runs the n pairs of seed (only those of kinds, when given; one_pair's iterations,
    attempts and run_ms); returns (rows, failures)."""
    rows, failures = [], []
    for pair in draw_pairs(seed, n):
        if kinds and pair["kind"] not in kinds:
            continue
        try:
            r = one_pair(pair, work, iterations, attempts, run_ms)
        except (PairError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
            failures.append("pair %d (%s, world %d %s): %s" % (
                pair["pair"], pair["kind"], pair["world_seed"], pair["profile"], e))
            log("pair %d: FAILED: %s" % (pair["pair"], failures[-1]))
            continue
        rows.append(r)
        log("pair %2d %-13s %s seed %-10d %-45s %-40s pred %9.1f real %9.1f err %+6.1f%% "
            "speedup %.3f/%.3f" % (r["pair"], r["kind"], r["profile"], r["world_seed"],
                                   r["job"][:45], r["change"][:40], r["predicted_us"],
                                   r["realised_us"], r["error_pct"], r["realised_speedup"],
                                   r["predicted_speedup"]))
        if r["realised_lag_us"] is not None:
            log("        device behind the host's clock: recorded run %.1f us, changed run "
                "%.1f us; changed run's device span %.1f us (error against it %+.1f %%)"
                % (r["base_lag_us"] or 0, r["realised_lag_us"], r["realised_device_us"],
                   r["device_error_pct"]))
        if r["net_busbw_gbps"] is not None:
            log("        network measured (nccl-perf across two nodes): busbw %.1f GB/s, %.1f us "
                "a crossing; with the NIC's line rate %d GB/s instead: pred %.1f, err %+.1f%%"
                % (r["net_busbw_gbps"], r["net_crossing_us"], NIC_GBPS[r["profile"]],
                   r["line_rate_predicted_us"], r["line_rate_error_pct"]))
        log("        CPU per iteration: recorded job %.1f ms, changed job %.1f ms: %.2f cores at "
            "the predicted iteration (this machine: %d)"
            % (r["base_cpu_ms_per_iter"], r["realised_cpu_ms_per_iter"], r["cores_at_predicted"],
               os.cpu_count() or 0))
        if r["base_stalls_per_s"] is not None and r["realised_stalls_per_s"] is not None:
            log("        host stalls a second (dpro-replay's host share): recorded run %.1f, "
                "changed run %.1f" % (r["base_stalls_per_s"], r["realised_stalls_per_s"]))
    return rows, failures


def missing_programs():
    return [p for p in (SIMRUN, DDP_SIM, NCCL_PERF, DPRO_RUN, REPLAY, OPTIMIZE, EXPORT)
            if not os.access(p, os.X_OK)]


def main():
    if missing_programs():
        print("fidelity: skipped (%s not built: no simulated device)" % missing_programs()[0])
        return 77
    try:
        seed = int(os.environ.get("DPRO_FIDELITY_SEED", DEFAULT_SEED))
        n = int(os.environ.get("FIDELITY_PAIRS", "40"))
        iterations = int(os.environ.get("FIDELITY_ITERATIONS", "20"))
        attempts = int(os.environ.get("FIDELITY_ATTEMPTS", "3"))
        kinds = [k for k in os.environ.get("FIDELITY_KINDS", "").split(",") if k]
        global MORE_RANKS
        run_ms = int(os.environ.get("FIDELITY_RUN_MS", str(RUN_MS)))
        MORE_RANKS = int(os.environ.get("FIDELITY_MORE_RANKS", str(MORE_RANKS)))
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            print("fidelity: FIDELITY_KINDS: unknown kind %s (kinds: %s)"
                  % (", ".join(bad), ",".join(KINDS)), file=sys.stderr)
            return 2
        if min(n, iterations, attempts) < 1 or not 2 <= MORE_RANKS <= 64 or run_ms < 0:
            raise ValueError("FIDELITY_PAIRS, FIDELITY_ITERATIONS and FIDELITY_ATTEMPTS must "
                             "be at least 1, FIDELITY_MORE_RANKS from 2 to 64, "
                             "FIDELITY_RUN_MS at least 0")
    except ValueError as e:
        print("fidelity: DPRO_FIDELITY_SEED, FIDELITY_PAIRS, FIDELITY_ITERATIONS, "
              "FIDELITY_ATTEMPTS, FIDELITY_MORE_RANKS, FIDELITY_RUN_MS want integers: %s" % e,
              file=sys.stderr)
        return 2
    out_dir = os.environ.get("FIDELITY_OUT", os.path.join(BUILD, "fidelity"))
    keep = os.environ.get("FIDELITY_KEEP")
    work = keep or tempfile.mkdtemp(prefix="dpro-fidelity-")
    load = os.getloadavg()
    print("fidelity: DPRO_FIDELITY_SEED=%d, %d pairs, %d ranks, at least %d measured iterations "
          "per run and as many as span %d ms, %d attempts per pair (load average %.1f %.1f %.1f)"
          % ((seed, n, RANKS, iterations, run_ms, attempts) + load))
    try:
        rows, failures = run_suite(seed, n, iterations, attempts, work, kinds, run_ms=run_ms)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    if not rows:
        print("fidelity: no pair ran")
        return 1
    end = os.getloadavg()
    header = ("DPRO_FIDELITY_SEED=%d, %d ranks, at least %d measured iterations per run and as "
              "many as span %d ms, %d attempts per pair, alternately recorded run first and "
              "changed run first (each figure: the median over the attempts; spread: the "
              "realised runs' max - min over their median; runs: each attempt's recorded / "
              "predicted / realised us), load average %.1f at the start, %.1f at the end"
              % (seed, RANKS, iterations, run_ms, attempts, load[0], end[0]))
    write_tables(out_dir, rows, header)
    print("\n".join(per_kind(rows)))
    print(memory_line(rows))
    print(lag_line(rows))
    print(medians_line(rows))
    print("table: %s" % os.path.join(out_dir, "fidelity.md"))
    print(summary(rows))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
