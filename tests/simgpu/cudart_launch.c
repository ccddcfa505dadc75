/* cudart_launch.c: libcudart.so.13's events, kernel launches, graphs, driver entry points. */
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

/* ---- events ------------------------------------------------------------------------------ */
static cudaError_t
event_create_impl(cudaEvent_t *p, unsigned flags)
{
    struct simgpu_event *ev;
    cudaError_t rc;
    if (!p)
        return cudaErrorInvalidValue;
    rc = simgpu_event_create(&ev, flags);
    if (rc == cudaSuccess)
        *p = (cudaEvent_t)ev;
    return rc;
}

cudaError_t CUDARTAPI
cudaEventCreate(cudaEvent_t *event)
{
    RT_ENTER(cudaEventCreate, v3020, event);
    RT_EXIT(event_create_impl(event, cudaEventDefault));
}

cudaError_t CUDARTAPI
cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    RT_ENTER(cudaEventCreateWithFlags, v3020, event, flags);
    RT_EXIT(event_create_impl(event, flags));
}

cudaError_t CUDARTAPI
cudaEventDestroy(cudaEvent_t event)
{
    struct simgpu_event *ev;
    RT_ENTER(cudaEventDestroy, v3020, event);
    ev = simgpu_event_lookup(event);
    RT_EXIT(ev ? simgpu_event_destroy(ev) : cudaErrorInvalidResourceHandle);
}

static cudaError_t
event_record_impl(cudaEvent_t event, cudaStream_t h, int ptds)
{
    struct simgpu_event *ev = simgpu_event_lookup(event);
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!ev)
        return cudaErrorInvalidResourceHandle;
    rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_event_record(ev, s);
}

cudaError_t CUDARTAPI
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_ENTER(cudaEventRecord, v3020, event, stream);
    RT_EXIT(event_record_impl(event, stream, 0));
}

cudaError_t CUDARTAPI
cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    RT_ENTER(cudaEventRecord_ptsz, v7000, event, stream);
    RT_EXIT(event_record_impl(event, stream, 1));
}

cudaError_t CUDARTAPI
cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    RT_ENTER(cudaEventRecordWithFlags, v11010, event, stream, flags);
    RT_EXIT(event_record_impl(event, stream, 0));
}

cudaError_t CUDARTAPI
cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    RT_ENTER(cudaEventRecordWithFlags_ptsz, v11010, event, stream, flags);
    RT_EXIT(event_record_impl(event, stream, 1));
}

cudaError_t CUDARTAPI
cudaEventQuery(cudaEvent_t event)
{
    struct simgpu_event *ev;
    RT_ENTER(cudaEventQuery, v3020, event);
    ev = simgpu_event_lookup(event);
    RT_EXIT(ev ? simgpu_event_query(ev) : cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI
cudaEventSynchronize(cudaEvent_t event)
{
    struct simgpu_event *ev;
    RT_ENTER(cudaEventSynchronize, v3020, event);
    ev = simgpu_event_lookup(event);
    RT_EXIT(ev ? simgpu_event_sync(ev) : cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    struct simgpu_event *a, *b;
    RT_ENTER(cudaEventElapsedTime, v12080, ms, start, end);
    a = simgpu_event_lookup(start);
    b = simgpu_event_lookup(end);
    if (!ms)
        RT_EXIT(cudaErrorInvalidValue);
    RT_EXIT(a && b ? simgpu_event_elapsed(ms, a, b) : cudaErrorInvalidResourceHandle);
}

static cudaError_t
wait_event_impl(cudaStream_t h, cudaEvent_t event, int ptds)
{
    struct simgpu_event *ev = simgpu_event_lookup(event);
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!ev)
        return cudaErrorInvalidResourceHandle;
    rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_stream_wait_event(s, ev);
}

cudaError_t CUDARTAPI
cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_ENTER(cudaStreamWaitEvent, v3020, stream, event, flags);
    RT_EXIT(wait_event_impl(stream, event, 0));
}

cudaError_t CUDARTAPI
cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_ENTER(cudaStreamWaitEvent_ptsz, v7000, stream, event, flags);
    RT_EXIT(wait_event_impl(stream, event, 1));
}

/* ---- kernels ------------------------------------------------------------------------------ */
cudaError_t
rt_launch(const void *func, const char *name, uint64_t dur, dim3 grid, dim3 block, size_t shmem,
          cudaStream_t h, int ptds, void **args)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    struct simgpu_launch_args l = {0};
    cudaError_t rc = simgpu_sticky_error();
    if (rc != cudaSuccess)
        return rc;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
        (uint64_t)block.x * block.y * block.z > 1024)
        return cudaErrorInvalidConfiguration;
    rc = rt_kernel_fits(func, block, shmem);
    if (rc != cudaSuccess)
        return rc;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    op = simgpu_op_new(SIMGPU_OP_KERNEL);
    if (!op)
        return cudaErrorMemoryAllocation;
    op->u.kernel.name = name;
    op->u.kernel.dur_ns = dur;
    op->u.kernel.grid = grid;
    op->u.kernel.block = block;
    op->u.kernel.shmem = (uint32_t)shmem;
    op->u.kernel.has_work = simgpu_take_next_work(&op->u.kernel.work);
    l.blocks = (uint64_t)grid.x * grid.y * grid.z;
    l.threads = l.blocks * block.x * block.y * block.z;
    l.params = args;
    if (!op->u.kernel.has_work)
        op->u.kernel.has_work = simgpu_named_work(func, name, &l, &op->u.kernel.work);
    simgpu_host_launch(1.0);
    return simgpu_enqueue(s, op);
}

cudaError_t CUDARTAPI
cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                 cudaStream_t stream)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchKernel, v7000, name, func, gridDim, blockDim, args, sharedMem, stream);
    RT_EXIT(func ? rt_launch(func, name, dur, gridDim, blockDim, sharedMem, stream, 0, args)
                 : cudaErrorInvalidDeviceFunction);
}

cudaError_t CUDARTAPI
cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                      cudaStream_t stream)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchKernel_ptsz, v7000, name, func, gridDim, blockDim, args, sharedMem,
                 stream);
    RT_EXIT(func ? rt_launch(func, name, dur, gridDim, blockDim, sharedMem, stream, 1, args)
                 : cudaErrorInvalidDeviceFunction);
}

static cudaError_t
launch_ex_impl(const cudaLaunchConfig_t *config, const void *func, const char *name, uint64_t dur,
               int ptds, void **args)
{
    if (!config)
        return cudaErrorInvalidValue;
    if (!name)
        return cudaErrorInvalidDeviceFunction;
    return rt_launch(func, name, dur, config->gridDim, config->blockDim, config->dynamicSmemBytes,
                     config->stream, ptds, args);
}

cudaError_t CUDARTAPI
cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchKernelExC, v11060, name, config, func, args);
    RT_EXIT(launch_ex_impl(config, func, name, dur, 0, args));
}

cudaError_t CUDARTAPI
cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchKernelExC_ptsz, v11060, name, config, func, args);
    RT_EXIT(launch_ex_impl(config, func, name, dur, 1, args));
}

cudaError_t CUDARTAPI
cudaFuncGetName(const char **name, const void *func)
{
    RT_ENTER(cudaFuncGetName, v12030, name, func);
    if (!name || !func)
        RT_EXIT(cudaErrorInvalidValue);
    {
        struct simgpu_kernel *k = simgpu_kernel_resolve(func);
        *name = k ? k->name : simgpu_kernel_name(func);
    }
    RT_EXIT(*name ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

/* ---- graphs -------------------------------------------------------------------------------- */
static cudaError_t
begin_capture_impl(cudaStream_t h, enum cudaStreamCaptureMode mode, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve(h, ptds, &s);
    return rc != cudaSuccess ? rc : simgpu_capture_begin(s, (int)mode);
}

cudaError_t CUDARTAPI
cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_ENTER(cudaStreamBeginCapture, v10000, stream, mode);
    RT_EXIT(begin_capture_impl(stream, mode, 0));
}

cudaError_t CUDARTAPI
cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_ENTER(cudaStreamBeginCapture_ptsz, v10000, stream, mode);
    RT_EXIT(begin_capture_impl(stream, mode, 1));
}

static cudaError_t
end_capture_impl(cudaStream_t h, cudaGraph_t *pGraph, int ptds)
{
    struct simgpu_stream *s;
    struct simgpu_graph *g;
    cudaError_t rc;
    if (!pGraph)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc == cudaSuccess)
        rc = simgpu_capture_end(s, &g);
    if (rc == cudaSuccess)
        *pGraph = (cudaGraph_t)g;
    return rc;
}

cudaError_t CUDARTAPI
cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    RT_ENTER(cudaStreamEndCapture, v10000, stream, pGraph);
    RT_EXIT(end_capture_impl(stream, pGraph, 0));
}

cudaError_t CUDARTAPI
cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    RT_ENTER(cudaStreamEndCapture_ptsz, v10000, stream, pGraph);
    RT_EXIT(end_capture_impl(stream, pGraph, 1));
}

static cudaError_t
is_capturing_impl(cudaStream_t h, enum cudaStreamCaptureStatus *st, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!st)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc == cudaSuccess)
        *st =
            simgpu_capture_status(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return rc;
}

cudaError_t CUDARTAPI
cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RT_ENTER(cudaStreamIsCapturing, v10000, stream, pCaptureStatus);
    RT_EXIT(is_capturing_impl(stream, pCaptureStatus, 0));
}

cudaError_t CUDARTAPI
cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RT_ENTER(cudaStreamIsCapturing_ptsz, v10000, stream, pCaptureStatus);
    RT_EXIT(is_capturing_impl(stream, pCaptureStatus, 1));
}

static cudaError_t
instantiate_impl(cudaGraphExec_t *px, cudaGraph_t graph)
{
    struct simgpu_graph *g = simgpu_graph_lookup(graph);
    struct simgpu_graph_exec *x;
    cudaError_t rc;
    if (!px)
        return cudaErrorInvalidValue;
    if (!g)
        return cudaErrorInvalidResourceHandle;
    rc = simgpu_graph_instantiate(&x, g);
    if (rc == cudaSuccess)
        *px = (cudaGraphExec_t)x;
    return rc;
}

cudaError_t CUDARTAPI
cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    RT_ENTER(cudaGraphInstantiate, v12000, pGraphExec, graph, flags);
    RT_EXIT(instantiate_impl(pGraphExec, graph));
}

static cudaError_t
graph_launch_impl(cudaGraphExec_t exec, cudaStream_t h, int ptds)
{
    struct simgpu_graph_exec *x = simgpu_graph_exec_lookup(exec);
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!x)
        return cudaErrorInvalidResourceHandle;
    rc = simgpu_sticky_error();
    if (rc == cudaSuccess)
        rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    simgpu_host_launch(1.0);
    return simgpu_graph_launch(x, s);
}

cudaError_t CUDARTAPI
cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_ENTER(cudaGraphLaunch, v10000, graphExec, stream);
    RT_EXIT(graph_launch_impl(graphExec, stream, 0));
}

cudaError_t CUDARTAPI
cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_ENTER(cudaGraphLaunch_ptsz, v10000, graphExec, stream);
    RT_EXIT(graph_launch_impl(graphExec, stream, 1));
}

cudaError_t CUDARTAPI
cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    struct simgpu_graph_exec *x;
    RT_ENTER(cudaGraphExecDestroy, v10000, graphExec);
    x = simgpu_graph_exec_lookup(graphExec);
    RT_EXIT(x ? simgpu_graph_exec_destroy(x) : cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI
cudaGraphDestroy(cudaGraph_t graph)
{
    struct simgpu_graph *g;
    RT_ENTER(cudaGraphDestroy, v10000, graph);
    g = simgpu_graph_lookup(graph);
    RT_EXIT(g ? simgpu_graph_destroy(g) : cudaErrorInvalidResourceHandle);
}

/* ---- driver entry points ------------------------------------------------------------------- */
static cudaError_t
entry_point_impl(const char *symbol, void **funcPtr, enum cudaDriverEntryPointQueryResult *status)
{
    void *h, *f = NULL;
    char buf[256];
    if (!symbol || !funcPtr)
        return cudaErrorInvalidValue;
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h) {
        snprintf(buf, sizeof(buf), "%s_v2", symbol);
        f = dlsym(h, buf);
        if (!f)
            f = dlsym(h, symbol);
    }
    *funcPtr = f;
    if (status)
        *status = f ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

cudaError_t CUDARTAPI
cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                        enum cudaDriverEntryPointQueryResult *driverStatus)
{
    RT_ENTER(cudaGetDriverEntryPoint, v11030, symbol, funcPtr, flags, driverStatus);
    RT_EXIT(entry_point_impl(symbol, funcPtr, driverStatus));
}

cudaError_t CUDARTAPI
cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                 unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *driverStatus)
{
    RT_ENTER(cudaGetDriverEntryPointByVersion, v12050, symbol, funcPtr, cudaVersion, flags,
             driverStatus);
    RT_EXIT(entry_point_impl(symbol, funcPtr, driverStatus));
}
