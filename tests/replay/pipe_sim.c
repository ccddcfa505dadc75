/*
 * pipe-sim: a pipeline-parallel training job on the simulated GPU (tests/simgpu), for the
 * replay's point-to-point tests. One rank per stage, started by simrun; every iteration
 * (an NVTX range "iteration N", closed by a stream synchronisation) runs M micro-batches
 * through the stages GPipe-style: all forwards, then all backwards, then an optimizer
 * step. Stage s receives each micro-batch's activations from stage s-1 and sends its own
 * to stage s+1 (ncclRecv / ncclSend), and in the backward receives gradients from s+1 and
 * sends gradients to s-1. Transfers run on a communication stream ordered with the compute
 * stream by events, as PyTorch's NCCL process groups do.
 *
 * With --allreduce-kb K every stage ends its step with a K KB all-reduce on the same
 * communicator (data parallelism across pipelines would use another one; sharing it makes
 * the ranks' NCCL call sequences differ before each all-reduce, which the replay must
 * handle). With --grouped the backward pairs each gradient send with the next gradient
 * receive in one ncclGroupStart/End (batched send/recv, as Megatron's schedules issue
 * them), so one kernel carries two transfers.
 *
 *   pipe-sim [--iterations N] [--warmup W] [--micro M] [--fwd-us F] [--bwd-us B]
 *            [--act-kb K] [--allreduce-kb K] [--op-overhead-us H] [--grouped]
 *
 * Prints one JSON line per rank: rank, world, iter_us (each measured iteration, host time
 * between the per-iteration synchronisations), mean_iter_us, sends, recvs, allreduces (per
 * rank, all iterations).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu.h"
#include "simrun_rdzv.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "pipe-sim: %s failed: %d\n", #call, (int)e_);                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define NK(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "pipe-sim: %s failed: %d\n", #call, (int)r_);                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Kernel handles: the device runs them for their registered durations. */
static char k_fwd, k_bwd, k_opt;

static struct {
    int iterations, warmup, micro, grouped;
    double fwd_us, bwd_us, act_kb, ar_kb, overhead_us;
    int rank, world;
    cudaStream_t compute, comm;
    cudaEvent_t ev_c, ev_p; /* compute -> comm, comm -> compute */
    ncclComm_t nccl;
    char *act, *grad; /* device buffers: one slot per micro-batch */
    size_t bytes;
    int sends, recvs, allreduces;
} g;

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The framework's host time before each operation (dispatcher, autograd). */
static void
overhead(void)
{
    double until = now_us() + g.overhead_us;
    while (now_us() < until)
        ;
}

static void
launch(const char *func)
{
    dim3 grid = {108, 1, 1}, block = {256, 1, 1};
    overhead();
    CK(cudaLaunchKernel((const void *)func, grid, block, NULL, 0, g.compute));
}

/* The comm stream waits for the compute stream's work so far. */
static void
comm_after_compute(void)
{
    CK(cudaEventRecord(g.ev_c, g.compute));
    CK(cudaStreamWaitEvent(g.comm, g.ev_c, 0));
}

/* The compute stream waits for the comm stream's work so far. */
static void
compute_after_comm(void)
{
    CK(cudaEventRecord(g.ev_p, g.comm));
    CK(cudaStreamWaitEvent(g.compute, g.ev_p, 0));
}

static void
send_to(char *buf, int peer)
{
    overhead();
    NK(ncclSend(buf, g.bytes, ncclInt8, peer, g.nccl, g.comm));
    g.sends++;
}

static void
recv_from(char *buf, int peer)
{
    overhead();
    NK(ncclRecv(buf, g.bytes, ncclInt8, peer, g.nccl, g.comm));
    g.recvs++;
}

/* One training step of this stage. */
static void
step(void)
{
    int s = g.rank, last = g.world - 1, m;
    for (m = 0; m < g.micro; m++) {
        if (s > 0) {
            recv_from(g.act + (size_t)m * g.bytes, s - 1);
            compute_after_comm();
        }
        launch(&k_fwd);
        if (s < last) {
            comm_after_compute();
            send_to(g.act + (size_t)m * g.bytes, s + 1);
        }
    }
    if (s < last)
        recv_from(g.grad, s + 1);
    for (m = 0; m < g.micro; m++) {
        if (s < last)
            compute_after_comm();
        launch(&k_bwd);
        if (s > 0)
            comm_after_compute();
        /* send this gradient, receive the next one (grouped: one kernel) */
        int more = s < last && m + 1 < g.micro;
        if (g.grouped && s > 0 && more)
            NK(ncclGroupStart());
        if (s > 0)
            send_to(g.grad + (size_t)m * g.bytes, s - 1);
        if (more)
            recv_from(g.grad + (size_t)(m + 1) * g.bytes, s + 1);
        if (g.grouped && s > 0 && more)
            NK(ncclGroupEnd());
    }
    if (g.ar_kb > 0) {
        comm_after_compute();
        overhead();
        NK(ncclAllReduce(g.grad, g.grad, (size_t)(g.ar_kb * 256), ncclFloat32, ncclSum, g.nccl,
                         g.comm));
        g.allreduces++;
        compute_after_comm();
    }
    launch(&k_opt);
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: pipe-sim [--iterations N] [--warmup W] [--micro M] [--fwd-us F] "
            "[--bwd-us B] [--act-kb K] [--allreduce-kb K] [--op-overhead-us H] [--grouped]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"iterations", required_argument, NULL, 'n'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"micro", required_argument, NULL, 'm'},
                                         {"fwd-us", required_argument, NULL, 'f'},
                                         {"bwd-us", required_argument, NULL, 'b'},
                                         {"act-kb", required_argument, NULL, 'a'},
                                         {"allreduce-kb", required_argument, NULL, 'r'},
                                         {"op-overhead-us", required_argument, NULL, 'o'},
                                         {"grouped", no_argument, NULL, 'g'},
                                         {NULL, 0, NULL, 0}};
    ncclUniqueId id;
    double *iter_us, t_prev, sum = 0;
    char label[32];
    int c;

    g.iterations = 6;
    g.warmup = 2;
    g.micro = 4;
    g.fwd_us = 300;
    g.bwd_us = -1;
    g.act_kb = 2048;
    g.overhead_us = 10;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            g.iterations = atoi(optarg);
            break;
        case 'w':
            g.warmup = atoi(optarg);
            break;
        case 'm':
            g.micro = atoi(optarg);
            break;
        case 'f':
            g.fwd_us = atof(optarg);
            break;
        case 'b':
            g.bwd_us = atof(optarg);
            break;
        case 'a':
            g.act_kb = atof(optarg);
            break;
        case 'r':
            g.ar_kb = atof(optarg);
            break;
        case 'o':
            g.overhead_us = atof(optarg);
            break;
        case 'g':
            g.grouped = 1;
            break;
        default:
            usage();
        }
    }
    if (g.bwd_us < 0)
        g.bwd_us = 2 * g.fwd_us;
    if (g.iterations < 1 || g.warmup < 0 || g.micro < 1 || g.fwd_us <= 0 || g.act_kb <= 0 ||
        g.ar_kb < 0 || g.ar_kb > g.act_kb * g.micro) /* the all-reduce runs in g.grad */
        usage();
    g.rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
    g.world = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
    g.bytes = (size_t)(g.act_kb * 1024);
    simgpu_register_kernel(&k_fwd, "stage_forward", (uint64_t)(g.fwd_us * 1000));
    simgpu_register_kernel(&k_bwd, "stage_backward", (uint64_t)(g.bwd_us * 1000));
    simgpu_register_kernel(&k_opt, "optimizer_step", (uint64_t)(g.fwd_us * 200));

    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&g.compute, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g.comm, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&g.ev_c, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&g.ev_p, cudaEventDisableTiming));
    CK(cudaMalloc((void **)&g.act, g.bytes * (size_t)g.micro));
    CK(cudaMalloc((void **)&g.grad, g.bytes * (size_t)g.micro));
    if (g.rank == 0)
        NK(ncclGetUniqueId(&id));
    if (g.world > 1 && simrun_rdzv_share(g.rank, &id, sizeof(id), 60) != 0) {
        fprintf(stderr, "pipe-sim rank %d: cannot exchange the NCCL id (run under simrun)\n",
                g.rank);
        return 1;
    }
    NK(ncclCommInitRank(&g.nccl, g.world, id, g.rank));
    iter_us = calloc((size_t)g.iterations, sizeof(*iter_us));
    if (!iter_us)
        return 1;

    t_prev = now_us();
    for (int it = 0; it < g.warmup + g.iterations; it++) {
        snprintf(label, sizeof(label), "iteration %d", it);
        nvtxRangePushA(label);
        step();
        CK(cudaStreamSynchronize(g.comm));
        CK(cudaStreamSynchronize(g.compute));
        nvtxRangePop();
        double t = now_us();
        if (it >= g.warmup) {
            iter_us[it - g.warmup] = t - t_prev;
            sum += t - t_prev;
        }
        t_prev = t;
    }
    NK(ncclCommDestroy(g.nccl));
    printf("{\"rank\":%d,\"world\":%d,\"micro\":%d,\"grouped\":%d,\"sends\":%d,\"recvs\":%d,"
           "\"allreduces\":%d,\"iter_us\":[",
           g.rank, g.world, g.micro, g.grouped, g.sends, g.recvs, g.allreduces);
    for (int i = 0; i < g.iterations; i++)
        printf("%s%.1f", i ? "," : "", iter_us[i]);
    printf("],\"mean_iter_us\":%.1f}\n", sum / g.iterations);
    free(iter_us);
    return 0;
}
