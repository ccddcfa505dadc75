/* test_coll: one rank of the NCCL stand-in test, started by simrun.  Rank `slow`
 * arrives `delay_ms` late at an all-reduce; every rank prints when it enqueued
 * the collective and when its stream finished it (CLOCK_MONOTONIC, shared by
 * the processes of one machine).  Also runs a grouped send/recv ring, a split
 * and a broadcast.  Usage: test_coll SLOW_RANK DELAY_MS */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu.h"
#include "simgpu_check.h"
#include "simrun_rdzv.h"

#define CHECK_NCCL(call) CHECK((call) == ncclSuccess)

int
main(int argc, char **argv)
{
    int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    int slow = argc > 1 ? atoi(argv[1]) : 0, n = 0, r = -1;
    double delay_ms = argc > 2 ? atof(argv[2]) : 0;
    ncclUniqueId id;
    ncclComm_t comm, sub;
    cudaStream_t s;
    float *buf;
    double t_enq, t_done, t_ring;
    struct timespec nap;

    CHECK_CUDA(cudaSetDevice(rank % 1));
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc((void **)&buf, 1 << 22));
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK(simrun_rdzv_share(rank, &id, sizeof(id), 20) == 0);
    CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));
    CHECK_NCCL(ncclCommCount(comm, &n));
    CHECK_NCCL(ncclCommUserRank(comm, &r));
    CHECK(n == world && r == rank);

    /* A grouped ring exchange: would deadlock without group semantics. */
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(buf, 1024, ncclFloat32, (rank + 1) % world, comm, s));
    CHECK_NCCL(ncclRecv(buf + 1024, 1024, ncclFloat32, (rank + world - 1) % world, comm, s));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(s));
    t_ring = (double)simgpu_now_ns() / 1e6;

    /* Split into even and odd ranks and broadcast inside each half. */
    CHECK_NCCL(ncclCommSplit(comm, rank % 2, rank, &sub, NULL));
    CHECK_NCCL(ncclCommCount(sub, &n));
    CHECK(n == (world + 1 - rank % 2) / 2);
    CHECK_NCCL(ncclBroadcast(buf, buf, 256, ncclFloat32, 0, sub, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_NCCL(ncclCommDestroy(sub));

    /* The timed all-reduce: the slow rank arrives late. */
    if (rank == slow && delay_ms > 0) {
        nap.tv_sec = (time_t)(delay_ms / 1000);
        nap.tv_nsec = (long)((delay_ms - (double)nap.tv_sec * 1000) * 1e6);
        nanosleep(&nap, NULL);
    }
    t_enq = (double)simgpu_now_ns() / 1e6;
    CHECK_NCCL(ncclAllReduce(buf, buf, 1 << 20, ncclFloat32, ncclSum, comm, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    t_done = (double)simgpu_now_ns() / 1e6;
    CHECK_NCCL(ncclCommDestroy(comm));
    printf("{\"rank\":%d,\"ring_ms\":%.3f,\"enqueue_ms\":%.3f,\"done_ms\":%.3f}\n", rank, t_ring,
           t_enq, t_done);
    return 0;
}
