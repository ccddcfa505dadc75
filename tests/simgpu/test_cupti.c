/* test_cupti (consistency, simple physics): the CUPTI stand-in against what the simulated
 * device ran: record
 * counts, kernel names, device times inside the host window, correlation ids
 * equal to those of the launch callbacks, external correlation, driver launches,
 * NCCL kernels, delivery only after the op's modelled end (flushes while ops queued
 * behind a long kernel are timed ahead of the device clock), and the "CUPTI busy"
 * switch (run in a child process). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu.h"
#include "simgpu_check.h"

#define NLAUNCH 20
#define MAXREC 4096

static char k_a, k_b;
static uint32_t g_cb_corr[NLAUNCH * 2];
static int g_ncb;
static uint32_t g_drv_corr;

struct rec {
    CUpti_ActivityKind kind;
    char name[64];
    uint64_t start, end;
    uint64_t delivered; /* cuptiGetTimestamp in the buffer-completed callback */
    uint32_t corr, stream;
    uint64_t ext;
};
static struct rec g_rec[MAXREC];
static int g_nrec;
static size_t g_buffers;

static void CUPTIAPI
buf_req(uint8_t **buf, size_t *size, size_t *maxrec)
{
    *size = 4096; /* small: several buffers get filled */
    *buf = aligned_alloc(8, *size);
    *maxrec = 0;
}

static void CUPTIAPI
buf_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *r = NULL;
    uint64_t now = 0;
    CHECK(cuptiGetTimestamp(&now) == CUPTI_SUCCESS);
    g_buffers++;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS && g_nrec < MAXREC) {
        struct rec *o = &g_rec[g_nrec++];
        memset(o, 0, sizeof(*o));
        o->kind = r->kind;
        o->delivered = now;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
            snprintf(o->name, sizeof(o->name), "%s", k->name);
            o->start = k->start;
            o->end = k->end;
            o->corr = k->correlationId;
            o->stream = k->streamId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
            o->start = m->start;
            o->end = m->end;
            o->corr = m->correlationId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
                   r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
            o->start = a->start;
            o->end = a->end;
            o->corr = a->correlationId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            CUpti_ActivityExternalCorrelation *e = (CUpti_ActivityExternalCorrelation *)r;
            o->corr = e->correlationId;
            o->ext = e->externalId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            CUpti_ActivityDevice5 *v = (CUpti_ActivityDevice5 *)r;
            snprintf(o->name, sizeof(o->name), "%s", v->name ? v->name : "");
            o->corr = v->computeCapabilityMajor; /* the device's, checked below */
            o->stream = v->numMultiprocessors;
        }
    }
    free(buf);
}

static void CUPTIAPI
on_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
    const CUpti_CallbackData *d = data;
    if (d->callbackSite != CUPTI_API_ENTER)
        return;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API &&
        cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
        const cudaLaunchKernel_v7000_params *p = d->functionParams;
        CHECK(p && (p->func == &k_a || p->func == &k_b));
        CHECK(d->symbolName &&
              (!strcmp(d->symbolName, "kernel_a") || !strcmp(d->symbolName, "kernel_b")));
        if (g_ncb < NLAUNCH * 2)
            g_cb_corr[g_ncb++] = d->correlationId;
    }
    if (dom == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
        g_drv_corr = d->correlationId;
}

/* Four 40 ms kernels on s: the first is timed at its launch, the others by the stream's
 * worker ahead of the device clock; flushes (default and forced) right after the launches
 * and after 50 ms deliver no record before its op's end, as real CUPTI completes a
 * kernel's record only after the kernel ran.  After a synchronize, a flush delivers all
 * four, each no earlier than its end.  Every record of the run is checked the same way. */
static void
late_ops_case(cudaStream_t s)
{
    dim3 g1 = {4, 1, 1}, b1 = {128, 1, 1};
    int first = g_nrec, nk = 0;
    for (int i = 0; i < 4; i++) {
        simgpu_set_next_launch_duration(40000000);
        CHECK_CUDA(cudaLaunchKernel(&k_a, g1, b1, NULL, 0, s));
    }
    CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    usleep(50000);
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
    for (int i = first; i < g_nrec; i++)
        if (g_rec[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            g_rec[i].end - g_rec[i].start == 40000000)
            nk++;
    CHECK(nk == 4);
    for (int i = 0; i < g_nrec; i++) {
        const struct rec *r = &g_rec[i];
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            if (r->end > r->delivered)
                fprintf(stderr, "record %d (%s) delivered %.3f ms before its end\n", i, r->name,
                        (double)(r->end - r->delivered) / 1e6);
            CHECK(r->end <= r->delivered);
        }
    }
}

static int
busy_child(void)
{
    CUpti_SubscriberHandle sub;
    CHECK(cuptiSubscribe(&sub, on_api, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ==
          CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    return 0;
}

int
main(int argc, char **argv)
{
    CUpti_SubscriberHandle sub, sub2;
    cudaStream_t s;
    dim3 g1 = {4, 1, 1}, b1 = {128, 1, 1};
    uint64_t t0, t1, ext = 0;
    int nk = 0, nmemcpy = 0, nrt = 0, next = 0, ndev = 0, matched = 0, status;
    char *d;
    CUfunction f;
    ncclComm_t comm;
    ncclUniqueId id;
    pid_t pid;

    setenv("SIMGPU_PHYSICS", "simple", 1); /* a consistency test: the registered durations */
    if (argc > 1 && !strcmp(argv[1], "busy"))
        return busy_child();

    CHECK(simgpu_register_kernel(&k_a, "kernel_a", 200000) == 0);
    CHECK(simgpu_register_kernel(&k_b, "kernel_b", 100000) == 0);
    CHECK(simgpu_register_kernel_name("triton_jit_kernel", 300000) == 0);
    CHECK(cuptiSubscribe(&sub, on_api, NULL) == CUPTI_SUCCESS);
    CHECK(cuptiSubscribe(&sub2, on_api, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS);
    CHECK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                              CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
    CHECK(cuptiActivityRegisterCallbacks(buf_req, buf_done) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == CUPTI_SUCCESS);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE) == CUPTI_SUCCESS);

    CHECK(cuptiGetTimestamp(&t0) == CUPTI_SUCCESS);
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 4242) ==
          CUPTI_SUCCESS);
    for (int i = 0; i < NLAUNCH; i++) {
        CHECK_CUDA(cudaLaunchKernel(&k_a, g1, b1, NULL, 0, s));
        CHECK_CUDA(cudaLaunchKernel(&k_b, g1, b1, NULL, 0, 0));
    }
    CHECK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &ext) ==
          CUPTI_SUCCESS);
    CHECK(ext == 4242);
    CHECK_CUDA(cudaMalloc((void **)&d, 4096));
    CHECK_CUDA(cudaMemcpyAsync(d, &ext, sizeof(ext), cudaMemcpyHostToDevice, s));
    /* Driver launch, as JIT compilers do. */
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, NULL, "triton_jit_kernel") == CUDA_SUCCESS);
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, NULL, NULL) == CUDA_SUCCESS);
    /* A one-rank NCCL all-reduce is a kernel too. */
    CHECK(ncclGetUniqueId(&id) == ncclSuccess);
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
    CHECK(ncclAllReduce(d, d, 1024, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHECK_CUDA(cudaDeviceSynchronize());
    /* before the flush: a runtime call after it would stage a record that the delivery
     * thread hands over while the checks below read the records */
    struct cudaDeviceProp p;
    CHECK_CUDA(cudaGetDeviceProperties(&p, 0));
    CHECK(cuptiGetTimestamp(&t1) == CUPTI_SUCCESS);
    CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);

    CHECK(g_ncb == NLAUNCH * 2);
    CHECK(g_buffers >= 2);
    for (int i = 0; i < g_nrec; i++) {
        struct rec *r = &g_rec[i];
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            nk++;
            CHECK(r->start >= t0 && r->end <= t1 && r->start <= r->end);
            if (!strcmp(r->name, "kernel_a") || !strcmp(r->name, "kernel_b")) {
                uint64_t want = !strcmp(r->name, "kernel_a") ? 200000 : 100000;
                CHECK(r->end - r->start == want);
                for (int j = 0; j < g_ncb; j++)
                    if (g_cb_corr[j] == r->corr)
                        matched++;
            } else if (!strcmp(r->name, "triton_jit_kernel")) {
                CHECK(r->corr == g_drv_corr && r->end - r->start == 300000);
            } else {
                CHECK(!strcmp(r->name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
            }
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            nmemcpy++;
            CHECK(r->start >= t0 && r->end <= t1);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            nrt++;
            CHECK(r->start >= t0 && r->end <= t1);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            next++;
            CHECK(r->ext == 4242);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            /* one per device at the enable, cudaGetDeviceProperties' figures */
            ndev++;
            CHECK(!strncmp(r->name, p.name, sizeof(r->name) - 1));
            CHECK(r->corr == (uint32_t)p.major && r->stream == (uint32_t)p.multiProcessorCount);
        }
    }
    CHECK(ndev == 1);
    CHECK(nk == NLAUNCH * 2 + 2);
    CHECK(matched == NLAUNCH * 2);
    CHECK(nmemcpy == 1);
    CHECK(nrt >= NLAUNCH * 2 + 3);
    CHECK(next == NLAUNCH * 2);
    late_ops_case(s);
    CHECK(cuptiUnsubscribe(sub) == CUPTI_SUCCESS);

    /* Another tool holds CUPTI: subscribe and enable fail. */
    pid = fork();
    if (pid == 0) {
        setenv("SIMGPU_CUPTI_BUSY", "1", 1);
        execl("/proc/self/exe", argv[0], "busy", (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("test_cupti: ok (%d records, %zu buffers)\n", g_nrec, g_buffers);
    return 0;
}
