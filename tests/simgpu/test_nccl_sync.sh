#!/bin/sh
# test_nccl_sync.sh: test_nccl_sync (a synchronize after a large collective returns at its
# modeled end, with the stream workers starved 3 ms a wake; small messages still move
# their data; ranks that disagree still fail) on 2 ranks under the default data rule;
# simple physics, with a timeout so that a lost message fails instead of hanging. Then
# again with data settings that are not what they should be (SIMGPU_NCCL_DATA_KB=abc,
# SIMGPU_NCCL_STAGE_KB=4k, SIMGPU_NCCL_DATA=2): each is named on stderr and its default
# taken, so the small messages still move their data.
b=${top_builddir:-.}/tests/simgpu
unset SIMGPU_NCCL_DATA SIMGPU_NCCL_DATA_KB SIMGPU_NCCL_STAGE_KB
SIMGPU_PHYSICS=simple SIMGPU_NCCL_TIMEOUT_S=30 SIMGPU_WORKER_DELAY_US=3000 "$b/simrun" -n 2 \
    --timeout 120 -- "$b/test_nccl_sync" || exit 1
out=$(SIMGPU_NCCL_DATA_KB=abc SIMGPU_NCCL_STAGE_KB=4k SIMGPU_NCCL_DATA=2 SIMGPU_PHYSICS=simple \
    SIMGPU_NCCL_TIMEOUT_S=30 "$b/simrun" -n 2 --timeout 120 -- "$b/test_nccl_sync" 2>&1)
st=$?
echo "$out"
[ $st -eq 0 ] || { echo "FAIL: test_nccl_sync with bad data settings: status $st"; exit 1; }
for said in 'SIMGPU_NCCL_DATA_KB=abc is not a whole number from 0 to 1099511627776: 64' \
    'SIMGPU_NCCL_STAGE_KB=4k is not a whole number from 1 to 1099511627776: 1024' \
    'SIMGPU_NCCL_DATA=2 is neither 0 nor 1: unset'; do
    n=$(printf '%s\n' "$out" | grep -cF "simgpu: $said")
    [ "$n" -eq 2 ] || { echo "FAIL: '$said' said once by each rank ($n times)"; exit 1; }
done
echo "ok: bad data settings named, their defaults taken"
