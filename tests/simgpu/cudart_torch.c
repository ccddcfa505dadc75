/* cudart_torch.c: the rest of what PyTorch's libraries import from libcudart.so.13:
 * peer access, IPC, the default memory pool, host registration, managed memory, 2D and
 * peer copies, stream callbacks, the stream-capture queries, graph node and user-object
 * calls, the profiler switches.
 *
 * The simulated device is one device per process with no peers (cudaDeviceCanAccessPeer
 * and cudaDeviceEnablePeerAccess answer as the real runtime does for a lone device: a
 * peer that is the device itself or out of range is cudaErrorInvalidDevice, another one
 * has no access).  What the device cannot do (IPC handles, graph nodes built by hand,
 * conditional nodes, captures into an existing graph) answers cudaErrorNotSupported and
 * says once on stderr which call it was.
 *
 * Contract of every exported cuda* function: the CUDA runtime documentation of that
 * function, within the model described in README.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#undef __CUDA_API_VERSION_INTERNAL

#define SIMGPU_CUDART_INTERNAL
#include "simgpu_internal.h"

static cudaError_t
unsupported(const char *call)
{
    simgpu_say_unsupported(call);
    return cudaErrorNotSupported;
}

static int
valid_device(int d)
{
    simgpu_init();
    return d >= 0 && d < simgpu_cfg.device_count;
}

/* ---- peer access ---------------------------------------------------------------------- */
cudaError_t CUDARTAPI
cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaDeviceCanAccessPeer, v4000, canAccessPeer, device, peerDevice);
    if (!canAccessPeer)
        rc = cudaErrorInvalidValue;
    else if (!valid_device(device) || !valid_device(peerDevice) || device == peerDevice)
        rc = cudaErrorInvalidDevice;
    else
        *canAccessPeer = 0;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    cudaError_t rc;
    RT_ENTER(cudaDeviceEnablePeerAccess, v4000, peerDevice, flags);
    if (flags)
        rc = cudaErrorInvalidValue;
    else if (!valid_device(peerDevice) || peerDevice == simgpu_current_device())
        rc = cudaErrorInvalidDevice;
    else
        rc = cudaErrorPeerAccessUnsupported;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                    cudaStream_t stream)
{
    cudaError_t rc;
    RT_ENTER(cudaMemcpyPeerAsync, v4000, dst, dstDevice, src, srcDevice, count, stream);
    if (!valid_device(dstDevice) || !valid_device(srcDevice))
        rc = cudaErrorInvalidDevice;
    else
        rc = rt_memcpy(dst, src, count, cudaMemcpyDeviceToDevice, stream, 0, 1);
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    struct cudaDeviceProp p;
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaDeviceGetPCIBusId, v4010, pciBusId, len, device);
    if (!pciBusId || len <= 0)
        rc = cudaErrorInvalidValue;
    else if (!valid_device(device))
        rc = cudaErrorInvalidDevice;
    else {
        simgpu_device_props(&p, device);
        snprintf(pciBusId, (size_t)len, "%08X:%02X:%02X.0", (unsigned)p.pciDomainID,
                 (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
    }
    RT_EXIT(rc);
}

/* ---- IPC: one process per simulated device, no shared device memory ------------------- */
cudaError_t CUDARTAPI
cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    RT_ENTER(cudaIpcGetMemHandle, v4010, handle, devPtr);
    RT_EXIT(unsupported("cudaIpcGetMemHandle"));
}

cudaError_t CUDARTAPI
cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    RT_ENTER(cudaIpcOpenMemHandle, v4010, devPtr, handle, flags);
    RT_EXIT(unsupported("cudaIpcOpenMemHandle"));
}

cudaError_t CUDARTAPI
cudaIpcCloseMemHandle(void *devPtr)
{
    RT_ENTER(cudaIpcCloseMemHandle, v4010, devPtr);
    RT_EXIT(unsupported("cudaIpcCloseMemHandle"));
}

cudaError_t CUDARTAPI
cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    RT_ENTER(cudaIpcGetEventHandle, v4010, handle, event);
    RT_EXIT(unsupported("cudaIpcGetEventHandle"));
}

cudaError_t CUDARTAPI
cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    RT_ENTER(cudaIpcOpenEventHandle, v4010, event, handle);
    RT_EXIT(unsupported("cudaIpcOpenEventHandle"));
}

/* ---- the default memory pool ------------------------------------------------------------- */
/* One pool per device: its settable attributes as last set; the usage figures are the
 * device's (cudaMallocAsync allocates from the device's memory). */
struct sim_pool {
    int device;
    unsigned long long release_threshold;
    int follow_event, opportunistic, internal_deps;
};
static struct sim_pool g_pools[SIMGPU_MAX_DEVICES];
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;

static struct sim_pool *
pool_of(cudaMemPool_t h)
{
    struct sim_pool *p = (struct sim_pool *)h;
    return p >= g_pools && p < g_pools + SIMGPU_MAX_DEVICES ? p : NULL;
}

cudaError_t CUDARTAPI
cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaDeviceGetDefaultMemPool, v11020, memPool, device);
    if (!memPool)
        rc = cudaErrorInvalidValue;
    else if (!valid_device(device) || device >= SIMGPU_MAX_DEVICES)
        rc = cudaErrorInvalidDevice;
    else {
        pthread_mutex_lock(&g_pool_lock);
        g_pools[device].device = device;
        if (!g_pools[device].follow_event && !g_pools[device].opportunistic &&
            !g_pools[device].internal_deps && !g_pools[device].release_threshold)
            g_pools[device].follow_event = g_pools[device].opportunistic =
                g_pools[device].internal_deps = 1; /* the runtime's defaults */
        pthread_mutex_unlock(&g_pool_lock);
        *memPool = (cudaMemPool_t)&g_pools[device];
    }
    RT_EXIT(rc);
}

static cudaError_t
pool_attr(struct sim_pool *p, enum cudaMemPoolAttr attr, void *value, int set)
{
    size_t in_use = 0, peak = 0;
    int *flag = NULL;
    cudaError_t rc = cudaSuccess;
    if (!p || !value)
        return !p ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue;
    simgpu_memory_usage(&in_use, &peak);
    pthread_mutex_lock(&g_pool_lock);
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
        flag = &p->follow_event;
        break;
    case cudaMemPoolReuseAllowOpportunistic:
        flag = &p->opportunistic;
        break;
    case cudaMemPoolReuseAllowInternalDependencies:
        flag = &p->internal_deps;
        break;
    case cudaMemPoolAttrReleaseThreshold:
        if (set)
            p->release_threshold = *(unsigned long long *)value;
        else
            *(unsigned long long *)value = p->release_threshold;
        break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent:
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh:
        if (set) {
            /* Only the high watermarks can be set, and only to 0 (a reset). */
            if ((attr != cudaMemPoolAttrReservedMemHigh && attr != cudaMemPoolAttrUsedMemHigh) ||
                *(unsigned long long *)value != 0)
                rc = cudaErrorInvalidValue;
        } else
            *(unsigned long long *)value =
                attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrUsedMemCurrent
                    ? in_use
                    : peak;
        break;
    default:
        rc = cudaErrorInvalidValue;
        break;
    }
    if (flag) {
        if (set)
            *flag = *(int *)value != 0;
        else
            *(int *)value = *flag;
    }
    pthread_mutex_unlock(&g_pool_lock);
    return rc;
}

cudaError_t CUDARTAPI
cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    RT_ENTER(cudaMemPoolGetAttribute, v11020, memPool, attr, value);
    RT_EXIT(pool_attr(pool_of(memPool), attr, value, 0));
}

cudaError_t CUDARTAPI
cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    RT_ENTER(cudaMemPoolSetAttribute, v11020, memPool, attr, value);
    RT_EXIT(pool_attr(pool_of(memPool), attr, value, 1));
}

cudaError_t CUDARTAPI
cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList, size_t count)
{
    struct sim_pool *p = pool_of(memPool);
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaMemPoolSetAccess, v11020, memPool, descList, count);
    if (!p)
        rc = cudaErrorInvalidResourceHandle;
    else if (count && !descList)
        rc = cudaErrorInvalidValue;
    for (size_t i = 0; rc == cudaSuccess && i < count; i++) {
        if (descList[i].location.type != cudaMemLocationTypeDevice ||
            !valid_device(descList[i].location.id))
            rc = cudaErrorInvalidValue;
        /* The owning device always has read-write access; no peer can be given any. */
        else if (descList[i].location.id == p->device)
            rc = descList[i].flags == cudaMemAccessFlagsProtReadWrite ? cudaSuccess
                                                                      : cudaErrorInvalidValue;
        else
            rc = cudaErrorInvalidDevice;
    }
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    RT_ENTER(cudaMemPoolTrimTo, v11020, memPool, minBytesToKeep);
    /* cudaFreeAsync returns memory at once: the pool holds nothing to trim. */
    RT_EXIT(pool_of(memPool) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

/* Graph memory nodes cannot be made (cudaGraphAddNode is not supported): none in use. */
cudaError_t CUDARTAPI
cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaDeviceGetGraphMemAttribute, v11040, device, attr, value);
    if (!valid_device(device))
        rc = cudaErrorInvalidDevice;
    else if (!value || attr < cudaGraphMemAttrUsedMemCurrent ||
             attr > cudaGraphMemAttrReservedMemHigh)
        rc = cudaErrorInvalidValue;
    else
        *(unsigned long long *)value = 0;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaDeviceSetGraphMemAttribute, v11040, device, attr, value);
    if (!valid_device(device))
        rc = cudaErrorInvalidDevice;
    else if (!value ||
             (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh) ||
             *(unsigned long long *)value != 0)
        rc = cudaErrorInvalidValue;
    RT_EXIT(rc);
}

/* ---- host registration, managed memory -------------------------------------------------- */
struct host_range {
    char *base;
    size_t size;
    struct host_range *next;
};
static struct host_range *g_ranges;
static pthread_mutex_t g_range_lock = PTHREAD_MUTEX_INITIALIZER;

cudaError_t CUDARTAPI
cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    struct host_range *r;
    char *b = ptr;
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaHostRegister, v4000, ptr, size, flags);
    if (!ptr || !size ||
        (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
                             cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)))
        RT_EXIT(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_range_lock);
    for (r = g_ranges; r && rc == cudaSuccess; r = r->next)
        if (b < r->base + r->size && r->base < b + size)
            rc = cudaErrorHostMemoryAlreadyRegistered;
    if (rc == cudaSuccess) {
        r = malloc(sizeof(*r));
        if (!r)
            rc = cudaErrorMemoryAllocation;
        else {
            r->base = b;
            r->size = size;
            r->next = g_ranges;
            g_ranges = r;
        }
    }
    pthread_mutex_unlock(&g_range_lock);
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaHostUnregister(void *ptr)
{
    struct host_range **pp, *r = NULL;
    RT_ENTER(cudaHostUnregister, v4000, ptr);
    pthread_mutex_lock(&g_range_lock);
    for (pp = &g_ranges; *pp; pp = &(*pp)->next)
        if ((*pp)->base == ptr) {
            r = *pp;
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&g_range_lock);
    free(r);
    RT_EXIT(r ? cudaSuccess : cudaErrorHostMemoryNotRegistered);
}

/* Device memory is host-addressable here, so managed memory is device memory. */
cudaError_t CUDARTAPI
cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    RT_ENTER(cudaMallocManaged, v6000, devPtr, size, flags);
    if (!devPtr || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        RT_EXIT(cudaErrorInvalidValue);
    RT_EXIT(simgpu_malloc(devPtr, size, NULL));
}

/* One copy per row, or one when the rows are contiguous on both sides. */
cudaError_t CUDARTAPI
cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(cudaMemcpy2DAsync, v3020, dst, dpitch, src, spitch, width, height, kind, stream);
    if (width > dpitch || width > spitch)
        RT_EXIT(cudaErrorInvalidPitchValue);
    if (!width || !height)
        RT_EXIT(cudaSuccess);
    if (dpitch == width && spitch == width)
        RT_EXIT(rt_memcpy(dst, src, width * height, kind, stream, 0, 1));
    for (size_t i = 0; i < height && rc == cudaSuccess; i++)
        rc = rt_memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width, kind,
                       stream, 0, 1);
    RT_EXIT(rc);
}

/* ---- stream callbacks and capture queries ------------------------------------------------ */
struct stream_cb {
    cudaStreamCallback_t fn;
    void *arg;
    cudaStream_t stream;
};

static void CUDART_CB
run_stream_cb(void *p)
{
    struct stream_cb *c = p;
    c->fn(c->stream, simgpu_sticky_error(), c->arg);
}

cudaError_t CUDARTAPI
cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                      unsigned int flags)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    struct stream_cb *c;
    cudaError_t rc;
    RT_ENTER(cudaStreamAddCallback, v5000, stream, callback, userData, flags);
    if (!callback || flags)
        RT_EXIT(cudaErrorInvalidValue);
    rc = simgpu_stream_resolve(stream, 0, &s);
    if (rc != cudaSuccess)
        RT_EXIT(rc);
    c = malloc(sizeof(*c));
    op = c ? simgpu_op_new(SIMGPU_OP_HOST_FN) : NULL;
    if (!op) {
        free(c);
        RT_EXIT(cudaErrorMemoryAllocation);
    }
    c->fn = callback;
    c->arg = userData;
    c->stream = stream;
    op->u.host.fn = run_stream_cb;
    op->u.host.arg = c;
    op->u.host.arg_bytes = sizeof(*c);
    rc = simgpu_enqueue(s, op);
    RT_EXIT(rc);
}

static __thread enum cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

cudaError_t CUDARTAPI
cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old;
    RT_ENTER(cudaThreadExchangeStreamCaptureMode, v10010, mode);
    if (!mode || *mode < cudaStreamCaptureModeGlobal || *mode > cudaStreamCaptureModeRelaxed)
        RT_EXIT(cudaErrorInvalidValue);
    old = t_capture_mode;
    t_capture_mode = *mode;
    *mode = old;
    RT_EXIT(cudaSuccess);
}

/* The capture's graph is its id; a graph being captured has no node handles, so the
 * dependency set reads as empty (cudaStreamUpdateCaptureDependencies is not supported). */
static cudaError_t
capture_info_impl(cudaStream_t h, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                  cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                  size_t *ndeps, int ptds)
{
    struct simgpu_stream *s;
    struct simgpu_graph *g;
    cudaError_t rc;
    if (!st)
        return cudaErrorInvalidValue;
    rc = simgpu_stream_resolve(h, ptds, &s);
    if (rc != cudaSuccess)
        return rc;
    g = simgpu_capture_graph(s);
    *st = g ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    if (id)
        *id = (unsigned long long)(uintptr_t)g;
    if (graph)
        *graph = (cudaGraph_t)g;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return cudaSuccess;
}

cudaError_t CUDARTAPI
cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
                         unsigned long long *id_out, cudaGraph_t *graph_out,
                         const cudaGraphNode_t **dependencies_out,
                         const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    RT_ENTER(cudaStreamGetCaptureInfo, v12030, stream, captureStatus_out, id_out, graph_out,
             dependencies_out, edgeData_out, numDependencies_out);
    RT_EXIT(capture_info_impl(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                              edgeData_out, numDependencies_out, 0));
}

cudaError_t CUDARTAPI
cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                    const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                                    unsigned int flags)
{
    RT_ENTER(cudaStreamUpdateCaptureDependencies, v12030, stream, dependencies, dependencyData,
             numDependencies, flags);
    RT_EXIT(unsupported("cudaStreamUpdateCaptureDependencies"));
}

cudaError_t CUDARTAPI
cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                              const cudaGraphNode_t *dependencies,
                              const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                              enum cudaStreamCaptureMode mode)
{
    RT_ENTER(cudaStreamBeginCaptureToGraph, v12030, stream, graph, dependencies, dependencyData,
             numDependencies, mode);
    RT_EXIT(unsupported("cudaStreamBeginCaptureToGraph"));
}

/* ---- graphs: instantiation with flags, the node count; node handles are not supported ---- */
cudaError_t CUDARTAPI
cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                              unsigned long long flags)
{
    struct simgpu_graph *g;
    struct simgpu_graph_exec *x = NULL;
    cudaError_t rc;
    RT_ENTER(cudaGraphInstantiateWithFlags, v11040, pGraphExec, graph, flags);
    g = simgpu_graph_lookup(graph);
    if (!pGraphExec)
        RT_EXIT(cudaErrorInvalidValue);
    if (!g)
        RT_EXIT(cudaErrorInvalidResourceHandle);
    /* Auto-free-on-launch and priority change nothing here; device launch and upload
     * cannot be done. */
    if (flags & ~(unsigned long long)(cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                      cudaGraphInstantiateFlagUseNodePriority))
        RT_EXIT(unsupported("cudaGraphInstantiateWithFlags(device launch, upload)"));
    rc = simgpu_graph_instantiate(&x, g);
    if (rc == cudaSuccess)
        *pGraphExec = (cudaGraphExec_t)x;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    struct simgpu_graph *g;
    RT_ENTER(cudaGraphGetNodes, v10000, graph, nodes, numNodes);
    g = simgpu_graph_lookup(graph);
    if (!numNodes)
        RT_EXIT(cudaErrorInvalidValue);
    if (!g)
        RT_EXIT(cudaErrorInvalidResourceHandle);
    /* The count (what PyTorch asks after a capture); the graph has no node handles. */
    if (nodes)
        RT_EXIT(unsupported("cudaGraphGetNodes(node handles)"));
    *numNodes = (size_t)simgpu_graph_node_count(g);
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies,
                             cudaGraphEdgeData *edgeData, size_t *pNumDependencies)
{
    RT_ENTER(cudaGraphNodeGetDependencies, v12030, node, pDependencies, edgeData, pNumDependencies);
    RT_EXIT(unsupported("cudaGraphNodeGetDependencies"));
}

cudaError_t CUDARTAPI
cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                 const cudaGraphNode_t *pDependencies, const cudaGraphEdgeData *dependencyData,
                 size_t numDependencies, struct cudaGraphNodeParams *nodeParams)
{
    RT_ENTER(cudaGraphAddNode, v12030, pGraphNode, graph, pDependencies, dependencyData,
             numDependencies, nodeParams);
    RT_EXIT(unsupported("cudaGraphAddNode"));
}

cudaError_t CUDARTAPI
cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out, cudaGraph_t graph,
                                 unsigned int defaultLaunchValue, unsigned int flags)
{
    RT_ENTER(cudaGraphConditionalHandleCreate, v12030, pHandle_out, graph, defaultLaunchValue,
             flags);
    RT_EXIT(unsupported("cudaGraphConditionalHandleCreate"));
}

/* ---- user objects: a reference count and a destructor run at zero ------------------------ */
#define UOBJ_MAGIC 0x554f424aU
struct sim_uobj {
    uint32_t magic;
    unsigned refs;
    void *ptr;
    cudaHostFn_t destroy;
};
static pthread_mutex_t g_uobj_lock = PTHREAD_MUTEX_INITIALIZER;

cudaError_t CUDARTAPI
cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy,
                     unsigned int initialRefcount, unsigned int flags)
{
    struct sim_uobj *o;
    RT_ENTER(cudaUserObjectCreate, v11030, object_out, ptr, destroy, initialRefcount, flags);
    if (!object_out || !destroy || !initialRefcount || flags != cudaUserObjectNoDestructorSync)
        RT_EXIT(cudaErrorInvalidValue);
    o = calloc(1, sizeof(*o));
    if (!o)
        RT_EXIT(cudaErrorMemoryAllocation);
    o->magic = UOBJ_MAGIC;
    o->refs = initialRefcount;
    o->ptr = ptr;
    o->destroy = destroy;
    *object_out = (cudaUserObject_t)o;
    RT_EXIT(cudaSuccess);
}

/* Drops count references of o (a live user object, count > 0); the destructor runs at
 * zero. Returns cudaErrorInvalidValue when o holds fewer. */
static cudaError_t
uobj_release(struct sim_uobj *o, unsigned count)
{
    int dead = 0;
    cudaError_t rc = cudaSuccess;
    pthread_mutex_lock(&g_uobj_lock);
    if (count > o->refs)
        rc = cudaErrorInvalidValue;
    else {
        o->refs -= count;
        dead = !o->refs;
        if (dead)
            o->magic = 0;
    }
    pthread_mutex_unlock(&g_uobj_lock);
    if (dead) {
        o->destroy(o->ptr);
        free(o);
    }
    return rc;
}

/* The release a graph holding a user object runs when it is freed. */
static void
uobj_graph_release(void *obj, unsigned count)
{
    uobj_release(obj, count);
}

cudaError_t CUDARTAPI
cudaUserObjectRelease(cudaUserObject_t object, unsigned int count)
{
    struct sim_uobj *o = (struct sim_uobj *)object;
    RT_ENTER(cudaUserObjectRelease, v11030, object, count);
    if (!o || o->magic != UOBJ_MAGIC || !count)
        RT_EXIT(cudaErrorInvalidValue);
    RT_EXIT(uobj_release(o, count));
}

/* The graph takes count references (cudaGraphUserObjectMove: the caller's, else new ones)
 * and drops them when it is freed. */
cudaError_t CUDARTAPI
cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                          unsigned int flags)
{
    struct sim_uobj *o = (struct sim_uobj *)object;
    struct simgpu_graph *g = simgpu_graph_lookup(graph);
    cudaError_t rc;
    RT_ENTER(cudaGraphRetainUserObject, v11030, graph, object, count, flags);
    if (!g || !o || o->magic != UOBJ_MAGIC || !count || (flags & ~cudaGraphUserObjectMove))
        RT_EXIT(cudaErrorInvalidValue);
    if (!(flags & cudaGraphUserObjectMove)) {
        pthread_mutex_lock(&g_uobj_lock);
        o->refs += count;
        pthread_mutex_unlock(&g_uobj_lock);
    }
    rc = simgpu_graph_hold(g, uobj_graph_release, o, count);
    if (rc != cudaSuccess && !(flags & cudaGraphUserObjectMove))
        uobj_release(o, count);
    RT_EXIT(rc);
}

/* ---- the profiler switches: no profiler attaches to the simulated device ----------------- */
cudaError_t CUDARTAPI
cudaProfilerStart(void)
{
    RT_ENTER0(cudaProfilerStart, v4000);
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaProfilerStop(void)
{
    RT_ENTER0(cudaProfilerStop, v4000);
    RT_EXIT(cudaSuccess);
}
