#!/bin/sh
# test_nccl_data.sh: test_nccl_data (the exact results of every NCCL operation the stand-in
# moves data for; SIMGPU_NCCL_DATA=1, so that operations of every size move theirs) on 2
# ranks with the default staging size, and on 4 ranks with 4 KiB staging regions, so that
# every operation runs in many rounds; simple physics, with a timeout so that a lost
# message fails instead of hanging.
b=${top_builddir:-.}/tests/simgpu
SIMGPU_PHYSICS=simple SIMGPU_NCCL_DATA=1 SIMGPU_NCCL_TIMEOUT_S=30 "$b/simrun" -n 2 \
    --timeout 120 -- "$b/test_nccl_data" || exit 1
SIMGPU_PHYSICS=simple SIMGPU_NCCL_DATA=1 SIMGPU_NCCL_TIMEOUT_S=30 SIMGPU_NCCL_STAGE_KB=4 \
    "$b/simrun" -n 4 --timeout 120 -- "$b/test_nccl_data" || exit 1
