/*
 * bench_simgpu: host cost of the simulated device (tests/simgpu) per device operation.
 *
 *   bench_simgpu [--ops N]
 *
 * Tiny kernels (0 ns of device time) launched under the simple physics with no modelled
 * launch cost (SIMGPU_LAUNCH_US=0), so that every nanosecond measured is the simulator's
 * own: the launch path (API scope, stream lookup, enqueue), the stream worker's wake-up,
 * execution and completion, and the synchronisation.  Cases:
 *   - 1 stream:  N launches on one stream, then cudaStreamSynchronize;
 *   - 4 streams: N launches dealt round-robin over 4 non-blocking streams, then
 *                cudaDeviceSynchronize;
 *   - round trip: N / 10 times one launch then cudaStreamSynchronize (wake-up latency);
 *   - host-bound: N / 10 kernels of 5 us on one stream, each launched after 20 us of host
 *                 work (a busy wait): the device idles between kernels, as in a job whose
 *                 host is the bottleneck;
 *   - device-bound: N / 10 kernels of 20 us, each launched after 5 us of host work: the
 *                 device runs behind the host.
 * Per case: cpu ns/op (the process's user + system time, every thread, over the ops),
 * device ns/op (the same less the launching thread's: the device's own threads, what a
 * real GPU would not take from the host), wall ns/op, launch ns/op (the launching
 * thread's time in the launch calls), and context switches per op (voluntary +
 * involuntary, every thread).  Figures are printed, not
 * asserted: this is a benchmark, not a test.  For counts that do not depend on the
 * machine's load, run it under callgrind (threads are serialised there):
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null tests/bench/bench_simgpu --ops 2000
 * and divide the "Collected" instruction count by the ops.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RUSAGE_THREAD */
#endif
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"

#define NSTREAMS 4

static char k_tiny, k_5us, k_20us;

struct sample {
    uint64_t wall_ns, cpu_ns, thread_ns, csw;
};

static uint64_t
tv_ns(const struct rusage *ru)
{
    return (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000ULL +
           (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000ULL;
}

static void
sample_now(struct sample *s)
{
    struct rusage ru, th;
    getrusage(RUSAGE_THREAD, &th);
    getrusage(RUSAGE_SELF, &ru);
    s->wall_ns = simgpu_now_ns();
    s->cpu_ns = tv_ns(&ru);
    s->thread_ns = tv_ns(&th);
    s->csw = (uint64_t)(ru.ru_nvcsw + ru.ru_nivcsw);
}

static int
check(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess) {
        fprintf(stderr, "bench_simgpu: %s: %s\n", what, cudaGetErrorName(rc));
        return 1;
    }
    return 0;
}

static void
report(const char *name, long ops, const struct sample *a, const struct sample *b,
       uint64_t launch_ns)
{
    printf("%-12s ops %7ld  cpu %8.0f ns/op  device %8.0f ns/op  wall %8.0f ns/op  "
           "launch %6.0f ns/op  switches %5.2f /op\n",
           name, ops, (double)(b->cpu_ns - a->cpu_ns) / (double)ops,
           ((double)(b->cpu_ns - a->cpu_ns) - (double)(b->thread_ns - a->thread_ns)) / (double)ops,
           (double)(b->wall_ns - a->wall_ns) / (double)ops, (double)launch_ns / (double)ops,
           (double)(b->csw - a->csw) / (double)ops);
}

/* Launches `ops` kernels dealt round-robin over the first `n` of st, then synchronises
 * (the stream when n is 1, the device else).  Returns nonzero on a CUDA error. */
static int
burst(const char *name, cudaStream_t *st, int n, long ops)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    struct sample s0, s1;
    uint64_t t0, t1;
    int rc = 0;
    sample_now(&s0);
    t0 = simgpu_now_ns();
    for (long i = 0; i < ops && !rc; i++)
        rc = check(cudaLaunchKernel(&k_tiny, g, b, NULL, 0, st[i % n]), "cudaLaunchKernel");
    t1 = simgpu_now_ns();
    if (!rc)
        rc = check(n == 1 ? cudaStreamSynchronize(st[0]) : cudaDeviceSynchronize(), "sync");
    sample_now(&s1);
    if (!rc)
        report(name, ops, &s0, &s1, t1 - t0);
    return rc;
}

/* `ops` times: one launch on s, then cudaStreamSynchronize. */
static int
round_trip(cudaStream_t s, long ops)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    struct sample s0, s1;
    uint64_t launch = 0;
    int rc = 0;
    sample_now(&s0);
    for (long i = 0; i < ops && !rc; i++) {
        uint64_t t0 = simgpu_now_ns();
        rc = check(cudaLaunchKernel(&k_tiny, g, b, NULL, 0, s), "cudaLaunchKernel");
        launch += simgpu_now_ns() - t0;
        if (!rc)
            rc = check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    }
    sample_now(&s1);
    if (!rc)
        report("round trip", ops, &s0, &s1, launch);
    return rc;
}

/* `ops` times: `host_us` of host work (a busy wait), then one launch of k on s; then
 * cudaStreamSynchronize. */
static int
paced(const char *name, cudaStream_t s, const void *k, double host_us, long ops)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    struct sample s0, s1;
    uint64_t launch = 0;
    int rc = 0;
    sample_now(&s0);
    for (long i = 0; i < ops && !rc; i++) {
        uint64_t t0 = simgpu_now_ns() + (uint64_t)(host_us * 1000);
        while (simgpu_now_ns() < t0)
            ;
        t0 = simgpu_now_ns();
        rc = check(cudaLaunchKernel(k, g, b, NULL, 0, s), "cudaLaunchKernel");
        launch += simgpu_now_ns() - t0;
    }
    if (!rc)
        rc = check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    sample_now(&s1);
    if (!rc)
        report(name, ops, &s0, &s1, launch);
    return rc;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"ops", required_argument, NULL, 'n'}, {0, 0, 0, 0}};
    cudaStream_t st[NSTREAMS];
    long ops = 20000;
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        if (c != 'n') {
            fprintf(stderr, "usage: bench_simgpu [--ops N]\n");
            return 2;
        }
        ops = strtol(optarg, &end, 10);
        if (*end || ops < 10) {
            fprintf(stderr, "bench_simgpu: --ops: '%s' is not a count >= 10\n", optarg);
            return 2;
        }
    }
    /* Before the device reads its configuration. */
    setenv("SIMGPU_PHYSICS", "simple", 1);
    setenv("SIMGPU_LAUNCH_US", "0", 1);
    if (simgpu_register_kernel(&k_tiny, "tiny_kernel", 0) ||
        simgpu_register_kernel(&k_5us, "kernel_5us", 5000) ||
        simgpu_register_kernel(&k_20us, "kernel_20us", 20000)) {
        fprintf(stderr, "bench_simgpu: cannot register the kernel\n");
        return 1;
    }
    for (int i = 0; i < NSTREAMS && !rc; i++)
        rc = check(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking), "cudaStreamCreate");
    /* Warm-up: starts the stream workers. */
    if (!rc)
        rc = burst("warm-up", st, NSTREAMS, 100 * NSTREAMS);
    if (!rc)
        rc = burst("1 stream", st, 1, ops);
    if (!rc)
        rc = burst("4 streams", st, NSTREAMS, ops);
    if (!rc)
        rc = round_trip(st[0], ops / 10);
    if (!rc)
        rc = paced("host-bound", st[0], &k_5us, 20, ops / 10);
    if (!rc)
        rc = paced("device-bound", st[0], &k_20us, 5, ops / 10);
    for (int i = 0; i < NSTREAMS; i++)
        cudaStreamDestroy(st[i]);
    return rc;
}
