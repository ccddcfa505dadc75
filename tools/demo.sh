#!/bin/sh
# demo.sh BUILD_DIR OUTDIR: the main job on an embedded default, run by
# `tools/quickstart demo`. Today: write a trace with the format library's benchmark
# generator (a training-shaped launch+kernel mix) and read it back with dpro-info.
set -eu
build=$1
out=$2
mkdir -p "$out/traces"
rm -f "$out/traces/"*.dpro
echo "== writing a trace (launch+kernel mix shaped like a training job)"
"$build/tests/bench/bench_trace" --events 200000 --write "$out/traces/rank0-demo-0.dpro"
echo
echo "== dpro-info $out/traces"
"$build/tools/dpro-info" "$out/traces"
