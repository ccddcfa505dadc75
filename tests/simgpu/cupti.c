/* cupti.c: libcupti.so.13 of the simulated device, a thin front end over
 * cupti_core.c.  Supported: activity enable/disable for KERNEL,
 * CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, SYNCHRONIZATION, MEMORY2,
 * EXTERNAL_CORRELATION, DEVICE (other kinds answer CUPTI_ERROR_NOT_COMPATIBLE); buffer
 * callbacks, flush, dropped counts, timestamps (CLOCK_MONOTONIC ns), external
 * correlation, one subscriber with runtime/driver API callbacks.  With
 * SIMGPU_CUPTI_BUSY=1 subscribe and activity enable fail with
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as when another tool (nsys,
 * torch.profiler) holds CUPTI.
 *
 * Contract of every exported cupti* function: the CUPTI documentation.
 */
#include <stdlib.h>
#include <string.h>

#include "simgpu_internal.h"

CUptiResult CUPTIAPI
cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* SIMGPU_CUPTI_VERSION: another CUPTI's version (e.g. 24, CUDA 12.8's), for tests of
     * what a tool built for this one does with it. */
    *version = (uint32_t)simgpu_env_whole("SIMGPU_CUPTI_VERSION", 0, UINT32_MAX, CUPTI_API_VERSION);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *timestamp = simgpu_cupti_ts(simgpu_now_ns()); /* the client's clock when it gave one */
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityEnable(CUpti_ActivityKind kind)
{
    return simgpu_cupti_activity_enable(kind, 1);
}

CUptiResult CUPTIAPI
cuptiActivityDisable(CUpti_ActivityKind kind)
{
    return simgpu_cupti_activity_enable(kind, 0);
}

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    return simgpu_cupti_register(funcBufferRequested, funcBufferCompleted);
}

CUptiResult CUPTIAPI
cuptiActivityFlushAll(uint32_t flag)
{
    return simgpu_cupti_flush(flag);
}

CUptiResult CUPTIAPI
cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
    return simgpu_cupti_flush(flag);
}

CUptiResult CUPTIAPI
cuptiActivityFlushPeriod(uint32_t time)
{
    return simgpu_cupti_flush_period(time);
}

CUptiResult CUPTIAPI
cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record)
{
    size_t off, sz;
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!*record) {
        off = ((uintptr_t)buffer & 7) ? 8 - ((uintptr_t)buffer & 7) : 0;
    } else {
        sz = (simgpu_cupti_record_size((*record)->kind) + 7) & ~(size_t)7;
        if (!sz)
            return CUPTI_ERROR_INVALID_KIND;
        off = (size_t)((uint8_t *)*record - buffer) + sz;
    }
    if (off + sizeof(CUpti_Activity) > validBufferSizeBytes) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)(buffer + off);
    sz = simgpu_cupti_record_size((*record)->kind);
    if (!sz || off + sz > validBufferSizeBytes) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped)
{
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = simgpu_cupti_dropped_take();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    return simgpu_cupti_push_external(kind, id);
}

CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId)
{
    return simgpu_cupti_pop_external(kind, lastId);
}

CUptiResult CUPTIAPI
cuptiActivityEnableLatencyTimestamps(uint8_t enable)
{
    return simgpu_cupti_latency_timestamps(enable);
}

CUptiResult CUPTIAPI
cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
    return simgpu_cupti_thread_id_type(1, &type);
}

CUptiResult CUPTIAPI
cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
    return simgpu_cupti_thread_id_type(0, type);
}

CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
    return simgpu_cupti_subscribe(subscriber, callback, userdata);
}

CUptiResult CUPTIAPI
cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    return simgpu_cupti_unsubscribe(subscriber);
}

CUptiResult CUPTIAPI
cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                    CUpti_CallbackId cbid)
{
    return simgpu_cupti_enable_callback(enable, subscriber, domain, cbid);
}

CUptiResult CUPTIAPI
cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain)
{
    return simgpu_cupti_enable_domain(enable, subscriber, domain);
}

CUptiResult CUPTIAPI
cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
    CUptiResult rc = CUPTI_SUCCESS;
    for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE && rc == CUPTI_SUCCESS; d++)
        rc = simgpu_cupti_enable_domain(enable, subscriber, (CUpti_CallbackDomain)d);
    return rc;
}

CUptiResult CUPTIAPI
cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                      CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    return simgpu_cupti_get_callback_state(enable, subscriber, domain, cbid);
}

CUptiResult CUPTIAPI
cuptiGetContextId(CUcontext context, uint32_t *contextId)
{
    if (!contextId)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (int d = 0; d < SIMGPU_MAX_DEVICES; d++)
        if (simgpu_context(d) == context) {
            *contextId = (uint32_t)d + 1;
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_CONTEXT;
}

CUptiResult CUPTIAPI
cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
    if (!deviceId)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!context) {
        *deviceId = (uint32_t)simgpu_current_device();
        return CUPTI_SUCCESS;
    }
    for (int d = 0; d < SIMGPU_MAX_DEVICES; d++)
        if (simgpu_context(d) == context) {
            *deviceId = (uint32_t)d;
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_CONTEXT;
}

CUptiResult CUPTIAPI
cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t *streamId)
{
    struct simgpu_stream *s;
    if (!streamId)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (simgpu_stream_resolve((cudaStream_t)stream, 0, &s) != cudaSuccess)
        return CUPTI_ERROR_INVALID_STREAM;
    *streamId = simgpu_stream_id(s);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiFinalize(void)
{
    /* Delivers what is staged; collection stays usable (real CUPTI tears down). */
    return simgpu_cupti_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

CUptiResult CUPTIAPI
cuptiGetLastError(void)
{
    return CUPTI_SUCCESS;
}

struct res_text {
    CUptiResult code;
    const char *text;
};

static const struct res_text g_res[] = {
    {CUPTI_SUCCESS, "CUPTI_SUCCESS"},
    {CUPTI_ERROR_INVALID_PARAMETER, "CUPTI_ERROR_INVALID_PARAMETER"},
    {CUPTI_ERROR_INVALID_DEVICE, "CUPTI_ERROR_INVALID_DEVICE"},
    {CUPTI_ERROR_INVALID_CONTEXT, "CUPTI_ERROR_INVALID_CONTEXT"},
    {CUPTI_ERROR_INVALID_KIND, "CUPTI_ERROR_INVALID_KIND"},
    {CUPTI_ERROR_INVALID_STREAM, "CUPTI_ERROR_INVALID_STREAM"},
    {CUPTI_ERROR_MAX_LIMIT_REACHED, "CUPTI_ERROR_MAX_LIMIT_REACHED"},
    {CUPTI_ERROR_QUEUE_EMPTY, "CUPTI_ERROR_QUEUE_EMPTY"},
    {CUPTI_ERROR_OUT_OF_MEMORY, "CUPTI_ERROR_OUT_OF_MEMORY"},
    {CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED"},
    {CUPTI_ERROR_NOT_COMPATIBLE, "CUPTI_ERROR_NOT_COMPATIBLE"},
    {CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
     "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"},
    {CUPTI_ERROR_NOT_SUPPORTED, "CUPTI_ERROR_NOT_SUPPORTED"},
    {CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN"},
};

CUptiResult CUPTIAPI
cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < sizeof(g_res) / sizeof(g_res[0]); i++)
        if (g_res[i].code == result) {
            *str = g_res[i].text;
            return CUPTI_SUCCESS;
        }
    *str = "CUPTI_ERROR_UNKNOWN";
    return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI
cuptiGetErrorMessage(CUptiResult result, const char **str)
{
    return cuptiGetResultString(result, str);
}
