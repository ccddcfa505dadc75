/* cupti_api.c: the rest of libcupti.so.13's activity API that Kineto uses: per-API record
 * switches, the client's timestamp callback, activity attributes (device buffer sizes and
 * pools: kept and answered back; the simulated device stages records on the host, so
 * they change nothing), CUDA event device timestamps (the CUDA_EVENT kind is not
 * produced) and callback names (from the CUPTI cbid headers, generated into
 * cupti_cbid_names.h at build time; runtime names without their _vNNNN suffix).
 *
 * Contract of every exported cupti* function: the CUPTI documentation.
 */
#include <stdlib.h>
#include <string.h>

#include "simgpu_internal.h"

struct cbid_name {
    uint32_t cbid;
    const char *name;
};
#include "cupti_cbid_names.h"

#define NATTR 16

static _Atomic size_t g_attr[NATTR];
static _Atomic unsigned char g_attr_set[NATTR];
static _Atomic int g_event_device_ts;

CUptiResult CUPTIAPI
cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return simgpu_cupti_api_enable(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, enable != 0);
}

CUptiResult CUPTIAPI
cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return simgpu_cupti_api_enable(CUPTI_CB_DOMAIN_DRIVER_API, cbid, enable != 0);
}

CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
    return simgpu_cupti_timestamp_callback(funcTimestamp);
}

CUptiResult CUPTIAPI
cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable)
{
    atomic_store(&g_event_device_ts, enable != 0);
    return CUPTI_SUCCESS;
}

/* The value size of an attribute: size_t, except the uint8_t switches. */
static size_t
attr_size(CUpti_ActivityAttribute attr)
{
    switch (attr) {
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED:
        return sizeof(uint8_t);
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE:
        return sizeof(size_t);
    default:
        return 0;
    }
}

/* CUPTI's defaults: 3 MiB device buffers, 250 of them; 65536 semaphores. */
static size_t
attr_default(CUpti_ActivityAttribute attr)
{
    switch (attr) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
        return (size_t)3 << 20;
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
        return 250;
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
        return 65536;
    default:
        return 0;
    }
}

CUptiResult CUPTIAPI
cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize, void *value)
{
    size_t want = attr_size(attr), v = 0;
    if (!valueSize || !value)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!want || (unsigned)attr >= NATTR)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (*valueSize < want)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    memcpy(&v, value, want);
    atomic_store(&g_attr[attr], v);
    atomic_store(&g_attr_set[attr], 1);
    *valueSize = want;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize, void *value)
{
    size_t want = attr_size(attr), v;
    if (!valueSize || !value)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!want || (unsigned)attr >= NATTR)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (*valueSize < want)
        return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
    v = atomic_load(&g_attr_set[attr]) ? atomic_load(&g_attr[attr]) : attr_default(attr);
    memcpy(value, &v, want);
    *valueSize = want;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
    const struct cbid_name *t;
    size_t n;
    if (!name)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        t = g_runtime_names;
        n = sizeof(g_runtime_names) / sizeof(g_runtime_names[0]);
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        t = g_driver_names;
        n = sizeof(g_driver_names) / sizeof(g_driver_names[0]);
    } else {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (size_t i = 0; i < n; i++)
        if (t[i].cbid == cbid) {
            *name = t[i].name;
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_PARAMETER;
}
