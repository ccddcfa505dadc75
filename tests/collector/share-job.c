/*
 * share-job: a CUPTI activity client that starts after the collector, as torch.profiler's
 * Kineto does, without torch: PRE kernel launches, then its own clock registered
 * (ticks = SHARE_RATE x CLOCK_MONOTONIC ns + SHARE_SHIFT, a TSC of its own), its buffer
 * callbacks, CONCURRENT_KERNEL enabled; N launches, a device synchronisation, the kind
 * disabled and a forced flush, as Kineto stops; then POST launches. Prints one line per
 * kernel record it got ("kernel CORR START_NS END_NS", its ticks converted back to ns) and
 * "records=N". Linked against simgpu's libcuda and libcupti.
 *
 * A mode (argv[1]) varies the client as the sharing's hard cases: "coarse", a clock that
 * steps every 64 us; "windows", the kind disabled after half the launches and enabled again
 * at once, without a flush (a second profiler window); "reregister", the callbacks
 * registered again from inside the first buffer-completed callback; "exit-on", the job
 * exits with the kind still enabled and nothing flushed, the client's state gone at exit
 * (as Kineto's static objects are destroyed): any callback after that says "late callback";
 * "small", buffers of 128 bytes, too small for a kernel record; "odd", buffers 3 bytes
 * past an 8-byte boundary; "replace", another clock (7 ticks a ns) registered first, then
 * replaced by the one the records are read with; "tight", buffers with room for 3 kernel
 * records and a few bytes (the 4th record goes to the next buffer), and a kind the
 * collector cannot copy (PC sampling) asked for twice: "share-job: unsupported=N" on
 * stderr says how often it was refused; "max2", buffers of at most 2 records
 * (maxNumRecords): "share-job: N records in a buffer" on stderr for one holding more;
 * "fork", the job forks after the launches, its child calling CUPTI as Kineto would
 * (enable, register, flush) and leaving with _exit: "share-job: child N" says how it ended.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>

#define PRE 5
#define N 20
#define POST 5
#define SHARE_RATE 2.5
#define SHARE_SHIFT 1000000000000.0
#define BUF_BYTES (64u << 10)

static uint8_t *bufs[64];
static size_t valids[64];
static int nbufs, asked;
static const char *mode = "";
static volatile int gone; /* exit-on: the client's state is destroyed */

static uint64_t CUPTIAPI
ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double ns = (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    if (strcmp(mode, "coarse") == 0)
        ns -= (double)((uint64_t)ns % 64000u);
    return (uint64_t)(ns * SHARE_RATE + SHARE_SHIFT);
}

static uint64_t CUPTIAPI
other_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) * 7;
}

static void
late(void)
{
    static const char msg[] = "share-job: late callback\n";
    if (gone && write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
}

static void
destroy(void)
{
    gone = 1;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid);

static void CUPTIAPI
requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    late();
    size_t skew = strcmp(mode, "odd") == 0 ? 3 : 0;
    uint8_t *b = asked < 64 ? aligned_alloc(8, BUF_BYTES) : NULL;
    *buffer = b ? b + skew : NULL;
    size_t bytes = BUF_BYTES - skew;
    if (strcmp(mode, "small") == 0)
        bytes = 128;
    else if (strcmp(mode, "tight") == 0)
        bytes = 3 * ((sizeof(CUpti_ActivityKernel10) + 7) & ~(size_t)7) + 5;
    *size = b ? bytes : 0;
    *max_records = strcmp(mode, "max2") == 0 ? 2 : 0;
    asked++;
}

static void CUPTIAPI
completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    late();
    if (strcmp(mode, "reregister") == 0 && nbufs == 0 &&
        cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS)
        fprintf(stderr, "share-job: registering again failed\n");
    if (nbufs < 64) {
        bufs[nbufs] = buffer;
        valids[nbufs++] = valid;
    }
}

static int
launch(CUfunction f, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += cuLaunchKernel(f, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS;
    return ok;
}

int
main(int argc, char **argv)
{
    CUcontext ctx;
    CUfunction f;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, NULL, "share_job_kernel") != CUDA_SUCCESS) {
        fprintf(stderr, "share-job: no driver\n");
        return 1;
    }
    mode = argc > 1 ? argv[1] : "";
    int ok = launch(f, PRE);
    if (strcmp(mode, "replace") == 0 && cuptiActivityRegisterTimestampCallback(other_ticks))
        fprintf(stderr, "share-job: the first clock refused\n");
    if (cuptiActivityRegisterTimestampCallback(ticks) != CUPTI_SUCCESS ||
        cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "share-job: CUPTI refused the client\n");
        return 1;
    }
    if (strcmp(mode, "tight") == 0) {
        int refused = 0;
        for (int i = 0; i < 2; i++)
            refused +=
                cuptiActivityEnable(CUPTI_ACTIVITY_KIND_PC_SAMPLING) == CUPTI_ERROR_NOT_SUPPORTED;
        fprintf(stderr, "share-job: unsupported=%d\n", refused);
    }
    if (strcmp(mode, "exit-on") == 0) {
        atexit(destroy);
        ok += launch(f, N) + launch(f, POST);
        cuCtxSynchronize(); /* the records pending in CUPTI, not on the device */
        printf("records=0\n");
        return ok == PRE + N + POST ? 0 : 1;
    }
    if (strcmp(mode, "windows") == 0) {
        ok += launch(f, N / 2);
        if (cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
            fprintf(stderr, "share-job: a second window refused\n");
        ok += launch(f, N - N / 2);
    } else {
        ok += launch(f, N);
    }
    cuCtxSynchronize();
    if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            int rc = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS;
            rc |= cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS;
            rc |= cuptiActivityFlushAll(0) != CUPTI_SUCCESS;
            _exit(rc);
        }
        int status = -1;
        if (pid > 0)
            waitpid(pid, &status, 0);
        fprintf(stderr, "share-job: child %d\n", status);
    }
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    int records = 0;
    for (int b = 0; b < nbufs; b++) {
        CUpti_Activity *rec = NULL;
        int in_buffer = 0;
        while (cuptiActivityGetNextRecord(bufs[b], valids[b], &rec) == CUPTI_SUCCESS) {
            records++;
            if (++in_buffer == 3 && strcmp(mode, "max2") == 0)
                fprintf(stderr, "share-job: %d records in a buffer\n", in_buffer);
            if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                continue;
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            printf("kernel %u %.0f %.0f\n", k->correlationId,
                   ((double)k->start - SHARE_SHIFT) / SHARE_RATE,
                   ((double)k->end - SHARE_SHIFT) / SHARE_RATE);
        }
    }
    ok += launch(f, POST);
    cuCtxSynchronize();
    printf("records=%d\n", records);
    return ok == PRE + N + POST ? 0 : 1;
}
