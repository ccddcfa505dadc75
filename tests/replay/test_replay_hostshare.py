"""test_replay_hostshare: the host-share model of `dpro-replay --what-if-ranks N
--what-if-ranks-per-host K` (replay/hostshare.c, docs/models.md "Ranks sharing a host's
CPUs") on synthetic traces whose CPU samples are known (gen_traces --cpu CPUS:DEMAND:HOSTS):

  - the factor, from the demand written and the host's busy share the replay measures
    (checked within the bounds gen_traces' known host costs give): 2 ranks of demand 0.2
    on one host of 2 CPUs, 4 of them on it: x 1.62 (burst load 0.81 traced, 1.62 at 4);
    demand 0.4 (traced over 1): x 2.0, the ratio of ranks per host; demand 0.1: x 1 and
    the prediction is the traced layout's to the digit; per host as traced (no
    --what-if-ranks-per-host): x 1 whatever the demand; one rank per host traced (2 hosts
    of 1 CPU), 2 per host: x 1.62;
  - what it does to the prediction: the iteration with x 2.0 is longer than without;
  - the stalls at N: the timeslice learned from a trace whose host threads lose 1 ms once
    an iteration (gen_traces --host-stalls), else 1.5 ms on 2 CPUs, the scheduler's base
    slice: without stalls, and with stalls of 20 ms (over the base slice: the machine's
    other work, counted in long_stalls, not a timeslice); the share of stalled
    arrivals and the longest stall from the loads; the wait at collectives longer with
    the 4 ranks on one host than in the traced layout;
  - an old trace (no host_cpus, cpu_samples): no model, said once, the prediction the
    traced layout's; malformed samples: exit 1 naming the file and the sample;
    --what-if-ranks-per-host without --what-if-ranks or above N: exit 2;
  - the node layout (--what-if-network, replay_scale_ranks_nodes): 8 ranks 4 a host from
    a trace of one host span 2 nodes, the network not predicted without the flag (said),
    a slow network lengthening the iteration, one faster than the trace's link and no
    crossing latency leaving it, one so slow that the collectives' times would not fit
    refused (exit 1, said), one node or a trace of 2 hosts leaving the flag unused
    (said); bad values or no --what-if-ranks: exit 2;
  - the collector's rows: a simulated-GPU job recorded under the collector has
    host_cpus (this process's sched_getaffinity count), host_cpu_list (the same set in
    Linux's cpulist spelling) and cpu_samples, times increasing,
    CPU times not decreasing, the CPU per second between the first and last sample
    between 0 and host_cpus (skipped, said, without the simulated device).
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_testlib import (  # noqa: E402
    BUILD, REPLAY, DPRO_RUN, SIMRUN, DDP_SIM, LIBDIR, check, exit_status, traced_env)

GEN = os.path.join(BUILD, "tests", "replay", "gen_traces")


def gen(d, *opts):
    shutil.rmtree(d, ignore_errors=True)
    p = subprocess.run([GEN, d, "--ranks", "2", "--iters", "8"] + list(opts),
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        print("FAIL: gen_traces %s: %s" % (" ".join(opts), p.stderr))
        sys.exit(1)


def replay(d, *opts):
    p = subprocess.run([REPLAY, d, "--json", "--warmup", "2"] + list(opts),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr


def scale_of(d, ranks, per_host=None):
    extra = ["--what-if-ranks-per-host", str(per_host)] if per_host else []
    rc, j, err = replay(d, "--what-if-ranks", str(ranks), *extra)
    check(rc == 0, "dpro-replay --what-if-ranks %d %s: status %d: %s" % (ranks, extra, rc, err))
    return j["what_if"] if j else {}


def want_scale(hs, cpus, demand, per_host, traced):
    """The factor of docs/models.md from the demand written and the busy share measured:
    the burst demand d / busy per rank, the ranks of a host busy at the same moments."""
    b = demand / hs["mean_host_busy"] / cpus
    return max(1.0, (per_host or traced) * b) / max(1.0, traced * b)


def test_factor(tmp):
    d = os.path.join(tmp, "t")
    # (--cpu, ranks, per host, traced ranks per host, the factor expected in kind)
    for cpu, ranks, per_host, traced, kind in [
            ("2:0.2:1", 4, 4, 2, "x1.62"), ("2:0.4:1", 4, 4, 2, "x2"), ("2:0.1:1", 4, 4, 2, "x1"),
            ("2:0.4:1", 4, None, 2, "x1"), ("1:0.2:2", 4, 2, 1, "x1.62")]:
        gen(d, "--cpu", cpu)
        w = scale_of(d, ranks, per_host)
        hs = w.get("host_share", {})
        got = hs.get("host_time_scale")
        print("--cpu %s, %d ranks, %s per host: %s" % (cpu, ranks, per_host, json.dumps(hs)))
        c, dem = int(cpu.split(":")[0]), float(cpu.split(":")[1])
        # gen_traces' host thread: 40 launches of 4 + 1.5 us in an iteration of 1193.7 us,
        # and the event, stream-wait and all-reduce calls around its 4 buckets
        check(hs.get("known") is True and 0.18 <= hs.get("mean_host_busy", 0) <= 0.35,
              "busy share %s within [0.18, 0.35]" % hs.get("mean_host_busy"))
        want = want_scale(hs, c, dem, per_host, traced) if hs.get("known") else None
        check(got is not None and want is not None and abs(got - want) < 1e-6 * want,
              "host time scale %s, want %s" % (got, want))
        check(want is not None and (kind == "x1") == (abs(want - 1) < 1e-9) and
              (kind != "x2" or abs(want - 2) < 1e-9), "the case is %s (%s)" % (kind, want))
        if kind == "x1" and per_host:
            base = scale_of(d, ranks)
            check(w.get("predicted_median_iter_us") == base.get("predicted_median_iter_us"),
                  "x 1 predicts %s, the traced layout %s" % (
                      w.get("predicted_median_iter_us"), base.get("predicted_median_iter_us")))
        if kind == "x2":
            base = scale_of(d, ranks)
            check(w["predicted_median_iter_us"] > base["predicted_median_iter_us"],
                  "host time x 2 predicts %.1f us, the traced layout %.1f us: longer" % (
                      w["predicted_median_iter_us"], base["predicted_median_iter_us"]))


def want_stalls(hs):
    """docs/models.md's stalls at N from the loads and the timeslice: a share 1 - L'/L of
    the arrivals waits, uniformly up to (L - L') slices (L' the traced load, 1 below)."""
    to, tr = max(1.0, hs["load"]), max(1.0, hs["load_traced"])
    return (1 - tr / to, (to - tr) * hs["timeslice_us"]) if to > tr else (0.0, 0.0)


def test_stalls(tmp):
    d = os.path.join(tmp, "s")
    # the timeslice: 1 ms lost once an iteration, at a place that moves (--host-stalls), is
    # learned from the trace; without stalls, or with stalls of 20 ms (over the base slice
    # of 2 CPUs: other work), the base slice, 0.75 ms x 2
    for stalls, slice_us, learned in [("0.001", 1000.0, True), ("0.02", 1500.0, False),
                                      (None, 1500.0, False)]:
        gen(d, "--cpu", "2:0.2:1", "--iters", "14", *(["--host-stalls", stalls] if stalls else []))
        w = scale_of(d, 4, 4)
        hs = w.get("host_share", {})
        print("--host-stalls %s: %s, rank_wait_us %s" % (stalls, json.dumps(hs),
                                                          w.get("rank_wait_us")))
        n, n_long = hs.get("traced_stalls", 0), hs.get("long_stalls", -1)
        check(hs.get("timeslice_learned") is learned and
              abs(hs.get("timeslice_us", 0) - slice_us) < 1e-3 * slice_us and
              (n >= 8) == (stalls is not None) and
              n_long == (n if stalls == "0.02" else 0),
              "timeslice %s us (learned %s, %d stalls, %d long), want %.0f (%s)" % (
                  hs.get("timeslice_us"), hs.get("timeslice_learned"), n, n_long, slice_us,
                  learned))
        p, top = want_stalls(hs) if hs.get("known") else (None, None)
        check(p is not None and p > 0 and abs(hs.get("stall_share", -1) - p) < 1e-9 and
              abs(hs.get("stall_max_us", -1) - top) < 1e-6 * top,
              "stalls %s of arrivals up to %s us, want %s, %s" % (
                  hs.get("stall_share"), hs.get("stall_max_us"), p, top))
        # the traced layout has no stalls; the 4 on one host wait longer at collectives
        base = scale_of(d, 4)
        check(base.get("host_share", {}).get("stall_share") == 0 and
              w.get("rank_wait_us", 0) > base.get("rank_wait_us", 0),
              "waits with stalls %s us, without %s us" % (
                  w.get("rank_wait_us"), base.get("rank_wait_us")))


def test_old_and_bad(tmp):
    d = os.path.join(tmp, "old")
    gen(d)
    rc, j, err = replay(d, "--what-if-ranks", "4", "--what-if-ranks-per-host", "4")
    hs = j["what_if"].get("host_share", {}) if j else {}
    print("old trace: %s; stderr %r" % (json.dumps(hs), err))
    check(rc == 0 and hs.get("known") is False and "no host_cpus" in hs.get("why", ""),
          "an old trace gives no model: status %d, %s" % (rc, hs))
    check(err.count("no host-share model") == 1, "said once: %r" % err)
    base = scale_of(d, 4)
    check(j is not None and j["what_if"]["predicted_median_iter_us"] ==
          base.get("predicted_median_iter_us"), "an old trace predicts the traced layout")
    gen(d, "--cpu", "2:0.5", "--samples", "10:5,20:x")
    rc, j, err = replay(d, "--what-if-ranks", "4")
    print("malformed: status %d, %r" % (rc, err))
    check(rc == 1 and "rank0.dpro" in err and "sample 1" in err,
          "malformed samples: exit 1 naming the file and sample")
    for opts in (["--what-if-ranks-per-host", "2"],
                 ["--what-if-ranks", "4", "--what-if-ranks-per-host", "5"]):
        rc, _, err = replay(d, *opts)
        check(rc == 2, "%s: status %d, want 2" % (opts, rc))


def test_network(tmp):
    d = os.path.join(tmp, "net")
    gen(d, "--cpu", "2:0.2:1")
    base = ["--what-if-ranks", "8", "--what-if-ranks-per-host", "4"]
    rc, j, err = replay(d, *base)
    w = j["what_if"] if j else {}
    print("8 ranks, 4 a host, no network: %s; %r" % (w.get("nodes"), err[-300:]))
    check(rc == 0 and w.get("nodes") == {"traced": 1, "at_ranks": 2, "network_priced": 0} and
          "not predicted" in err, "2 nodes, the network said to be missing: %s" % w.get("nodes"))
    without = w.get("predicted_median_iter_us", 0)
    rc, j, err = replay(d, *base, "--what-if-network", "0.5:20")
    w = j["what_if"] if j else {}
    print("--what-if-network 0.5:20: %s, %.1f us against %.1f us" % (
        w.get("nodes"), w.get("predicted_median_iter_us", 0), without))
    check(rc == 0 and w.get("nodes", {}).get("network_priced") == 1 and
          w["nodes"].get("network_gbps") == 0.5 and w["nodes"].get("network_hop_us") == 20,
          "the network priced: %s" % w.get("nodes"))
    check(w.get("predicted_median_iter_us", 0) > without, "a slow network, a longer iteration")
    rc, j, err = replay(d, *base, "--what-if-network", "100000")
    w = j["what_if"] if j else {}
    check(rc == 0 and w.get("predicted_median_iter_us") == without,
          "a network faster than the trace's link: %s, want %s" % (
              w.get("predicted_median_iter_us"), without))
    rc, j, err = replay(d, *base, "--what-if-network", "1e-300")
    check(rc == 1 and j is None and "--what-if-network 1e-300" in err,
          "a network too slow to price: status %d, want 1, said (%r)" % (rc, err[-200:]))
    for opts, why in ((["--what-if-ranks", "8", "--what-if-ranks-per-host", "8"], "one node"),
                      (base, "spans nodes")):
        if why == "spans nodes":
            gen(d, "--cpu", "1:0.2:2")
        rc, j, err = replay(d, *opts)
        ref = j["what_if"]["predicted_median_iter_us"] if j else None
        rc, j, err = replay(d, *opts, "--what-if-network", "0.5")
        w = j["what_if"] if j else {}
        print("%s: %s; %r" % (why, w.get("nodes"), err[-200:]))
        check(rc == 0 and w.get("nodes", {}).get("network_priced") == 0 and
              "--what-if-network unused" in err and w.get("predicted_median_iter_us") == ref,
              "%s: the flag unused, said" % why)
    for opts in (["--what-if-network", "5"], base + ["--what-if-network", "0"],
                 base + ["--what-if-network", "5:x"], base + ["--what-if-network", "5:-1"],
                 base + ["--what-if-network", "5:"]):
        rc, _, err = replay(d, *opts)
        check(rc == 2 and "--what-if-network" in err, "%s: status %d, want 2" % (opts, rc))


def cpu_list(cpus):
    """Linux's cpulist spelling of a set of CPUs ("0-3,8-11")."""
    runs = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def test_collector(tmp):
    if not all(os.path.exists(p) for p in (SIMRUN, DDP_SIM, DPRO_RUN)):
        print("skip the collector part: no simulated device in this build")
        return
    d = os.path.join(tmp, "rec")
    p = subprocess.run([SIMRUN, "-n", "2", "--", DPRO_RUN, "-o", d, "--", DDP_SIM, "--preset",
                        "resnet50", "--layers", "2", "--iterations", "20", "--warmup", "2"],
                       env=traced_env(SIMRUN_SIMGPU_LIBDIR=LIBDIR, SIMGPU_PHYSICS="simple"),
                       capture_output=True, text=True, timeout=150)
    check(p.returncode == 0, "recording: status %d: %s" % (p.returncode, p.stderr[-500:]))
    traces = sorted(f for f in os.listdir(d) if f.endswith(".dpro")) if p.returncode == 0 else []
    check(len(traces) == 2, "two traces, got %s" % traces)
    for f in traces:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, f), uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        db.close()
        cpus = int(meta.get("host_cpus", 0))
        s = [tuple(int(x) for x in v.split(":")) for v in meta.get("cpu_samples", "").split(",")
             if v]
        ok = len(s) >= 2 and all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(s, s[1:]))
        rate = (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0]) if ok else -1
        print("%s: host_cpus %d (affinity here %d), %d samples over %.3f s, %.2f CPUs" % (
            f, cpus, len(os.sched_getaffinity(0)), len(s), (s[-1][0] - s[0][0]) / 1e6 if s else 0,
            rate))
        check(cpus == len(os.sched_getaffinity(0)), "host_cpus %d" % cpus)
        want = cpu_list(os.sched_getaffinity(0))
        check(meta.get("host_cpu_list") == want,
              "host_cpu_list %r, want %r" % (meta.get("host_cpu_list"), want))
        check(ok and 0 < rate <= cpus, "samples increasing, CPU per second in (0, host_cpus]")


def main():
    if not os.path.exists(GEN):
        print("FAIL: %s is not built" % GEN)
        return 1
    tmp = tempfile.mkdtemp(prefix="hostshare-")
    try:
        test_factor(tmp)
        test_stalls(tmp)
        test_old_and_bad(tmp)
        test_network(tmp)
        test_collector(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
