#!/bin/sh
# test_nccl_api.sh: test_nccl_api on 3 ranks under simrun (simple physics), with a timeout
# so that a mismatched all-to-all or gather fails instead of hanging.
b=${top_builddir:-.}/tests/simgpu
SIMGPU_PHYSICS=simple SIMGPU_NCCL_TIMEOUT_S=20 "$b/simrun" -n 3 --timeout 60 -- "$b/test_nccl_api"
