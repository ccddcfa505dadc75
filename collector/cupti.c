/*
 * cupti.c: device-side timing through CUPTI activity, and the link from each device record
 * to the host call that caused it.
 *
 * libcupti is loaded with dlopen when the process first records (never linked: a job
 * without CUPTI must run unchanged). Activity kinds: CONCURRENT_KERNEL (never KERNEL,
 * which serialises kernels), MEMCPY, MEMSET, SYNCHRONIZATION, DEVICE.
 *
 * Correlation. We subscribe to the CUPTI callback API and enable callbacks only for the
 * runtime/driver calls that start device work or wait for it (launches, copies, memsets,
 * graph launches, synchronisation). At API entry CUPTI hands the callback the correlation
 * id it will also put into the activity records of the work the call enqueues; the
 * callback stores the first id seen inside an armed hook in the thread's state, and the
 * hook writes it as the host event's correlation. So host event and device records carry
 * the same id with no table to keep, whatever order CUPTI delivers its buffers in; calls
 * NCCL makes internally (its kernel launches) give their id to the NCCL call around them.
 * Launches that bypass our hooks (libraries with a static runtime, cuBLAS and cuDNN among
 * them, reach the driver through function tables, not through the exported cuLaunchKernel)
 * still pass the driver callback: with no hook armed around them, the callback records
 * the launch itself (start at API entry, end, result and parameters at exit), so every
 * kernel CUPTI reports has a host launch to link to.
 *
 * A subscriber also tells whether another tool (nsys, torch.profiler) holds CUPTI:
 * cuptiSubscribe then fails with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; we say so
 * once, write cupti=busy into the trace and keep the host-side record. A tool that starts
 * after us (torch.profiler: Kineto registers its activity buffers at the profiler's start)
 * shares CUPTI with us (cupti_share.c): we stay CUPTI's one activity client and hand it
 * copies of the records of the kinds it enabled, on its clock. With DPRO_CUPTI_SHARE=0 (or
 * when sharing cannot start) it takes the device records instead: we interpose
 * cuptiActivityRegisterCallbacks, pass the call on, say so once, write cupti=taken and the
 * time into the trace and keep the host-side record, whose correlation ids are the ones
 * the other tool's device records carry (our callback subscription stays).
 *
 * Clock. If CUPTI accepts a timestamp callback we hand it CLOCK_MONOTONIC, so device
 * stamps are on the host clock as they come. Otherwise the offset between cuptiGetTimestamp
 * and CLOCK_MONOTONIC is measured at start (applied to every record) and at the end; both
 * land in meta (cupti_clock_offset_start_ns / _end_ns).
 *
 * Buffers completed by CUPTI are queued (a mutex: this is CUPTI's thread, not the job's
 * hot path) and converted by the background thread. No cuptiFinalize, ever.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti.h> /* with generated_cuda_meta.h: the driver calls' parameter structs */

#include "cupti_share.h"
#include "internal.h"

/* CUPTI entry points we use. */
static struct {
    void *lib;
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*activity_enable)(CUpti_ActivityKind);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*get_timestamp)(uint64_t *);
    CUptiResult (*get_version)(uint32_t *);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
} cupti_api;

static const char *cupti_status = "off"; /* enabled, busy, missing, off; taken at the end */
static char cupti_error[160];
static int cupti_active;         /* activity is on: flush and drain */
static int cupti_clock_callback; /* CUPTI stamps with our clock */
static int64_t cupti_offset_start, cupti_offset_end;
static uint32_t cupti_version_value;
static CUpti_SubscriberHandle cupti_subscriber;

/* Completed buffers waiting for the background thread. */
struct cupti_buffer {
    struct cupti_buffer *next;
    uint8_t *data;
    size_t valid;
};
static pthread_mutex_t cupti_queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cupti_buffer *cupti_queue_head, *cupti_queue_tail;
static uint64_t cupti_dropped_records; /* under cupti_queue_lock */
static uint32_t cupti_queued;          /* under cupti_queue_lock: buffers in the queue */

#define CUPTI_BUFFER_BYTES (1u << 20)

/* Completed buffers held at most (64 MiB) until the writer drains them: a writer that
 * cannot start, or one stuck on a slow filesystem, must not let them grow with the job;
 * past it a buffer's records are dropped and counted. DPRO_TEST_CUPTI_QUEUE_MAX (testing
 * only) lowers it. */
#define CUPTI_QUEUE_MAX 64

/* ---- callbacks from CUPTI ---------------------------------------------------------------- */

static uint64_t CUPTIAPI
cupti_timestamp(void)
{
    return coll_now();
}

/* Records a driver launch that no hook of ours saw (called at API exit). */
static void
cupti_record_launch(struct coll_thread *t, CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
    struct coll_rec rec;
    memset(&rec, 0, sizeof rec);
    int ptsz = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
               cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz;
    rec.flags = COLL_REC_CUFUNC | (ptsz ? COLL_REC_PTSZ : 0);
    rec.start = t->cb_start;
    rec.end = coll_stamp();
    rec.corr = cb->correlationId;
    rec.result = cb->functionReturnValue ? *(const int32_t *)cb->functionReturnValue : 0;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
        cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
        cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel) {
        const cuLaunchKernel_params *p = cb->functionParams;
        rec.api = ptsz ? COLL_API_cuLaunchKernel_ptsz : COLL_API_cuLaunchKernel;
        if (p) {
            rec.a0 = (uint64_t)(uintptr_t)p->f;
            rec.a1 = (uint64_t)p->gridDimX | ((uint64_t)p->gridDimY << 32);
            rec.a2 = (uint64_t)p->gridDimZ | ((uint64_t)p->blockDimX << 32);
            rec.a3 = (uint64_t)p->blockDimY | ((uint64_t)p->blockDimZ << 32);
            rec.u0 = p->sharedMemBytes;
            rec.stream = coll_stream_id_known(t, p->hStream, ptsz);
        }
    } else {
        const cuLaunchKernelEx_params *p = cb->functionParams;
        rec.api = ptsz ? COLL_API_cuLaunchKernelEx_ptsz : COLL_API_cuLaunchKernelEx;
        if (p) {
            rec.a0 = (uint64_t)(uintptr_t)p->f;
            if (p->config) {
                const CUlaunchConfig *c = p->config;
                rec.a1 = (uint64_t)c->gridDimX | ((uint64_t)c->gridDimY << 32);
                rec.a2 = (uint64_t)c->gridDimZ | ((uint64_t)c->blockDimX << 32);
                rec.a3 = (uint64_t)c->blockDimY | ((uint64_t)c->blockDimZ << 32);
                rec.u0 = c->sharedMemBytes;
                rec.stream = coll_stream_id_known(t, c->hStream, ptsz);
            }
        }
    }
    /* the name CUPTI gives the launch, the first time its handle is seen */
    const char *name =
        rec.a0 && coll_func_first_sight((const void *)(uintptr_t)rec.a0) ? cb->symbolName : NULL;
    coll_rec_emit_named(t, &rec, name);
}

static void CUPTIAPI
cupti_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
               const void *cbdata)
{
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
        cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        /* The context goes (the CUDA runtime's teardown at exit runs before our exit
         * handler): take its records now; the writer drains them at the end. */
        if (cupti_active)
            cupti_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return;
    const CUpti_CallbackData *cb = cbdata;
    struct coll_thread *t = coll_tls;
    if (cb == NULL)
        return;
    if (cb->callbackSite == CUPTI_API_ENTER)
        cupti_share_saw(cb->correlationId);
    if (t && t->corr_armed) {
        /* A hook of ours is around this call: hand it the correlation id. */
        if (t->corr_cupti == 0 && cb->callbackSite == CUPTI_API_ENTER)
            t->corr_cupti = cb->correlationId;
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !coll_cfg.cuda ||
        !atomic_load_explicit(&coll_recording, memory_order_relaxed))
        return;
    if (cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel &&
        cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz &&
        cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx &&
        cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz &&
        cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel)
        return;
    /* A launch no hook saw (a library's own runtime calling the driver). */
    if (t == NULL) {
        t = coll_thread_first();
        if (t == NULL)
            return;
        coll_leave(t);
    }
    if (cb->callbackSite == CUPTI_API_ENTER)
        t->cb_start = coll_stamp();
    else
        cupti_record_launch(t, cbid, cb);
}

static void CUPTIAPI
cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, 8, CUPTI_BUFFER_BYTES) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? CUPTI_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI
cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    size_t dropped = 0;
    if (cupti_api.dropped && cupti_api.dropped(ctx, stream, &dropped) != CUPTI_SUCCESS)
        dropped = 0;
    cupti_share_deliver(ctx, stream, buffer, valid, cupti_api.next_record);
    uint32_t most = coll_test_cupti_queue_max ? coll_test_cupti_queue_max : CUPTI_QUEUE_MAX;
    pthread_mutex_lock(&cupti_queue_lock);
    int full = cupti_queued >= most;
    cupti_queued += !full && valid;
    pthread_mutex_unlock(&cupti_queue_lock);
    struct cupti_buffer *b = valid && !full ? malloc(sizeof *b) : NULL;
    if (b == NULL) {
        CUpti_Activity *rec = NULL;
        while (valid && cupti_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS)
            dropped++; /* not kept: counted */
        free(buffer);
        buffer = NULL;
    } else {
        b->next = NULL;
        b->data = buffer;
        b->valid = valid;
    }
    pthread_mutex_lock(&cupti_queue_lock);
    cupti_queued -= b == NULL && valid && !full;
    cupti_dropped_records += dropped;
    if (b) {
        if (cupti_queue_tail)
            cupti_queue_tail->next = b;
        else
            cupti_queue_head = b;
        cupti_queue_tail = b;
    }
    pthread_mutex_unlock(&cupti_queue_lock);
}

/* ---- start -------------------------------------------------------------------------------- */

/* Returns CUPTI's text for rc. */
static const char *
cupti_strerror(CUptiResult rc)
{
    const char *s = NULL;
    if (cupti_api.result_string == NULL || cupti_api.result_string(rc, &s) != CUPTI_SUCCESS ||
        s == NULL)
        return "unknown CUPTI error";
    return s;
}

/* Measures cuptiGetTimestamp - CLOCK_MONOTONIC (ns to add to CUPTI stamps). */
static int64_t
cupti_measure_offset(void)
{
    uint64_t best_gap = UINT64_MAX;
    int64_t offset = 0;
    if (cupti_api.get_timestamp == NULL)
        return 0;
    for (int i = 0; i < 5; i++) {
        uint64_t c = 0, m0 = coll_now();
        if (cupti_api.get_timestamp(&c) != CUPTI_SUCCESS)
            return 0;
        uint64_t m1 = coll_now();
        if (m1 - m0 < best_gap) {
            best_gap = m1 - m0;
            offset = (int64_t)(m0 + (m1 - m0) / 2) - (int64_t)c;
        }
    }
    return offset;
}

/* Opens libcupti: the one the job has loaded, DPRO_CUPTI_LIB, the one next to the job's
 * libcudart (toolkit layout: lib64/ or extras/CUPTI/lib64/), then the usual sonames. */
static void *
cupti_open(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    static void *slot;
    for (size_t i = 0; i < 3; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return h;
    }
    const char *path = getenv("DPRO_CUPTI_LIB");
    if (path && *path) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    void *rt = coll_real(COLL_LIB_CUDART, "cudaGetDevice", &slot);
    Dl_info info;
    if (rt && dladdr(rt, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char dir[4096], lib[4096 + 64];
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        *strrchr(dir, '/') = '\0';
        static const char *const rel[] = {"", "/../extras/CUPTI/lib64"};
        for (size_t r = 0; r < 2; r++)
            for (size_t i = 0; i < 3; i++) {
                int n = snprintf(lib, sizeof lib, "%s%s/%s", dir, rel[r], names[i]);
                if (n <= 0 || (size_t)n >= sizeof lib)
                    continue;
                void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
                if (h)
                    return h;
            }
    }
    for (size_t i = 0; i < 3; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

/* The runtime and driver calls whose correlation id we catch. */
static const CUpti_CallbackId cupti_runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
};
static const CUpti_CallbackId cupti_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
};

/* Enables the correlation callbacks; 0 on success. */
static int
cupti_enable_callbacks(void)
{
    int ok = cupti_api.enable_callback != NULL;
    for (size_t i = 0; ok && i < sizeof cupti_runtime_cbids / sizeof cupti_runtime_cbids[0]; i++)
        ok = cupti_api.enable_callback(1, cupti_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                       cupti_runtime_cbids[i]) == CUPTI_SUCCESS;
    for (size_t i = 0; ok && i < sizeof cupti_driver_cbids / sizeof cupti_driver_cbids[0]; i++)
        ok = cupti_api.enable_callback(1, cupti_subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                       cupti_driver_cbids[i]) == CUPTI_SUCCESS;
    if (ok)
        return 0;
    /* A CUPTI without per-call enabling: take the whole domains. */
    if (cupti_api.enable_domain &&
        cupti_api.enable_domain(1, cupti_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) ==
            CUPTI_SUCCESS &&
        cupti_api.enable_domain(1, cupti_subscriber, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS)
        return 0;
    return -1;
}

#define CUPTI_SYM(field, name) *(void **)&cupti_api.field = dlsym(cupti_api.lib, name)

/* Does a libcupti of API version v hand over the record layouts the collector was compiled
 * for (CUpti_ActivityKernel10, Memcpy6, ...)? The same release series at the same or a
 * later version: a later one of the series keeps the layouts; an older one (CUDA 12's
 * CUPTI numbers its versions 18..24) has other record versions. 0: unknown. */
static int
cupti_version_ok(uint32_t v)
{
    return v >= CUPTI_API_VERSION && v / 10000 == CUPTI_API_VERSION / 10000;
}

void
cupti_start(void)
{
    cupti_api.lib = cupti_open();
    if (cupti_api.lib == NULL) {
        cupti_status = "missing";
        return;
    }
    CUPTI_SYM(subscribe, "cuptiSubscribe");
    CUPTI_SYM(enable_callback, "cuptiEnableCallback");
    CUPTI_SYM(enable_domain, "cuptiEnableDomain");
    CUPTI_SYM(activity_enable, "cuptiActivityEnable");
    CUPTI_SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    CUPTI_SYM(register_timestamp, "cuptiActivityRegisterTimestampCallback");
    CUPTI_SYM(next_record, "cuptiActivityGetNextRecord");
    CUPTI_SYM(flush_all, "cuptiActivityFlushAll");
    CUPTI_SYM(get_timestamp, "cuptiGetTimestamp");
    CUPTI_SYM(get_version, "cuptiGetVersion");
    CUPTI_SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    CUPTI_SYM(result_string, "cuptiGetResultString");
    if (!cupti_api.subscribe || !cupti_api.activity_enable || !cupti_api.register_callbacks ||
        !cupti_api.next_record || !cupti_api.flush_all) {
        cupti_status = "missing";
        snprintf(cupti_error, sizeof cupti_error, "libcupti lacks the activity API");
        return;
    }
    if (cupti_api.get_version)
        cupti_api.get_version(&cupti_version_value);
    if (!cupti_version_ok(cupti_version_value)) {
        cupti_status = "version";
        snprintf(cupti_error, sizeof cupti_error,
                 "libcupti API version %u, the collector reads the records of version %u",
                 (unsigned)cupti_version_value, (unsigned)CUPTI_API_VERSION);
        coll_warn("libcupti's API version is %u, the collector was built for %u (its "
                  "activity record layouts differ): recording host-side events only",
                  (unsigned)cupti_version_value, (unsigned)CUPTI_API_VERSION);
        return;
    }
    CUptiResult rc = cupti_api.subscribe(&cupti_subscriber, cupti_callback, NULL);
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        cupti_status = "busy";
        coll_warn("CUPTI is taken by another tool (nsys, torch.profiler?): recording "
                  "host-side events only");
        return;
    }
    if (rc != CUPTI_SUCCESS) {
        cupti_status = "missing";
        snprintf(cupti_error, sizeof cupti_error, "cuptiSubscribe: %s", cupti_strerror(rc));
        return;
    }
    if (cupti_enable_callbacks() != 0)
        snprintf(cupti_error, sizeof cupti_error, "correlation callbacks unavailable");
    if (cupti_api.enable_callback)
        cupti_api.enable_callback(1, cupti_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                  CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    if (cupti_api.register_timestamp &&
        cupti_api.register_timestamp(cupti_timestamp) == CUPTI_SUCCESS)
        cupti_clock_callback = 1;
    rc = cupti_api.register_callbacks(cupti_buffer_requested, cupti_buffer_completed);
    if (rc == CUPTI_SUCCESS)
        rc = cupti_api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (rc != CUPTI_SUCCESS) {
        cupti_status = "busy";
        snprintf(cupti_error, sizeof cupti_error, "activity: %s", cupti_strerror(rc));
        coll_warn("CUPTI activity unavailable (%s): recording host-side events only",
                  cupti_strerror(rc));
        return;
    }
    static const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        CUPTI_ACTIVITY_KIND_DEVICE};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (i == 0 || cupti_api.activity_enable(kinds[i]) == CUPTI_SUCCESS)
            cupti_share_own(kinds[i]);
    cupti_offset_start = cupti_clock_callback ? 0 : cupti_measure_offset();
    cupti_share_init(cupti_api.lib, cupti_clock_callback, cupti_offset_start);
    cupti_active = 1;
    cupti_status = "enabled";
}

/* cupti=taken: when, on CLOCK_MONOTONIC (0: not taken). */
static _Atomic uint64_t cupti_taken_ns;

COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted);
COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    typedef CUptiResult (*real_fn)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc);
    static real_fn next;
    real_fn real = cupti_api.register_callbacks;
    if (real == NULL) {
        if (next == NULL)
            next = (real_fn)dlsym(RTLD_NEXT, "cuptiActivityRegisterCallbacks");
        real = next;
    }
    if (real == NULL)
        return CUPTI_ERROR_NOT_INITIALIZED;
    int saved = errno;
    if (cupti_active && funcBufferRequested != cupti_buffer_requested &&
        cupti_share_register(funcBufferRequested, funcBufferCompleted) == CUPTI_SUCCESS) {
        errno = saved;
        return CUPTI_SUCCESS;
    }
    CUptiResult rc = real(funcBufferRequested, funcBufferCompleted);
    uint64_t expected = 0;
    if (rc == CUPTI_SUCCESS && cupti_active && funcBufferRequested != cupti_buffer_requested &&
        atomic_compare_exchange_strong(&cupti_taken_ns, &expected, coll_now())) {
        coll_warn("CUPTI's device records are taken by another tool (torch.profiler?) from "
                  "now on: recording host-side events only");
    } /* cupti=taken goes into the trace at the end (cupti_write_meta) */
    errno = saved;
    return rc;
}

void
cupti_flush(int forced)
{
    if (cupti_active)
        cupti_api.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void
cupti_forget_after_fork(void)
{
    pthread_mutex_init(&cupti_queue_lock, NULL);
    cupti_queue_head = cupti_queue_tail = NULL;
    cupti_dropped_records = 0;
    cupti_queued = 0;
    cupti_active = 0;
    cupti_share_forget();
    cupti_status = "off";
    snprintf(cupti_error, sizeof cupti_error, "not available after fork");
}

void
cupti_write_meta(dpro_writer *w, int at_end)
{
    if (at_end) {
        uint64_t taken = atomic_load(&cupti_taken_ns);
        if (taken) {
            dpro_writer_set_meta(w, "cupti", "taken");
            dpro_writer_set_meta_int(w, "cupti_taken_ns", (int64_t)taken);
        }
        cupti_share_write_meta(w, 1);
        if (cupti_active && !cupti_clock_callback) {
            cupti_offset_end = cupti_measure_offset();
            dpro_writer_set_meta_int(w, "cupti_clock_offset_end_ns", cupti_offset_end);
        }
        return;
    }
    dpro_writer_set_meta(w, "cupti", cupti_status);
    cupti_share_write_meta(w, 0);
    if (cupti_version_value)
        dpro_writer_set_meta_int(w, "cupti_version", cupti_version_value);
    if (cupti_error[0])
        dpro_writer_set_meta(w, "cupti_error", cupti_error);
    if (cupti_active) {
        dpro_writer_set_meta(w, "cupti_clock", cupti_clock_callback ? "callback" : "offset");
        dpro_writer_set_meta_int(w, "cupti_clock_offset_start_ns", cupti_offset_start);
    }
}

/* ---- conversion ----------------------------------------------------------------------------- */

/* CUPTI memcpy kind -> dpro_copy_kind. */
static uint32_t
cupti_copy_kind(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
        return DPRO_COPY_H2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
        return DPRO_COPY_D2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
        return DPRO_COPY_D2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return DPRO_COPY_H2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return DPRO_COPY_P2P;
    default:
        return DPRO_COPY_DEFAULT;
    }
}

static inline uint64_t
cupti_ts(uint64_t t)
{
    return t ? (uint64_t)((int64_t)t + cupti_offset_start) : 0;
}

/* A kernel name a CUPTI record pointed to: our copy of its text and its string id. */
struct cupti_kname {
    uint32_t id;
    char text[];
};

/* Returns the string id of a kernel record's name (0 when none). CUPTI shares one string
 * among the records of a kernel, so the id is kept by the string's address and the text
 * compared with our copy (a string freed with its module may come back at that address
 * with another name): a compare, instead of interning (strlen, FNV-1a byte by byte over a
 * C++ name of some 200 bytes, then a compare) for each of the thousands of kernels a
 * second. */
static uint32_t
cupti_kernel_name(dpro_writer *w, const char *name)
{
    if (name == NULL || *name == '\0')
        return 0;
    uint64_t *v = coll_umap_find(&coll_bg.knames, (uint64_t)(uintptr_t)name, 1);
    struct cupti_kname *k = v ? (struct cupti_kname *)(uintptr_t)*v : NULL;
    if (k && strcmp(k->text, name) == 0)
        return k->id;
    uint32_t id = coll_intern(w, name);
    if (v == NULL || id == 0)
        return id;
    size_t len = strlen(name);
    struct cupti_kname *n = realloc(k, sizeof *n + len + 1);
    if (n == NULL) {
        free(k);
        *v = 0;
        return id;
    }
    n->id = id;
    memcpy(n->text, name, len + 1);
    *v = (uint64_t)(uintptr_t)n;
    return id;
}

void
cupti_names_free(void)
{
    for (size_t i = 0; i < coll_bg.knames.cap; i++)
        if (coll_bg.knames.keys[i])
            free((void *)(uintptr_t)coll_bg.knames.vals[i]);
    coll_umap_free(&coll_bg.knames);
}

/* Writes the row of a device record. */
static void
cupti_add_device(dpro_writer *w, const CUpti_ActivityDevice5 *d)
{
    dpro_device_info info = {.id = d->id,
                             .name = d->name,
                             .sm_count = d->numMultiprocessors,
                             .total_memory = d->globalMemorySize,
                             .clock_khz = d->coreClockRate,
                             .cc_major = d->computeCapabilityMajor,
                             .cc_minor = d->computeCapabilityMinor};
    dpro_writer_add_device(w, &info);
}

/* Converts one activity record. */
static void
cupti_convert(dpro_writer *w, const CUpti_Activity *a)
{
    if (a->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
        cupti_add_device(w, (const CUpti_ActivityDevice5 *)a);
        return;
    }
    /* filled in place in the writer's batch; a kind not converted leaves it unkept */
    dpro_event *ev = coll_event_next(w);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
        ev->kind = DPRO_KIND_KERNEL;
        ev->start_ns = cupti_ts(k->start);
        ev->end_ns = cupti_ts(k->end);
        ev->name = cupti_kernel_name(w, k->name);
        ev->device = k->deviceId;
        ev->stream = k->streamId;
        ev->correlation = k->correlationId;
        ev->grid[0] = (uint32_t)k->gridX;
        ev->grid[1] = (uint32_t)k->gridY;
        ev->grid[2] = (uint32_t)k->gridZ;
        ev->block[0] = (uint32_t)k->blockX;
        ev->block[1] = (uint32_t)k->blockY;
        ev->block[2] = (uint32_t)k->blockZ;
        ev->shared_mem = (uint32_t)(k->staticSharedMemory + k->dynamicSharedMemory);
        ev->object = k->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
        ev->kind = DPRO_KIND_MEMCPY;
        ev->subkind = cupti_copy_kind(m->copyKind);
        ev->start_ns = cupti_ts(m->start);
        ev->end_ns = cupti_ts(m->end);
        ev->device = m->deviceId;
        ev->stream = m->streamId;
        ev->correlation = m->correlationId;
        ev->bytes = m->bytes;
        ev->object = m->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
        ev->kind = DPRO_KIND_MEMSET;
        ev->start_ns = cupti_ts(m->start);
        ev->end_ns = cupti_ts(m->end);
        ev->device = m->deviceId;
        ev->stream = m->streamId;
        ev->correlation = m->correlationId;
        ev->bytes = m->bytes;
        ev->object = m->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)a;
        ev->kind = DPRO_KIND_SYNC;
        ev->subkind = (uint32_t)s->type;
        ev->start_ns = cupti_ts(s->start);
        ev->end_ns = cupti_ts(s->end);
        ev->stream = s->streamId == (uint32_t)CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->streamId;
        ev->correlation = s->correlationId;
        ev->object =
            s->cudaEventId == (uint32_t)CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->cudaEventId;
        break;
    }
    default:
        return;
    }
    coll_event_keep(w, ev);
}

void
cupti_drain(dpro_writer *w)
{
    pthread_mutex_lock(&cupti_queue_lock);
    struct cupti_buffer *b = cupti_queue_head;
    cupti_queue_head = cupti_queue_tail = NULL;
    cupti_queued = 0;
    uint64_t dropped = cupti_dropped_records;
    cupti_dropped_records = 0;
    pthread_mutex_unlock(&cupti_queue_lock);
    if (dropped && w)
        dpro_writer_add_drops(w, 0, "cupti", dropped);
    while (b) {
        struct cupti_buffer *next = b->next;
        CUpti_Activity *rec = NULL;
        while (w && cupti_api.next_record(b->data, b->valid, &rec) == CUPTI_SUCCESS)
            cupti_convert(w, rec);
        free(b->data);
        free(b);
        b = next;
    }
}
