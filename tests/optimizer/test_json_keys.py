"""test_json_keys: every key README documents for the --json output of dpro-replay and
dpro-optimize is there, under its documented name, in the output of a real run (the
a100-2rank Kineto trace of ../shared, imported). The lists below are README's: the
dpro-replay section ("`--json` keys ... are a stable contract", the `p2p` key) and the
dpro-optimize section (`baseline_iter_us`, `baseline_median_iter_us`,
`baseline_typical_iter_us`, `baseline_steady_iter_us`, `set_aside`, `strategies` and their
keys (with `predicted_median_iter_us`, `predicted_typical_iter_us`,
`predicted_steady_iter_us`, `predicted_steady_speedup`), `knobs` with
`bucket_cap_mb`, `first_bucket_cap_mb`, `buckets`, `bucket_bytes`, and `torch_args` for this PyTorch DDP trace or
`ddp_sim_args` under --framework ddp-sim; `framework`; a strategy's `advice`;
`models.kernel_fixed_source`,
`models.kernel_fixed_capped`; an accumulation plan's `micro_batch_device_us` and
`micro_batch_host_us`; a plan of 0.25 MB buckets' `unseen_protocol`, absent with
`--collective-model nearest`). Keep them in step with README. Also: dpro-optimize's
baseline is dpro-replay's simulated iteration time, and two runs with one --seed give one
answer.

A missing ../shared is a failure when CI=true, a skip elsewhere.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replay"))
from replay_testlib import (  # noqa: E402
    BUILD, IMPORT, KINETO, REPLAY, SKIP, check, exit_status, missing, shared_path)

OPTIMIZE = os.path.join(BUILD, "tools", "dpro-optimize")

REPLAY_KEYS = ["ranks", "iterations", "measured_iter_us", "simulated_iter_us",
               "simulated_median_iter_us", "error_pct", "typical_replay", "breakdown", "critical_path", "per_rank", "p2p"]
OPTIMIZE_KEYS = ["baseline_iter_us", "baseline_median_iter_us", "baseline_typical_iter_us",
                 "baseline_steady_iter_us", "set_aside", "strategies", "framework"]
STRATEGY_KEYS = ["kind", "description", "knobs", "advice", "predicted_iter_us",
                 "predicted_median_iter_us", "predicted_typical_iter_us", "predicted_speedup",
                 "predicted_steady_iter_us", "predicted_steady_speedup", "peak_memory_bytes"]
BUCKET_KNOBS = ["bucket_cap_mb", "first_bucket_cap_mb", "buckets", "bucket_bytes", "torch_args"]
DDP_SIM_KNOBS = ["bucket_cap_mb", "first_bucket_cap_mb", "buckets", "bucket_bytes", "ddp_sim_args"]
ACCUM_KEYS = ["micro_batch_device_us", "micro_batch_host_us"]
MODEL_KEYS = ["kernel_fixed_source", "kernel_fixed_capped"]


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        check(False, "%s: status %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-300:]))
        return None
    return json.loads(p.stdout)


def main():
    if missing((IMPORT, REPLAY, OPTIMIZE)):
        return SKIP
    src = shared_path(os.path.join(KINETO, "a100-2rank-allreduce-rank0.json.gz"))
    tmp = tempfile.mkdtemp(prefix="dpro-json-keys-")
    try:
        d = os.path.join(tmp, "a100")
        p = subprocess.run([IMPORT, "kineto", src, "-o", d, "-q"], capture_output=True,
                           text=True, timeout=300)
        check(p.returncode == 0, "import: %s" % p.stderr[-200:])
        j = run_json([REPLAY, d, "--json"])
        for k in REPLAY_KEYS:
            check(j is not None and k in j, "dpro-replay --json: key %s" % k)
        o = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "60"])
        if j and o:
            check(abs(o["baseline_iter_us"] - j["simulated_iter_us"]) < 1e-3,
                  "one baseline: dpro-optimize %.3f us, dpro-replay %.3f us"
                  % (o["baseline_iter_us"], j["simulated_iter_us"]))
        for k in OPTIMIZE_KEYS:
            check(o is not None and k in o, "dpro-optimize --json: key %s" % k)
        for k in MODEL_KEYS:
            check(o is not None and k in o.get("models", {}), "dpro-optimize --json: models.%s" % k)
        strategies = o["strategies"] if o else []
        check(len(strategies) > 0, "dpro-optimize --json: strategies")
        for s in strategies:
            for k in STRATEGY_KEYS:
                check(k in s, "dpro-optimize --json: strategy %s: key %s" % (s.get("kind"), k))
        # the outliers set aside: the rule, the list (each with its documented keys)
        aside = o.get("set_aside", {}) if o else {}
        check(isinstance(aside.get("rule"), str) and isinstance(aside.get("iterations"), list),
              "dpro-optimize --json: set_aside {rule, iterations} (%s)" % aside)
        for it in aside.get("iterations", []):
            for k in ("iteration", "rank", "iter_us", "median_iter_us", "mad_us"):
                check(k in it, "dpro-optimize --json: set_aside.iterations[]: key %s" % k)
        # deterministic under --seed: a second run gives the same answer (timings aside)
        o2 = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "60"])
        if o and o2:
            for x in (o, o2):
                for k in ("search_s", "evaluations_per_s"):
                    x.pop(k, None)
            check(o == o2, "dpro-optimize --seed 1 twice: the same JSON")
        # a bucket plan: its knobs under their documented names
        w = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "10",
                      "--what-if", "bucket_cap_mb=25"])
        knobs = w["strategies"][0]["knobs"] if w and w.get("strategies") else {}
        for k in BUCKET_KNOBS:
            check(k in knobs, "dpro-optimize --json: knobs.%s (%s)" % (k, sorted(knobs)))
        w = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "10",
                      "--framework", "ddp-sim", "--what-if", "--bucket-mb 25 --first-bucket-mb 1"])
        knobs = w["strategies"][0]["knobs"] if w and w.get("strategies") else {}
        for k in DDP_SIM_KNOBS:
            check(k in knobs, "dpro-optimize --json --framework ddp-sim: knobs.%s (%s)"
                  % (k, sorted(knobs)))
        # buckets of 0.25 MB where the trace's all-reduces are of 8-32 MB (Simple): those
        # under about 0.85 MB priced in LL (unseen_protocol); the nearest line says none
        for cm, want in (("piecewise", True), ("nearest", False)):
            w = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "10",
                          "--what-if", "bucket_cap_mb=0.25", "--collective-model", cm])
            u = w["strategies"][0].get("unseen_protocol") if w and w.get("strategies") else None
            check((u is not None and u.get("protocol") == "LL" and u.get("buckets", 0) > 0 and
                   u.get("measured_protocol") == "Simple") == want,
                  "dpro-optimize --json --collective-model %s: unseen_protocol %s" % (cm, u))
        # an accumulation plan: what each micro-batch before the last costs
        w = run_json([OPTIMIZE, d, "--json", "--seed", "1", "--max-evals", "10",
                      "--what-if", "no_sync=2"])
        top = w["strategies"][0] if w and w.get("strategies") else {}
        for k in ACCUM_KEYS:
            check(isinstance(top.get(k), float) and top[k] >= 0,
                  "dpro-optimize --json: accumulation: key %s (%s)" % (k, sorted(top)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
