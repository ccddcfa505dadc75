#!/bin/sh
# demo.sh BUILD_DIR OUTDIR: the main job on an embedded default, run by
# `tools/quickstart demo`.
#
# On the simulated device (tests/simgpu): a 4-rank DDP-like job (ResNet-50-shaped, with
# too-small gradient buckets) runs under the collector; dpro-info shows what was recorded,
# dpro-replay rebuilds and simulates it, dpro-optimize says what to change (then the demo
# applies that advice and measures the job again), and dpro-export writes a Chrome trace
# for ui.perfetto.dev. Without the CUDA headers (no collector, no simulated device) it
# only writes a synthetic trace and reads it back, and says so.
set -eu
build=$1
out=$2
ranks=${DEMO_RANKS:-4}
job_args=${DEMO_JOB_ARGS:---preset resnet50 --iterations 8 --bucket-mb 1}

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

step "1. profile: $ranks ranks of ddp-sim ($job_args) under the collector"
"$build/tools/dpro-run" -o "$out/traces" -- \
    "$build/tests/simgpu/simrun" -n "$ranks" -- "$build/tests/simgpu/ddp-sim" $job_args \
    > "$out/job-before.jsonl"
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
    "$build/tools/dpro-optimize" "$out/traces" --top 1 --seed 1 --json > "$out/optimize.json"
    advice=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["strategies"]; print(s[0]["knobs"].get("ddp_sim_args","") if s else "")' "$out/optimize.json")
    if [ -n "$advice" ]; then
        step "5. apply the top advice ($advice) and measure again"
        "$build/tools/dpro-run" -o "$out/traces-after" -- \
            "$build/tests/simgpu/simrun" -n "$ranks" -- "$build/tests/simgpu/ddp-sim" \
            $job_args $advice > "$out/job-after.jsonl"
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
