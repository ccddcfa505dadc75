/*
 * hook_mix: the CUDA and NCCL calls of one torch DDP step, repeated, for the cost of the
 * collector's hooks on the calling thread (tests/torch/bench_torch_overhead.py runs it
 * with and without the collector and takes the difference).
 *
 *   hook_mix [--iterations N] [--batches B]
 *
 * One iteration makes the calls one rank of tests/torch/traced_train.py makes per step
 * (docs/figures.md, where the overhead goes: the trace of a 200-step run): 172 kernel
 * launches, 38 cudaMemsetAsync, 37 cudaMemcpyAsync (device to device), 28 cudaEventRecord,
 * 26 cudaEventQuery, 20 cudaStreamWaitEvent, 7 cudaEventCreateWithFlags and 7
 * cudaEventDestroy, 7 ncclAllReduce (a one-rank communicator) and 2
 * cudaStreamSynchronize: MIX_CALLS calls, on two streams as torch uses a compute and a
 * communication stream.  The kernels take no device time and the device models no
 * launch cost (SIMGPU_LAUNCH_US=0), so the calling thread's time is the simulated
 * runtime's and, when preloaded, the collector's.
 *
 * After one warm-up batch, B batches of N iterations; per iteration it reads the calling
 * thread's CPU clock (CLOCK_THREAD_CPUTIME_ID: what the job's own thread pays, whatever
 * else runs on the machine) around the calls but the two synchronisations (whose
 * spinning waits for the device would hide the hooks' cost), and prints per batch
 *   batch K: thread_cpu_ns_per_iter X wall_ns_per_iter Y
 * then
 *   calls_per_iter C median_thread_cpu_ns_per_iter M
 * Exit status: 0; 1 when a call fails (named); 2 on a usage error.  Under callgrind
 * (--separate-threads=yes) the calling thread's instruction count, less that of a run of
 * fewer iterations, gives the instructions per iteration.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h's group calls */
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu.h"

#define MIX_LAUNCHES 172
#define MIX_MEMSETS 38
#define MIX_COPIES 37
#define MIX_RECORDS 28
#define MIX_QUERIES 26
#define MIX_WAITS 20
#define MIX_EVENTS 7 /* created and destroyed */
#define MIX_ALLREDUCES 7
#define MIX_SYNCS 2
#define MIX_CALLS                                                                                  \
    (MIX_LAUNCHES + MIX_MEMSETS + MIX_COPIES + MIX_RECORDS + MIX_QUERIES + MIX_WAITS +             \
     2 * MIX_EVENTS + MIX_ALLREDUCES + MIX_SYNCS)
#define MIX_MAX_BATCHES 1000

static char k_mix; /* the kernel's host stub: its address is its identity */

struct mix {
    cudaStream_t compute, comm;
    cudaEvent_t ready; /* the compute stream's progress, waited for by the comm stream */
    ncclComm_t nccl;
    float *a, *b;
};

static int
ok(int failed, const char *what)
{
    if (failed)
        fprintf(stderr, "hook_mix: %s failed\n", what);
    return failed ? 1 : 0;
}

/* One step's calls, in about torch's order: launches with memsets and copies between
 * them, event records and waits hand the gradients to the communication stream, whose
 * all-reduces run as the buckets fill; the step ends with two synchronisations.  Stores
 * the calling thread's CPU ns in the calls before the synchronisations in *cpu_ns. */
static double
thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int
mix_iteration(struct mix *m, double *cpu_ns)
{
    double t0 = thread_cpu_ns();
    dim3 g = {1, 1, 1}, blk = {128, 1, 1};
    int rc = 0, e = 0, r = 0, q = 0, w = 0, ar = 0, c = 0, s = 0;
    cudaEvent_t tmp[MIX_EVENTS];
    for (int i = 0; i < MIX_EVENTS && !rc; i++)
        rc = ok(cudaEventCreateWithFlags(&tmp[i], cudaEventDisableTiming) != cudaSuccess,
                "cudaEventCreateWithFlags");
    for (int i = 0; i < MIX_LAUNCHES && !rc; i++) {
        rc = ok(cudaLaunchKernel(&k_mix, g, blk, NULL, 0, m->compute) != cudaSuccess,
                "cudaLaunchKernel");
        if (!rc && i < MIX_MEMSETS)
            rc = ok(cudaMemsetAsync(m->a, 0, 4096, m->compute) != cudaSuccess, "cudaMemsetAsync");
        if (!rc && c < MIX_COPIES && i % 4 == 1 && ++c)
            rc = ok(cudaMemcpyAsync(m->b, m->a, 4096, cudaMemcpyDeviceToDevice, m->compute) !=
                        cudaSuccess,
                    "cudaMemcpyAsync");
        if (!rc && r < MIX_RECORDS && i % 6 == 2 && ++r)
            rc =
                ok(cudaEventRecord(e < MIX_EVENTS ? tmp[e++] : m->ready, m->compute) != cudaSuccess,
                   "cudaEventRecord");
        if (!rc && q < MIX_QUERIES && i % 6 == 3 && ++q)
            rc = ok(cudaEventQuery(m->ready) == cudaErrorInvalidResourceHandle, "cudaEventQuery");
        if (!rc && w < MIX_WAITS && i % 8 == 4 && ++w)
            rc =
                ok(cudaStreamWaitEvent(m->comm, m->ready, 0) != cudaSuccess, "cudaStreamWaitEvent");
        if (!rc && ar < MIX_ALLREDUCES && i % 24 == 23 && ++ar)
            rc = ok(ncclAllReduce(m->a, m->a, 1024, ncclFloat32, ncclSum, m->nccl, m->comm) !=
                        ncclSuccess,
                    "ncclAllReduce");
    }
    /* the counts above are reached within the launches; the rest, if any, here */
    for (; !rc && c < MIX_COPIES; c++)
        rc = ok(cudaMemcpyAsync(m->b, m->a, 4096, cudaMemcpyDeviceToDevice, m->compute) !=
                    cudaSuccess,
                "cudaMemcpyAsync");
    for (; !rc && r < MIX_RECORDS; r++)
        rc = ok(cudaEventRecord(m->ready, m->compute) != cudaSuccess, "cudaEventRecord");
    for (; !rc && q < MIX_QUERIES; q++)
        rc = ok(cudaEventQuery(m->ready) == cudaErrorInvalidResourceHandle, "cudaEventQuery");
    for (; !rc && w < MIX_WAITS; w++)
        rc = ok(cudaStreamWaitEvent(m->comm, m->ready, 0) != cudaSuccess, "cudaStreamWaitEvent");
    for (; !rc && ar < MIX_ALLREDUCES; ar++)
        rc = ok(ncclAllReduce(m->a, m->a, 1024, ncclFloat32, ncclSum, m->nccl, m->comm) !=
                    ncclSuccess,
                "ncclAllReduce");
    for (int i = 0; i < MIX_EVENTS; i++)
        if (cudaEventDestroy(tmp[i]) != cudaSuccess && !rc)
            rc = ok(1, "cudaEventDestroy");
    /* The synchronisations wait for the device, the calling thread spinning for a while
     * first: their time is the device's pace, not the host's cost, so it is left out. */
    *cpu_ns = thread_cpu_ns() - t0;
    for (; !rc && s < MIX_SYNCS; s++)
        rc = ok(cudaStreamSynchronize(s ? m->compute : m->comm) != cudaSuccess,
                "cudaStreamSynchronize");
    return rc;
}

static int
mix_open(struct mix *m)
{
    ncclUniqueId id;
    int rc = ok(cudaSetDevice(0) != cudaSuccess, "cudaSetDevice");
    if (!rc)
        rc = ok(cudaStreamCreateWithFlags(&m->compute, cudaStreamNonBlocking) != cudaSuccess ||
                    cudaStreamCreateWithFlags(&m->comm, cudaStreamNonBlocking) != cudaSuccess,
                "cudaStreamCreateWithFlags");
    if (!rc)
        rc = ok(cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming) != cudaSuccess,
                "cudaEventCreateWithFlags");
    if (!rc)
        rc = ok(cudaMalloc((void **)&m->a, 4096) != cudaSuccess ||
                    cudaMalloc((void **)&m->b, 4096) != cudaSuccess,
                "cudaMalloc");
    if (!rc)
        rc = ok(ncclGetUniqueId(&id) != ncclSuccess ||
                    ncclCommInitRank(&m->nccl, 1, id, 0) != ncclSuccess,
                "ncclCommInitRank");
    return rc;
}

static double
ns_of(const struct timespec *t)
{
    return (double)t->tv_sec * 1e9 + (double)t->tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* B + 1 batches of n iterations (the first a warm-up, not counted); prints each and the
 * median of the thread's CPU ns per iteration. */
static int
mix_run(struct mix *m, long n, int batches)
{
    static double cpu[MIX_MAX_BATCHES];
    int rc = 0;
    for (int b = -1; b < batches && !rc; b++) {
        struct timespec w0, w1;
        double sum = 0, one = 0;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        for (long i = 0; i < n && !rc; i++) {
            rc = mix_iteration(m, &one);
            sum += one;
        }
        clock_gettime(CLOCK_MONOTONIC, &w1);
        if (b < 0 || rc)
            continue;
        cpu[b] = sum / (double)n;
        printf("batch %d: thread_cpu_ns_per_iter %.0f wall_ns_per_iter %.0f\n", b, cpu[b],
               (ns_of(&w1) - ns_of(&w0)) / (double)n);
    }
    if (!rc) {
        qsort(cpu, (size_t)batches, sizeof cpu[0], cmp_double);
        printf("calls_per_iter %d median_thread_cpu_ns_per_iter %.0f\n", MIX_CALLS,
               batches % 2 ? cpu[batches / 2] : (cpu[batches / 2 - 1] + cpu[batches / 2]) / 2);
    }
    return rc;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"iterations", required_argument, NULL, 'n'},
                                         {"batches", required_argument, NULL, 'b'},
                                         {0, 0, 0, 0}};
    struct mix m;
    long n = 50, batches = 9;
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        long v = (c == 'n' || c == 'b') ? strtol(optarg, &end, 10) : 0;
        if ((c != 'n' && c != 'b') || *end || v < 1 || (c == 'b' && v > MIX_MAX_BATCHES)) {
            fprintf(stderr, "usage: hook_mix [--iterations N>=1] [--batches 1..%d]\n",
                    MIX_MAX_BATCHES);
            return 2;
        }
        *(c == 'n' ? &n : &batches) = v;
    }
    /* Before the device reads its configuration. */
    setenv("SIMGPU_PHYSICS", "simple", 1);
    setenv("SIMGPU_LAUNCH_US", "0", 1);
    memset(&m, 0, sizeof m);
    rc = ok(simgpu_register_kernel(&k_mix, "hook_mix_kernel", 0) != 0, "simgpu_register_kernel");
    if (!rc)
        rc = mix_open(&m);
    if (!rc)
        rc = mix_run(&m, n, (int)batches);
    return rc;
}
