#!/bin/sh
# demo.sh BUILD_DIR OUTDIR: the main job on an embedded default, run by
# `tools/quickstart demo`.
#
# On the simulated device (tests/simgpu), under the collector: stock PyTorch DDP
# (tests/torch/ddp_train.py, a small transformer with too-small gradient buckets, 2 ranks)
# when the build has torch (`make venv`), else a 4-rank DDP-like job of ddp-sim
# (ResNet-50-shaped, too-small buckets); DEMO_JOB=torch|ddp-sim chooses. dpro-info shows
# what was recorded, dpro-replay rebuilds and simulates it, dpro-optimize says what to
# change (then the demo applies that advice through the job's own options and measures
# the job again), and dpro-export writes a Chrome trace for ui.perfetto.dev. Without the
# CUDA headers (no collector, no simulated device) it only writes a synthetic trace and
# reads it back, and says so.
set -eu
build=$1
out=$2
top=$(cd "$(dirname "$0")/.." && pwd)
job=${DEMO_JOB:-}
if [ -z "$job" ]; then
    job=ddp-sim
    [ -f "$build/venv/.dpro-torch-stamp" ] && job=torch
fi
if [ "$job" = torch ]; then
    ranks=${DEMO_RANKS:-2}
    job_args=${DEMO_JOB_ARGS:---steps 10 --fill-mib 0 --bucket-cap-mb 0.01}
    advice_key=torch_args
else
    ranks=${DEMO_RANKS:-4}
    job_args=${DEMO_JOB_ARGS:---preset resnet50 --iterations 8 --bucket-mb 1}
    advice_key=ddp_sim_args
fi

mkdir -p "$out"
rm -rf "$out/traces" "$out/traces-after"

if [ ! -x "$build/tests/simgpu/ddp-sim" ] || [ ! -x "$build/tools/dpro-run" ]; then
    echo "demo: no simulated device or collector in this build (configure found no CUDA"
    echo "headers); showing the trace format only."
    mkdir -p "$out/traces"
    "$build/tests/bench/bench_trace" --events 200000 --write "$out/traces/rank0-demo-0.dpro"
    "$build/tools/dpro-info" "$out/traces"
    exit 0
fi

step() { printf '\n== %s\n' "$*"; }

# run_job TRACE_DIR RESULT ARGS...: the job on $ranks ranks under the collector; RESULT
# gets one JSON line per rank with its mean iteration (mean_iter_us).
run_job() {
    trace_dir=$1
    result=$2
    shift 2
    if [ "$job" = torch ]; then
        rm -rf "$result.d"
        mkdir -p "$result.d"
        "$build/tests/simgpu/simrun" -n "$ranks" -- "$build/tools/dpro-run" -o "$trace_dir" -- \
            "$build/venv/bin/python" -W ignore::UserWarning "$top/tests/torch/ddp_train.py" \
            "$@" --out "$result.d"
        # ddp_train.py's steps after the first two (DDP rebuilds its buckets after the first)
        python3 - "$result.d" > "$result" <<'PY'
import glob, json, statistics, sys
for f in sorted(glob.glob(sys.argv[1] + "/rank*.json")):
    run = json.load(open(f))["runs"][0]
    print(json.dumps({"mean_iter_us": statistics.mean(run["iter_us"][2:])}))
PY
    else
        "$build/tools/dpro-run" -o "$trace_dir" -- \
            "$build/tests/simgpu/simrun" -n "$ranks" -- "$build/tests/simgpu/ddp-sim" "$@" \
            > "$result"
    fi
}

if [ "$job" = torch ]; then
    step "1. profile: $ranks ranks of stock PyTorch DDP (tests/torch/ddp_train.py $job_args) under the collector"
else
    step "1. profile: $ranks ranks of ddp-sim ($job_args) under the collector"
fi
run_job "$out/traces" "$out/job-before.jsonl" $job_args
python3 - "$out/job-before.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
mean = sum(r["mean_iter_us"] for r in runs) / len(runs)
print(f"the job measured itself: {mean / 1000:.2f} ms per iteration (mean of {len(runs)} ranks)")
PY

step "2. dpro-info: what was recorded"
"$build/tools/dpro-info" "$out/traces"

step "3. dpro-replay: the job rebuilt as one dataflow graph and simulated"
"$build/tools/dpro-replay" "$out/traces" --critical-path --top 5

if [ -x "$build/tools/dpro-optimize" ]; then
    step "4. dpro-optimize: what to change"
    "$build/tools/dpro-optimize" "$out/traces" --top 3 --seed 1
    # what the demo applies: ddp_train.py has options for bucket sizes and accumulation,
    # not for torch.compile, so for torch the plan measured is the best bucket plan
    applicable=""
    [ "$job" = torch ] && applicable="--strategies tensor"
    "$build/tools/dpro-optimize" "$out/traces" --top 1 --seed 1 --json $applicable \
        > "$out/optimize.json"
    # the advice as the job's options (ddp_train.py: bucket_cap_mb=X -> --bucket-cap-mb X,
    # no_sync=K -> --accum K, micro_batch=B -> --batch B; a knob it has no option for, such
    # as torch.compile, is shown above and not applied)
    advice=$(python3 - "$out/optimize.json" "$advice_key" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["strategies"]
args = s[0]["knobs"].get(sys.argv[2], "") if s else ""
if sys.argv[2] == "torch_args":
    opts = {"bucket_cap_mb": "--bucket-cap-mb", "no_sync": "--accum", "micro_batch": "--batch"}
    toks = [t.partition("=") for t in args.split()]
    args = "" if any(k not in opts for k, _, _ in toks) else \
        " ".join(opts[k] + " " + v for k, _, v in toks)
print(args)
PY
)
    if [ -n "$advice" ]; then
        step "5. apply the top advice ($advice) and measure again"
        run_job "$out/traces-after" "$out/job-after.jsonl" $job_args $advice
        python3 - "$out/job-before.jsonl" "$out/job-after.jsonl" "$out/optimize.json" <<'PY'
import json, sys
def mean(path):
    runs = [json.loads(l) for l in open(path) if l.startswith("{")]
    return sum(r["mean_iter_us"] for r in runs) / len(runs)
before, after = mean(sys.argv[1]), mean(sys.argv[2])
opt = json.load(open(sys.argv[3]))
pred = opt["strategies"][0]["predicted_iter_us"]
print(f"before {before/1000:.2f} ms, predicted {pred/1000:.2f} ms, realised {after/1000:.2f} ms"
      f" (prediction error {100*(pred-after)/after:+.1f}%, speedup {before/after:.2f}x)")
PY
    fi
else
    step "4. dpro-optimize is not built in this tree: skipped"
fi

step "6. dpro-export: Chrome trace for ui.perfetto.dev"
"$build/tools/dpro-export" "$out/traces" --chrome "$out/trace.json" --force
"$build/tools/dpro-export" "$out/traces" --chrome "$out/trace-simulated.json" --simulated --force
ls -l "$out/trace.json" "$out/trace-simulated.json"
echo
echo "open $out/trace.json (measured) and $out/trace-simulated.json (replayed) in ui.perfetto.dev"
