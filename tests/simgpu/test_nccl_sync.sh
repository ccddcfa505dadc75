#!/bin/sh
# test_nccl_sync.sh: test_nccl_sync (a synchronize after a large collective returns at its
# modeled end, with the stream workers starved 3 ms a wake; small messages still move
# their data; ranks that disagree still fail) on 2 ranks under the default data rule;
# simple physics, with a timeout so that a lost message fails instead of hanging.
b=${top_builddir:-.}/tests/simgpu
unset SIMGPU_NCCL_DATA SIMGPU_NCCL_DATA_KB
SIMGPU_PHYSICS=simple SIMGPU_NCCL_TIMEOUT_S=30 SIMGPU_WORKER_DELAY_US=3000 "$b/simrun" -n 2 \
    --timeout 120 -- "$b/test_nccl_sync"
