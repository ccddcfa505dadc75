/* test_nccl_sync: one rank of the test that the NCCL stand-in's data cost no device time,
 * started by test_nccl_sync.sh under simrun (simple physics, SIMGPU_NCCL_DATA and
 * SIMGPU_NCCL_DATA_KB unset: the default rule, 64 KiB).
 *
 * 1. Small messages move their data: an all-gather of 3,000 bytes a rank (what
 *    all_gather_object sends) and a broadcast of 5,000 bytes from the last rank; every
 *    byte is checked.
 * 2. A 128 MiB all-reduce (in place) with the stream workers starved (the script sets
 *    SIMGPU_WORKER_DELAY_US): events before and after it give its modeled span, and the
 *    host time at cudaStreamSynchronize's return, less the span and the time this thread
 *    waited for a CPU, must be under LATE_MS in the best of TRIES.  Copying its data through the
 * shared segment (128 rounds of two barriers) made it return 344-782 ms late here; the buffer keeps
 * what the rank wrote (the rank-specific marks at both ends): large operations move no data.
 * 3. A 1 MiB all-reduce (no data moved, 0.07-0.15 ms modeled) with the workers starved:
 *    its synchronize returns within SMALL_LATE_MS of its modeled end (less this thread's
 *    wait for a CPU, best of TRIES), as the waiting thread arrives at the rendezvous
 *    itself; when the starved worker ran it (woken by the first enqueue, 3 ms before it
 *    may go on) it returned 3.0 ms late (the best of 3 on each rank).
 * 4. Ranks that disagree on a large all-reduce's count (moving no data) fail it with
 *    ncclRemoteError.
 * Prints the lateness; exits nonzero naming the first failed check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu.h"
#include "simgpu_check.h"
#include "simrun_rdzv.h"

#define CHECK_NCCL(call) CHECK((call) == ncclSuccess)

#define SMALL_GATHER 3000
#define SMALL_BCAST 5000
#define BIG_FLOATS ((size_t)32 << 20)    /* 128 MiB */
#define SMALL_FLOATS ((size_t)256 << 10) /* 1 MiB: more than SIMGPU_NCCL_DATA_KB */
#define MARK 4096                        /* bytes marked at each end of the big buffer */
/* Bound on the big all-reduce's lateness, less this thread's own wait for a CPU: the
 * starved workers' 3 ms at each wake (each rank's worker wakes for the collective and for
 * the event after it) and the peer worker's own wait for a CPU before it arrives. */
#define LATE_MS 60.0
/* Bound on the small all-reduce's lateness (3.), under the workers' 3 ms. */
#define SMALL_LATE_MS 1.5
#define TRIES 3

static int g_rank, g_n;
static ncclComm_t g_comm;
static cudaStream_t g_s;

static unsigned char
byte_of(int r, size_t i)
{
    return (unsigned char)(r * 71 + i * 13 + 5);
}

/* 1: the all-gather and the broadcast of small messages deliver every byte. */
static void
small_messages(void)
{
    size_t all = (size_t)g_n * SMALL_GATHER;
    unsigned char *h = malloc(all > SMALL_BCAST ? all : SMALL_BCAST), *d_in, *d_out;
    int root = g_n - 1;
    CHECK(h != NULL);
    CHECK_CUDA(cudaMalloc((void **)&d_in, SMALL_BCAST));
    CHECK_CUDA(cudaMalloc((void **)&d_out, all > SMALL_BCAST ? all : SMALL_BCAST));
    for (size_t i = 0; i < SMALL_GATHER; i++)
        h[i] = byte_of(g_rank, i);
    CHECK_CUDA(cudaMemcpy(d_in, h, SMALL_GATHER, cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllGather(d_in, d_out, SMALL_GATHER, ncclUint8, g_comm, g_s));
    CHECK_CUDA(cudaStreamSynchronize(g_s));
    CHECK_CUDA(cudaMemcpy(h, d_out, all, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < all; i++)
        if (h[i] != byte_of((int)(i / SMALL_GATHER), i % SMALL_GATHER)) {
            fprintf(stderr, "rank %d: all-gather byte %zu is %u, want %u\n", g_rank, i, h[i],
                    byte_of((int)(i / SMALL_GATHER), i % SMALL_GATHER));
            exit(1);
        }
    for (size_t i = 0; i < SMALL_BCAST; i++)
        h[i] = g_rank == root ? byte_of(root + 7, i) : 0;
    CHECK_CUDA(cudaMemcpy(d_in, h, SMALL_BCAST, cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclBroadcast(d_in, d_out, SMALL_BCAST, ncclUint8, root, g_comm, g_s));
    CHECK_CUDA(cudaStreamSynchronize(g_s));
    CHECK_CUDA(cudaMemcpy(h, d_out, SMALL_BCAST, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < SMALL_BCAST; i++)
        if (h[i] != byte_of(root + 7, i)) {
            fprintf(stderr, "rank %d: broadcast byte %zu is %u, want %u\n", g_rank, i, h[i],
                    byte_of(root + 7, i));
            exit(1);
        }
    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_out));
    free(h);
}

/* One all-reduce of `count` floats after the ranks met: how late its synchronize returned
 * after its modeled end, less the time this thread waited for a CPU meanwhile (ms); prints
 * both. */
static double
late_once(float *buf, size_t count, float *meet, int k)
{
    cudaEvent_t ev[2];
    double t_rec, t_ret, w0, queued_ms, late_ms;
    float el = 0;
    CHECK_CUDA(cudaEventCreate(&ev[0]));
    CHECK_CUDA(cudaEventCreate(&ev[1]));
    /* The ranks meet first, so that neither waits long for the other below. */
    CHECK_NCCL(ncclAllReduce(meet, meet, 1, ncclFloat32, ncclSum, g_comm, g_s));
    CHECK_CUDA(cudaStreamSynchronize(g_s));
    t_rec = (double)simgpu_now_ns();
    CHECK_CUDA(cudaEventRecord(ev[0], g_s)); /* at the stream's idle head: starts now */
    CHECK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, g_comm, g_s));
    CHECK_CUDA(cudaEventRecord(ev[1], g_s));
    w0 = ms_waiting_for_cpu();
    CHECK_CUDA(cudaStreamSynchronize(g_s));
    t_ret = (double)simgpu_now_ns();
    queued_ms = ms_waiting_for_cpu() - w0;
    CHECK_CUDA(cudaEventElapsedTime(&el, ev[0], ev[1]));
    /* ev[0] started at or after t_rec: t_rec + el is at most the modeled end. */
    late_ms = (t_ret - t_rec) / 1e6 - (double)el;
    printf("rank %d, try %d: %zu KiB all-reduce, modeled %.3f ms, synchronize returned %.3f ms "
           "after its end (%.3f ms of it waiting for a CPU)\n",
           g_rank, k, count * sizeof(float) >> 10, (double)el, late_ms, queued_ms);
    CHECK(late_ms > -0.01);
    CHECK_CUDA(cudaEventDestroy(ev[0]));
    CHECK_CUDA(cudaEventDestroy(ev[1]));
    return late_ms - queued_ms;
}

/* 2: the big all-reduce's synchronize returns at its modeled end (the best of TRIES: a
 * peer's worker left without a CPU by the machine's other load delays the rendezvous,
 * which this thread's own wait does not count); its data stay put. */
static void
big_allreduce(float *buf)
{
    unsigned char mark[MARK], got[MARK];
    char *end = (char *)buf + BIG_FLOATS * sizeof(float) - MARK;
    float *meet = NULL;
    double best = 1e9;
    CHECK_CUDA(cudaMalloc((void **)&meet, sizeof(float)));
    for (size_t i = 0; i < MARK; i++)
        mark[i] = byte_of(g_rank, i);
    CHECK_CUDA(cudaMemcpy(buf, mark, MARK, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(end, mark, MARK, cudaMemcpyHostToDevice));
    for (int k = 0; k < TRIES; k++) {
        double late = late_once(buf, BIG_FLOATS, meet, k);
        best = late < best ? late : best;
    }
    CHECK(best < LATE_MS);
    CHECK_CUDA(cudaMemcpy(got, buf, MARK, cudaMemcpyDeviceToHost));
    CHECK(memcmp(got, mark, MARK) == 0);
    CHECK_CUDA(cudaMemcpy(got, end, MARK, cudaMemcpyDeviceToHost));
    CHECK(memcmp(got, mark, MARK) == 0);
    CHECK_CUDA(cudaFree(meet));
}

/* 3: a small all-reduce's synchronize returns at its modeled end although the starved
 * workers would run it 3 ms late (the best of TRIES, as in 2). */
static void
small_allreduce(float *buf)
{
    float *meet = NULL;
    double best = 1e9;
    CHECK_CUDA(cudaMalloc((void **)&meet, sizeof(float)));
    for (int k = 0; k < TRIES; k++) {
        double late = late_once(buf, SMALL_FLOATS, meet, k);
        best = late < best ? late : best;
    }
    printf("rank %d: 1 MiB all-reduce, best %.3f ms late (bound %.1f)\n", g_rank, best,
           SMALL_LATE_MS);
    CHECK(best < SMALL_LATE_MS);
    CHECK_CUDA(cudaFree(meet));
}

/* 4: a count that differs between the ranks fails the collective on every rank. */
static void
disagreement(float *buf)
{
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(
        ncclAllReduce(buf, buf, BIG_FLOATS - (size_t)g_rank, ncclFloat32, ncclSum, g_comm, g_s));
    CHECK(cudaStreamSynchronize(g_s) != cudaSuccess);
    CHECK_NCCL(ncclCommGetAsyncError(g_comm, &async));
    CHECK(async == ncclRemoteError);
}

int
main(void)
{
    ncclUniqueId id;
    float *buf = NULL;
    g_rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    g_n = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    CHECK_CUDA(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    if (g_rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK(simrun_rdzv_share(g_rank, &id, sizeof(id), 20) == 0);
    CHECK_NCCL(ncclCommInitRank(&g_comm, g_n, id, g_rank));
    CHECK_CUDA(cudaMalloc((void **)&buf, BIG_FLOATS * sizeof(float)));
    small_messages();
    big_allreduce(buf);
    small_allreduce(buf);
    disagreement(buf);
    CHECK(ncclCommAbort(g_comm) == ncclSuccess);
    printf("rank %d of %d: test_nccl_sync ok\n", g_rank, g_n);
    return 0;
}
