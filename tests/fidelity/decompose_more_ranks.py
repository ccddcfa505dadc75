#!/usr/bin/env python3
"""The fidelity suite's more-ranks pairs decomposed (docs/fidelity.md): for each pair of
a kept run (FIDELITY_KEEP=KEEP FIDELITY_OUT=OUT fidelity.py), dpro's prediction from the
recording of its last attempt (dpro-replay KEEP/NN-more-ranks-base --warmup 3 --json with
the suite's what-if options: --what-if-ranks N --what-if-ranks-per-host K, and
--what-if-network BUSBW:US across nodes: the network the suite measured, or the NIC's
line rate in a table of before it) against the changed run's own trace (dpro-replay
KEEP/NN-more-ranks-new --warmup 3 --json: its measured breakdown), per iteration, mean of
the ranks: compute, communication (transfer: end - last arrival), waiting for other ranks,
the device idle for the host, the window; the medians (dpro's predicted median and the
changed trace's simulated median, which a rare stall does not move); the all-reduce
model's bandwidth and latency on each side. Not a test (no bound): a measurement. Run from
the build directory; dpro runs with no SIMGPU_ variable.

usage: decompose_more_ranks.py OUT KEEP"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402

TERMS = [("compute_us", "compute"), ("communication_us", "communication"),
         ("wait_other_ranks_us", "wait for ranks"), ("host_bound_idle_us", "idle for host"),
         ("window_us", "window")]


def replay(d, extra):
    p = subprocess.run([fidelity.REPLAY, d, "--warmup", str(fidelity.WARMUP), "--json"] + extra,
                       env=fidelity.dpro_env(), capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit("dpro-replay %s failed: %s" % (d, p.stderr[-500:]))
    return json.loads(p.stdout)


def allreduce(j):
    m = [x for x in j["collective_model"] if x["op"] == "allreduce"]
    return "%.0f GB/s, %.0f us" % (m[0]["bandwidth_GBps"], m[0]["alpha_us"]) if m else "-"


def main():
    out, keep = sys.argv[1], sys.argv[2]
    with open(os.path.join(out, "fidelity.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(head, x.rstrip("\n").split("\t"))) for x in f]
    for r in rows:
        if r["kind"] != "more-ranks":
            continue
        tag = os.path.join(keep, "%02d-more-ranks" % int(r["pair"]))
        words = r["change"].replace(",", "").split()  # "8 ranks [2 nodes of 4]"
        n, per = words[0], words[-1] if "nodes" in words else words[0]
        what = ["--what-if-ranks", n, "--what-if-ranks-per-host", per]
        if "nodes" in words and r.get("net_busbw_gbps", "") not in ("", "None"):
            what += ["--what-if-network", "%.2f:%.2f" % (float(r["net_busbw_gbps"]),
                                                         float(r["net_crossing_us"]))]
        elif "nodes" in words:
            what += ["--what-if-network", str(fidelity.NIC_GBPS[r["profile"]])]
        p, q = replay(tag + "-base", what), replay(tag + "-new", [])
        pb, qb = p["what_if"]["breakdown"], q["breakdown"]["measured"]
        print("pair %s (%s, %s; loads %s): predicted median %.0f us, realised median %.0f us "
              "(suite: %s predicted, %s realised)" % (
                  r["pair"], r["profile"], r["change"], r.get("loads", "-"),
                  p["what_if"]["predicted_median_iter_us"], q["simulated_median_iter_us"],
                  r["predicted_us"], r["realised_us"]))
        print("  " + "; ".join("%s %.0f / %.0f" % (name, pb[k], qb[k]) for k, name in TERMS) +
              " (us per iteration, predicted / realised, means)")
        print("  all-reduce model: %s traced, %s realised; host scale x%.2f, wait %.0f us a "
              "collective" % (allreduce(p), allreduce(q),
                              p["what_if"].get("host_share", {}).get("host_time_scale", 1),
                              p["what_if"].get("rank_wait_us", 0)))


if __name__ == "__main__":
    main()
