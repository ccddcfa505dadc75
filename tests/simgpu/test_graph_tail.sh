#!/bin/sh
# test_graph_tail.sh: test_graph_tail (a captured step's closing synchronize returns at the
# graph's modeled end; the ops behind its all-reduce cost the stream workers no wake-up
# each) on 2 ranks, simple physics: once with the stream workers starved 3 ms a wake-up
# (the median lateness under 1.5 ms), once with both ranks on one CPU (at most 40 worker
# wake-ups in any step; the graph has 100 ops behind the all-reduce).
b=${top_builddir:-.}/tests/simgpu
SIMGPU_PHYSICS=simple SIMGPU_NCCL_TIMEOUT_S=30 SIMGPU_WORKER_DELAY_US=3000 "$b/simrun" -n 2 \
    --timeout 120 -- "$b/test_graph_tail" 1.5 0 || exit 1
unset SIMGPU_WORKER_DELAY_US
SIMGPU_PHYSICS=simple SIMGPU_NCCL_TIMEOUT_S=30 "$b/simrun" -n 2 --timeout 120 -- \
    "$b/test_graph_tail" 0 40 one-cpu
