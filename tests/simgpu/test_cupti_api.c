/* test_cupti_api: the parts of the CUPTI stand-in's activity API that Kineto uses beyond
 * what test_cupti covers: per-API record switches (cuptiActivityEnableRuntimeApi) with the
 * RUNTIME kind on and off, the client's timestamp callback (records in its clock), activity
 * attributes, callback names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define CHECK_CUPTI(call) CHECK((call) == CUPTI_SUCCESS)
#define MAXREC 1024

static uint32_t g_cbid[MAXREC];
static uint64_t g_start[MAXREC];
static int g_nrec;

static void CUPTIAPI
buf_req(uint8_t **buf, size_t *size, size_t *maxrec)
{
    *size = 1 << 16;
    *buf = aligned_alloc(8, *size);
    *maxrec = 0;
}

static void CUPTIAPI
buf_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS && g_nrec < MAXREC) {
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
            g_cbid[g_nrec] = a->cbid;
            g_start[g_nrec++] = a->start;
        }
    }
    free(buf);
}

static int
count(uint32_t cbid)
{
    int n = 0;
    for (int i = 0; i < g_nrec; i++)
        n += g_cbid[i] == cbid;
    return n;
}

/* The client's clock: nanoseconds (CUPTI's contract for the callback) from an origin 7 s
 * before CLOCK_MONOTONIC's, so records in CUPTI's own clock would fall outside [u0, u1]. */
static uint64_t
client_clock(void)
{
    return simgpu_now_ns() + 7000000000ULL;
}

static void
malloc_free(void)
{
    void *p;
    CHECK_CUDA(cudaMalloc(&p, 4096));
    CHECK_CUDA(cudaFree(p));
}

int
main(void)
{
    const char *name = NULL;
    size_t v = 0, sz = sizeof(v);
    uint8_t small = 0;
    uint64_t u0, u1;
    int i;
    setenv("SIMGPU_PHYSICS", "simple", 1);

    /* callback names from the cbid headers */
    CHECK_CUPTI(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &name));
    CHECK(strcmp(name, "cudaLaunchKernel") == 0);
    CHECK_CUPTI(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API,
                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &name));
    CHECK(strcmp(name, "cuLaunchKernel") == 0);
    CHECK(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, 100000, &name) ==
          CUPTI_ERROR_INVALID_PARAMETER);

    /* attributes: defaults, set, get back, sizes */
    CHECK_CUPTI(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
    CHECK(v == (size_t)3 << 20);
    v = (size_t)8 << 20;
    CHECK_CUPTI(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
    v = 0;
    CHECK_CUPTI(cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
    CHECK(v == (size_t)8 << 20);
    sz = 1;
    CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v) ==
          CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT);
    CHECK_CUPTI(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &small));
    CHECK_CUPTI(cuptiActivityEnableCudaEventDeviceTimestamps(1));

    CHECK_CUPTI(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    /* the kind on, one API off */
    CHECK_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CHECK_CUPTI(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 0));
    malloc_free();
    CHECK_CUPTI(cuptiActivityFlushAll(1));
    CHECK(count(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) == 0);
    CHECK(count(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) == 1);
    /* the kind off, one API on */
    CHECK_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CHECK_CUPTI(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1));
    CHECK_CUPTI(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 0));
    g_nrec = 0;
    malloc_free();
    CHECK_CUPTI(cuptiActivityFlushAll(1));
    CHECK(count(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) == 1);
    CHECK(count(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) == 0);
    CHECK(cuptiActivityEnableRuntimeApi(0, 1) == CUPTI_ERROR_INVALID_PARAMETER);

    /* records in the client's clock */
    CHECK_CUPTI(cuptiActivityRegisterTimestampCallback(client_clock));
    g_nrec = 0;
    u0 = client_clock();
    malloc_free();
    u1 = client_clock();
    CHECK_CUPTI(cuptiActivityFlushAll(1));
    CHECK(g_nrec == 1);
    for (i = 0; i < g_nrec; i++) {
        printf("record %u start %llu, client clock [%llu, %llu]\n", g_cbid[i],
               (unsigned long long)g_start[i], (unsigned long long)u0, (unsigned long long)u1);
        CHECK(g_start[i] + 2000 >= u0 && g_start[i] <= u1 + 2000);
    }
    printf("test_cupti_api: ok\n");
    return 0;
}
