/* test_nccl_api: one rank of the test of the NCCL calls ProcessGroupNCCL makes beyond
 * test_coll's, started by test_nccl_api.sh under simrun: the scalable init, buffer and
 * window registration, ncclMemAlloc, PreMulSum ops in an all-reduce, all-to-all and gather
 * (they would hang if a rank's sends and receives did not match the others'), and the
 * not-simulated calls answering ncclInvalidUsage. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu_check.h"
#include "simrun_rdzv.h"

#define CHECK_NCCL(call) CHECK((call) == ncclSuccess)

int
main(void)
{
    int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    ncclUniqueId id;
    ncclComm_t comm;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclRedOp_t op;
    ncclWindow_t win = NULL;
    cudaStream_t s;
    void *buf, *reg = NULL, *mem = NULL;
    float scale = 0.5f;
    int n = 0;

    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&buf, 1 << 22));
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK(simrun_rdzv_share(rank, &id, sizeof(id), 20) == 0);
    CHECK(ncclCommInitRankScalable(&comm, world, rank, 0, &id, &cfg) == ncclInvalidArgument);
    CHECK_NCCL(ncclCommInitRankScalable(&comm, world, rank, 1, &id, &cfg));
    CHECK_NCCL(ncclCommCount(comm, &n));
    CHECK(n == world);

    CHECK_NCCL(ncclCommRegister(comm, buf, 1 << 22, &reg));
    CHECK_NCCL(ncclCommWindowRegister(comm, buf, 1 << 22, &win, 0));
    CHECK_NCCL(ncclMemAlloc(&mem, 1 << 20));
    CHECK(mem != NULL);

    CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, comm));
    CHECK((int)op >= (int)ncclNumOps);
    CHECK_NCCL(ncclAllReduce(buf, buf, 1 << 16, ncclFloat32, op, comm, s));
    CHECK_NCCL(ncclAlltoAll(buf, (char *)buf + (1 << 21), 1024, ncclFloat32, comm, s));
    CHECK_NCCL(ncclGather(buf, (char *)buf + (1 << 21), 1024, ncclFloat32, world - 1, comm, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_NCCL(ncclRedOpDestroy(op, comm));
    CHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument);

    CHECK(ncclCommShrink(comm, NULL, 0, NULL, NULL, 0) == ncclInvalidUsage);
    CHECK(ncclCommRevoke(comm, 0) == ncclInvalidUsage);

    CHECK_NCCL(ncclMemFree(mem));
    CHECK(ncclCommDeregister(comm, win) == ncclInvalidArgument); /* a window, not a buffer */
    CHECK_NCCL(ncclCommWindowDeregister(comm, win));
    CHECK_NCCL(ncclCommDeregister(comm, reg));
    CHECK_NCCL(ncclCommDestroy(comm));
    printf("rank %d: test_nccl_api ok\n", rank);
    return 0;
}
