/* cudart.c: libcudart.so.13 of the simulated device.  Built from the real
 * cuda_runtime_api.h; __CUDA_API_VERSION_INTERNAL makes that header declare both
 * the legacy-stream entry points and their _ptds/_ptsz (per-thread default stream)
 * twins, as when NVIDIA builds the real library, so the compiler checks every
 * signature.  Each entry point opens a CUPTI API scope (callbacks, correlation id,
 * API record) and translates onto the core (core.c).
 *
 *
 * This file: device management, errors, memory, copies and sets, streams; events,
 * kernel launches, graphs and driver entry points are in cudart_launch.c.
 *
 * Contract of every exported cuda* function: the CUDA runtime documentation of
 * that function, within the model described in README.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Only the runtime header is read in "internal" mode; cuda.h and cupti.h (through
 * simgpu_internal.h) are read normally. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#undef __CUDA_API_VERSION_INTERNAL

#define SIMGPU_CUDART_INTERNAL /* the shared part of simgpu_internal.h */
#include "simgpu_internal.h"

static __thread cudaError_t t_last_error;

static cudaError_t
set_last(cudaError_t rc)
{
    if (rc != cudaSuccess && rc != cudaErrorNotReady)
        t_last_error = rc;
    return rc;
}

cudaError_t
rt_exit(struct simgpu_api *a, cudaError_t rc)
{
    int r = (int)rc;
    simgpu_driver_mark_init();
    simgpu_api_exit(a, &r);
    return set_last(rc);
}

/* ---- device management ----------------------------------------------------------- */
cudaError_t CUDARTAPI
cudaGetDeviceCount(int *count)
{
    RT_ENTER(cudaGetDeviceCount, v3020, count);
    simgpu_init();
    if (!count)
        RT_EXIT(cudaErrorInvalidValue);
    *count = simgpu_cfg.device_count;
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaSetDevice(int device)
{
    RT_ENTER(cudaSetDevice, v3020, device);
    RT_EXIT(simgpu_set_device(device));
}

cudaError_t CUDARTAPI
cudaGetDevice(int *device)
{
    RT_ENTER(cudaGetDevice, v3020, device);
    if (!device)
        RT_EXIT(cudaErrorInvalidValue);
    *device = simgpu_current_device();
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    RT_ENTER(cudaGetDeviceProperties, v12000, prop, device);
    simgpu_init();
    if (!prop)
        RT_EXIT(cudaErrorInvalidValue);
    if (device < 0 || device >= simgpu_cfg.device_count)
        RT_EXIT(cudaErrorInvalidDevice);
    simgpu_device_props(prop, device);
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    RT_ENTER(cudaDeviceGetAttribute, v5000, value, attr, device);
    simgpu_init();
    if (!value)
        RT_EXIT(cudaErrorInvalidValue);
    RT_EXIT(simgpu_device_attr(value, attr, device));
}

cudaError_t CUDARTAPI
cudaDriverGetVersion(int *driverVersion)
{
    RT_ENTER(cudaDriverGetVersion, v3020, driverVersion);
    if (!driverVersion)
        RT_EXIT(cudaErrorInvalidValue);
    *driverVersion = CUDART_VERSION;
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaRuntimeGetVersion(int *runtimeVersion)
{
    RT_ENTER(cudaRuntimeGetVersion, v3020, runtimeVersion);
    if (!runtimeVersion)
        RT_EXIT(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaDeviceSynchronize(void)
{
    RT_ENTER0(cudaDeviceSynchronize, v3020);
    RT_EXIT(simgpu_device_sync());
}

cudaError_t CUDARTAPI
cudaDeviceReset(void)
{
    /* Waits for the device; allocations and streams are kept (not a full reset). */
    RT_ENTER0(cudaDeviceReset, v3020);
    RT_EXIT(simgpu_device_sync());
}

cudaError_t CUDARTAPI
cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    size_t used, peak;
    RT_ENTER(cudaMemGetInfo, v3020, free_bytes, total);
    if (!free_bytes || !total)
        RT_EXIT(cudaErrorInvalidValue);
    simgpu_memory_usage(&used, &peak);
    *total = simgpu_cfg.mem_bytes;
    *free_bytes = simgpu_cfg.mem_bytes - used;
    RT_EXIT(cudaSuccess);
}

/* ---- errors ------------------------------------------------------------------------- */
struct err_text {
    cudaError_t code;
    const char *name;
    const char *text;
};

static const struct err_text g_errs[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capture was not joined"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration",
     "__global__ function call is not configured"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorCooperativeLaunchTooLarge, "cudaErrorCooperativeLaunchTooLarge",
     "too many blocks in cooperative launch"},
    {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {cudaErrorFileNotFound, "cudaErrorFileNotFound", "file not found"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const struct err_text *
err_find(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(g_errs) / sizeof(g_errs[0]); i++)
        if (g_errs[i].code == e)
            return &g_errs[i];
    return NULL;
}

const char *CUDARTAPI
cudaGetErrorString(cudaError_t error)
{
    const struct err_text *t = err_find(error);
    return t ? t->text : "unrecognized error code";
}

const char *CUDARTAPI
cudaGetErrorName(cudaError_t error)
{
    const struct err_text *t = err_find(error);
    return t ? t->name : "cudaErrorUnknown";
}

cudaError_t CUDARTAPI
cudaGetLastError(void)
{
    cudaError_t rc = t_last_error, sticky = simgpu_sticky_error();
    t_last_error = cudaSuccess;
    return sticky != cudaSuccess ? sticky : rc;
}

cudaError_t CUDARTAPI
cudaPeekAtLastError(void)
{
    cudaError_t sticky = simgpu_sticky_error();
    return sticky != cudaSuccess ? sticky : t_last_error;
}

/* ---- memory ------------------------------------------------------------------------------ */
cudaError_t CUDARTAPI
cudaMalloc(void **devPtr, size_t size)
{
    RT_ENTER(cudaMalloc, v3020, devPtr, size);
    RT_EXIT(simgpu_malloc(devPtr, size, NULL));
}

cudaError_t CUDARTAPI
cudaFree(void *devPtr)
{
    RT_ENTER(cudaFree, v3020, devPtr);
    if (devPtr)
        simgpu_device_sync(); /* cudaFree synchronises the device */
    RT_EXIT(simgpu_free(devPtr, NULL));
}

static cudaError_t
malloc_async_impl(void **p, size_t size, cudaStream_t h, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_malloc(p, size, s);
}

static cudaError_t
free_async_impl(void *p, cudaStream_t h, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_free(p, s);
}

cudaError_t CUDARTAPI
cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    RT_ENTER(cudaMallocAsync, v11020, devPtr, size, hStream);
    RT_EXIT(malloc_async_impl(devPtr, size, hStream, 0));
}

cudaError_t CUDARTAPI
cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    RT_ENTER(cudaMallocAsync_ptsz, v11020, devPtr, size, hStream);
    RT_EXIT(malloc_async_impl(devPtr, size, hStream, 1));
}

cudaError_t CUDARTAPI
cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    RT_ENTER(cudaFreeAsync, v11020, devPtr, hStream);
    RT_EXIT(free_async_impl(devPtr, hStream, 0));
}

cudaError_t CUDARTAPI
cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    RT_ENTER(cudaFreeAsync_ptsz, v11020, devPtr, hStream);
    RT_EXIT(free_async_impl(devPtr, hStream, 1));
}

cudaError_t CUDARTAPI
cudaMallocHost(void **ptr, size_t size)
{
    RT_ENTER(cudaMallocHost, v3020, ptr, size);
    RT_EXIT(simgpu_host_alloc(ptr, size));
}

cudaError_t CUDARTAPI
cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    RT_ENTER(cudaHostAlloc, v3020, pHost, size, flags);
    RT_EXIT(simgpu_host_alloc(pHost, size));
}

cudaError_t CUDARTAPI
cudaFreeHost(void *ptr)
{
    RT_ENTER(cudaFreeHost, v3020, ptr);
    RT_EXIT(simgpu_host_free(ptr));
}

cudaError_t CUDARTAPI
cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    int kind;
    RT_ENTER(cudaPointerGetAttributes, v4000, attributes, ptr);
    if (!attributes)
        RT_EXIT(cudaErrorInvalidValue);
    kind = simgpu_memory_kind(ptr);
    memset(attributes, 0, sizeof(*attributes));
    attributes->device = simgpu_current_device();
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        attributes->type = cudaMemoryTypeDevice;
        attributes->devicePointer = (void *)(uintptr_t)ptr;
    } else if (kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED) {
        attributes->type = cudaMemoryTypeHost;
        attributes->devicePointer = (void *)(uintptr_t)ptr;
        attributes->hostPointer = (void *)(uintptr_t)ptr;
    } else {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
    }
    RT_EXIT(cudaSuccess);
}

/* ---- copies and sets -------------------------------------------------------------------- */
cudaError_t
rt_memcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t h,
          int ptds, int async)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    cudaError_t rc;
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (count && (!dst || !src))
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    op = simgpu_memcpy_op(dst, src, count, kind, async);
    if (!op)
        return cudaErrorMemoryAllocation;
    simgpu_host_launch(0.5);
    rc = simgpu_enqueue(s, op);
    if (rc == cudaSuccess && !async)
        rc = simgpu_stream_sync(s);
    return rc;
}

cudaError_t CUDARTAPI
cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpy, v3020, dst, src, count, kind);
    RT_EXIT(rt_memcpy(dst, src, count, kind, NULL, 0, 0));
}

cudaError_t CUDARTAPI
cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpy_ptds, v7000, dst, src, count, kind);
    RT_EXIT(rt_memcpy(dst, src, count, kind, NULL, 1, 0));
}

cudaError_t CUDARTAPI
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyAsync, v3020, dst, src, count, kind, stream);
    RT_EXIT(rt_memcpy(dst, src, count, kind, stream, 0, 1));
}

cudaError_t CUDARTAPI
cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                     cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyAsync_ptsz, v7000, dst, src, count, kind, stream);
    RT_EXIT(rt_memcpy(dst, src, count, kind, stream, 1, 1));
}

static cudaError_t
memset_impl(void *p, int value, size_t count, cudaStream_t h, int ptds, int async)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    cudaError_t rc;
    if (count && !p)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    op = simgpu_memset_op_new(p, (uint32_t)(value & 0xff), count, 0, async);
    if (!op)
        return cudaErrorMemoryAllocation;
    simgpu_host_launch(0.5);
    rc = simgpu_enqueue(s, op);
    if (rc == cudaSuccess && !async)
        rc = simgpu_stream_sync(s);
    return rc;
}

cudaError_t CUDARTAPI
cudaMemset(void *devPtr, int value, size_t count)
{
    RT_ENTER(cudaMemset, v3020, devPtr, value, count);
    RT_EXIT(memset_impl(devPtr, value, count, NULL, 0, 0));
}

cudaError_t CUDARTAPI
cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    RT_ENTER(cudaMemset_ptds, v7000, devPtr, value, count);
    RT_EXIT(memset_impl(devPtr, value, count, NULL, 1, 0));
}

cudaError_t CUDARTAPI
cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    RT_ENTER(cudaMemsetAsync, v3020, devPtr, value, count, stream);
    RT_EXIT(memset_impl(devPtr, value, count, stream, 0, 1));
}

cudaError_t CUDARTAPI
cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    RT_ENTER(cudaMemsetAsync_ptsz, v7000, devPtr, value, count, stream);
    RT_EXIT(memset_impl(devPtr, value, count, stream, 1, 1));
}

/* ---- streams ------------------------------------------------------------------------------- */
static cudaError_t
stream_create_impl(cudaStream_t *p, unsigned flags, int prio)
{
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!p)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_create(&s, flags, prio);
    if (rc == cudaSuccess)
        *p = (cudaStream_t)s;
    return rc;
}

cudaError_t CUDARTAPI
cudaStreamCreate(cudaStream_t *pStream)
{
    RT_ENTER(cudaStreamCreate, v3020, pStream);
    RT_EXIT(stream_create_impl(pStream, cudaStreamDefault, 0));
}

cudaError_t CUDARTAPI
cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    RT_ENTER(cudaStreamCreateWithFlags, v5000, pStream, flags);
    RT_EXIT(stream_create_impl(pStream, flags, 0));
}

cudaError_t CUDARTAPI
cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    RT_ENTER(cudaStreamCreateWithPriority, v5050, pStream, flags, priority);
    RT_EXIT(stream_create_impl(pStream, flags, priority));
}

cudaError_t CUDARTAPI
cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return cudaSuccess;
}

static cudaError_t
stream_destroy_impl(cudaStream_t h)
{
    if (!h || h == cudaStreamLegacy || h == cudaStreamPerThread)
        return cudaErrorInvalidResourceHandle;
    return simgpu_stream_destroy((struct simgpu_stream *)h);
}

cudaError_t CUDARTAPI
cudaStreamDestroy(cudaStream_t stream)
{
    RT_ENTER(cudaStreamDestroy, v5050, stream);
    RT_EXIT(stream_destroy_impl(stream));
}

static cudaError_t
stream_sync_impl(cudaStream_t h, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_stream_sync(s);
}

cudaError_t CUDARTAPI
cudaStreamSynchronize(cudaStream_t stream)
{
    RT_ENTER(cudaStreamSynchronize, v3020, stream);
    RT_EXIT(stream_sync_impl(stream, 0));
}

cudaError_t CUDARTAPI
cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    RT_ENTER(cudaStreamSynchronize_ptsz, v7000, stream);
    RT_EXIT(stream_sync_impl(stream, 1));
}

static cudaError_t
stream_query_impl(cudaStream_t h, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_stream_query(s);
}

cudaError_t CUDARTAPI
cudaStreamQuery(cudaStream_t stream)
{
    RT_ENTER(cudaStreamQuery, v3020, stream);
    RT_EXIT(stream_query_impl(stream, 0));
}

cudaError_t CUDARTAPI
cudaStreamQuery_ptsz(cudaStream_t stream)
{
    RT_ENTER(cudaStreamQuery_ptsz, v7000, stream);
    RT_EXIT(stream_query_impl(stream, 1));
}

static cudaError_t
stream_get_impl(cudaStream_t h, int ptds, unsigned *flags, int *prio, unsigned long long *id)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    if (flags)
        *flags = simgpu_stream_flags(s);
    if (prio)
        *prio = simgpu_stream_priority(s);
    if (id)
        *id = simgpu_stream_id(s);
    return cudaSuccess;
}

cudaError_t CUDARTAPI
cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    RT_ENTER(cudaStreamGetFlags, v5050, hStream, flags);
    RT_EXIT(flags ? stream_get_impl(hStream, 0, flags, NULL, NULL) : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI
cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
    RT_ENTER(cudaStreamGetFlags_ptsz, v7000, hStream, flags);
    RT_EXIT(flags ? stream_get_impl(hStream, 1, flags, NULL, NULL) : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI
cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    RT_ENTER(cudaStreamGetPriority, v5050, hStream, priority);
    RT_EXIT(priority ? stream_get_impl(hStream, 0, NULL, priority, NULL) : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI
cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority)
{
    RT_ENTER(cudaStreamGetPriority_ptsz, v7000, hStream, priority);
    RT_EXIT(priority ? stream_get_impl(hStream, 1, NULL, priority, NULL) : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI
cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
    RT_ENTER(cudaStreamGetId, v12000, hStream, streamId);
    RT_EXIT(streamId ? stream_get_impl(hStream, 0, NULL, NULL, streamId) : cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI
cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId)
{
    RT_ENTER(cudaStreamGetId_ptsz, v12000, hStream, streamId);
    RT_EXIT(streamId ? stream_get_impl(hStream, 1, NULL, NULL, streamId) : cudaErrorInvalidValue);
}

static cudaError_t
host_func_impl(cudaStream_t h, cudaHostFn_t fn, void *arg, int ptds)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    cudaError_t rc;
    if (!fn)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    op = simgpu_op_new(SIMGPU_OP_HOST_FN);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->u.host.fn = fn;
    op->u.host.arg = arg;
    return simgpu_enqueue(s, op);
}

cudaError_t CUDARTAPI
cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RT_ENTER(cudaLaunchHostFunc, v10000, stream, fn, userData);
    RT_EXIT(host_func_impl(stream, fn, userData, 0));
}

cudaError_t CUDARTAPI
cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RT_ENTER(cudaLaunchHostFunc_ptsz, v10000, stream, fn, userData);
    RT_EXIT(host_func_impl(stream, fn, userData, 1));
}
