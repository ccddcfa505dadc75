/* cuda_driver_torch.c: the rest of the libcuda.so.1 PyTorch imports or looks up by name
 * (c10's driver table): the primary context's state, the context stack, log callbacks,
 * pointer attributes and address ranges, stream contexts, 32-bit stream writes and sets,
 * device UUIDs, tensor-map descriptors.  What the simulated device cannot do (virtual
 * memory management, shareable handles, multicast objects, green contexts and device
 * resources, the JIT linker) answers CUDA_ERROR_NOT_SUPPORTED and says once on stderr
 * which call it was.
 *
 * Contract of every exported cu* function: the CUDA driver documentation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "cuda_driver_api.h"

static CUresult
unsupported(const char *call)
{
    simgpu_say_unsupported(call);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static int
valid_device(CUdevice d)
{
    simgpu_init();
    return d >= 0 && d < simgpu_cfg.device_count;
}

/* ---- the primary context and the context stack ------------------------------------------ */
/* The simulated device's primary context exists from the start and is never reset. */
CUresult CUDAAPI
cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuDevicePrimaryCtxGetState, dev, flags, active);
    NEED_INIT();
    if (!flags || !active)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!valid_device(dev))
        rc = CUDA_ERROR_INVALID_DEVICE;
    else {
        *flags = 0;
        *active = 1;
    }
    DRV_EXIT(rc);
}

#define CTX_STACK_MAX 64
static __thread CUcontext t_ctx_stack[CTX_STACK_MAX];
static __thread int t_ctx_depth;

static int
ctx_device(CUcontext ctx)
{
    for (int d = 0; d < simgpu_cfg.device_count; d++)
        if (simgpu_context(d) == ctx)
            return d;
    return -1;
}

/* Pushing makes ctx current; popping restores the context current before the push. */
CUresult CUDAAPI
cuCtxPushCurrent(CUcontext ctx)
{
    int d;
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuCtxPushCurrent_v2, ctx);
    NEED_INIT();
    simgpu_init();
    d = ctx ? ctx_device(ctx) : -1;
    if (d < 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (t_ctx_depth == CTX_STACK_MAX)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        t_ctx_stack[t_ctx_depth++] = simgpu_context(simgpu_current_device());
        simgpu_set_device(d);
    }
    DRV_EXIT(rc);
}

CUresult CUDAAPI
cuCtxPopCurrent(CUcontext *pctx)
{
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuCtxPopCurrent_v2, pctx);
    NEED_INIT();
    simgpu_init();
    if (!t_ctx_depth)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else {
        if (pctx)
            *pctx = simgpu_context(simgpu_current_device());
        simgpu_set_device(ctx_device(t_ctx_stack[--t_ctx_depth]));
    }
    DRV_EXIT(rc);
}

CUresult CUDAAPI
cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct simgpu_stream *s;
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuStreamGetCtx, hStream, pctx);
    NEED_INIT();
    if (!pctx)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (simgpu_stream_resolve((cudaStream_t)hStream, 0, &s) != cudaSuccess)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        *pctx = simgpu_context(simgpu_stream_device(s));
    DRV_EXIT(rc);
}

CUresult CUDAAPI
cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    struct cudaDeviceProp p;
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuDeviceGetUuid_v2, uuid, dev);
    NEED_INIT();
    if (!uuid)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!valid_device(dev))
        rc = CUDA_ERROR_INVALID_DEVICE;
    else {
        simgpu_device_props(&p, dev);
        memcpy(uuid->bytes, p.uuid.bytes, sizeof(uuid->bytes));
    }
    DRV_EXIT(rc);
}

/* ---- log callbacks: registered and kept; the simulated driver logs nothing -------------- */
struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *arg;
    struct CUlogsCallbackEntry_st *next;
};
static struct CUlogsCallbackEntry_st *g_log_cbs;
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult CUDAAPI
cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
                       CUlogsCallbackHandle *callback_out)
{
    struct CUlogsCallbackEntry_st *e;
    DRV_ENTER(cuLogsRegisterCallback, callbackFunc, userData, callback_out);
    if (!callbackFunc)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    e = malloc(sizeof(*e));
    if (!e)
        DRV_EXIT(CUDA_ERROR_OUT_OF_MEMORY);
    e->fn = callbackFunc;
    e->arg = userData;
    pthread_mutex_lock(&g_log_lock);
    e->next = g_log_cbs;
    g_log_cbs = e;
    pthread_mutex_unlock(&g_log_lock);
    if (callback_out)
        *callback_out = e;
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    struct CUlogsCallbackEntry_st **pp, *e = NULL;
    DRV_ENTER(cuLogsUnregisterCallback, callback);
    pthread_mutex_lock(&g_log_lock);
    for (pp = &g_log_cbs; *pp; pp = &(*pp)->next)
        if (*pp == callback) {
            e = *pp;
            *pp = e->next;
            break;
        }
    pthread_mutex_unlock(&g_log_lock);
    free(e);
    DRV_EXIT(e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ---- pointers ----------------------------------------------------------------------------- */
CUresult CUDAAPI
cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    void *base;
    size_t bytes;
    int dev;
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuMemGetAddressRange_v2, pbase, psize, dptr);
    NEED_INIT();
    if (simgpu_memory_range((void *)(uintptr_t)dptr, &base, &bytes, &dev) !=
        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
        rc = CUDA_ERROR_NOT_FOUND;
    else {
        if (pbase)
            *pbase = (CUdeviceptr)(uintptr_t)base;
        if (psize)
            *psize = bytes;
    }
    DRV_EXIT(rc);
}

CUresult CUDAAPI
cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    void *base = NULL;
    size_t bytes = 0;
    int dev = 0, kind;
    CUresult rc = CUDA_SUCCESS;
    DRV_ENTER(cuPointerGetAttribute, data, attribute, ptr);
    NEED_INIT();
    if (!data)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    kind = simgpu_memory_range((void *)(uintptr_t)ptr, &base, &bytes, &dev);
    /* Memory the device did not allocate is unknown to the driver. */
    if (kind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && kind != CUPTI_ACTIVITY_MEMORY_KIND_PINNED)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = simgpu_context(dev);
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data =
            kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        /* One address space: the pointer is both. */
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = dev;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = bytes;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = (unsigned long long)(uintptr_t)base;
        break;
    default:
        rc = unsupported("cuPointerGetAttribute(this attribute)");
        break;
    }
    DRV_EXIT(rc);
}

/* ---- 32-bit stream writes and memsets ------------------------------------------------------ */
struct write32 {
    uint32_t *addr;
    uint32_t value;
    size_t n;
};

static void CUDART_CB
run_write32(void *p)
{
    struct write32 *w = p;
    for (size_t i = 0; i < w->n; i++)
        w->addr[i] = w->value;
}

/* n 32-bit words at addr set to value when the stream reaches them. */
static CUresult
enqueue_write32(CUstream h, CUdeviceptr addr, uint32_t value, size_t n)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    struct write32 *w;
    if (!addr || addr % 4)
        return CUDA_ERROR_INVALID_VALUE;
    cudaError_t rc = simgpu_stream_resolve((cudaStream_t)h, 0, &s);
    if (rc != cudaSuccess)
        return cu_result_of(rc);
    w = malloc(sizeof(*w));
    op = w ? simgpu_op_new(SIMGPU_OP_HOST_FN) : NULL;
    if (!op) {
        free(w);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    w->addr = (uint32_t *)(uintptr_t)addr;
    w->value = value;
    w->n = n;
    op->u.host.fn = run_write32;
    op->u.host.arg = w;
    op->u.host.arg_bytes = sizeof(*w); /* freed with the op, also where the enqueue fails */
    return cu_result_of(simgpu_enqueue(s, op));
}

CUresult CUDAAPI
cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    DRV_ENTER(cuStreamWriteValue32_v2, stream, addr, value, flags);
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    DRV_EXIT(enqueue_write32(stream, addr, value, 1));
}

/* A memset of N 32-bit words on the device, timed and recorded as cudaMemsetAsync's. */
static CUresult
memset_d32(CUdeviceptr addr, uint32_t value, size_t n, CUstream h)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    if (!addr || addr % 4 || n > SIZE_MAX / 4)
        return CUDA_ERROR_INVALID_VALUE;
    cudaError_t rc = simgpu_stream_resolve((cudaStream_t)h, 0, &s);
    if (rc != cudaSuccess)
        return cu_result_of(rc);
    op = simgpu_memset_op_new((void *)(uintptr_t)addr, value, n * 4, 1, 1);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    simgpu_host_launch(0.5);
    return cu_result_of(simgpu_enqueue(s, op));
}

CUresult CUDAAPI
cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    DRV_ENTER(cuMemsetD32Async, dstDevice, ui, N, hStream);
    DRV_EXIT(N ? memset_d32(dstDevice, ui, N, hStream) : CUDA_SUCCESS);
}

/* ---- tensor maps: a host-side descriptor the device code would read --------------------- */
CUresult CUDAAPI
cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                       cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                       const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                       const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                       CUtensorMapFloatOOBfill oobFill)
{
    CUresult rc = CUDA_SUCCESS;
    cuuint32_t r;
    DRV_ENTER(cuTensorMapEncodeTiled, tensorMap, tensorDataType, tensorRank, globalAddress,
              globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion,
              oobFill);
    if (!tensorMap || !globalAddress || !globalDim || !boxDim || !elementStrides ||
        tensorRank < 1 || tensorRank > 5 || (tensorRank > 1 && !globalStrides) ||
        (uintptr_t)globalAddress % 16)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    for (r = 0; r < tensorRank && rc == CUDA_SUCCESS; r++)
        if (!globalDim[r] || globalDim[r] > (1ULL << 32) || !boxDim[r] || boxDim[r] > 256 ||
            !elementStrides[r] || elementStrides[r] > 8 ||
            (r + 1 < tensorRank && (globalStrides[r] % 16 || globalStrides[r] >= (1ULL << 40))))
            rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        /* The descriptor's layout is the hardware's; these words only keep the arguments. */
        memset(tensorMap, 0, sizeof(*tensorMap));
        tensorMap->opaque[0] = (cuuint64_t)(uintptr_t)globalAddress;
        tensorMap->opaque[1] = ((cuuint64_t)tensorDataType << 32) | tensorRank;
        tensorMap->opaque[2] = ((cuuint64_t)interleave << 48) | ((cuuint64_t)swizzle << 32) |
                               ((cuuint64_t)l2Promotion << 16) | (cuuint64_t)oobFill;
        for (r = 0; r < tensorRank; r++) {
            tensorMap->opaque[3 + r] = globalDim[r];
            tensorMap->opaque[8 + r] = ((cuuint64_t)boxDim[r] << 32) | elementStrides[r];
        }
        for (r = 0; r + 1 < tensorRank; r++)
            tensorMap->opaque[13 + (r < 3 ? r : 2)] ^= globalStrides[r];
    }
    DRV_EXIT(rc);
}

/* ---- what the device cannot do ---------------------------------------------------------- */
#define NOT_SUPPORTED(name, params)                                                                \
    CUresult CUDAAPI name params                                                                   \
    {                                                                                              \
        return unsupported(#name);                                                                 \
    }

NOT_SUPPORTED(cuLinkCreate, (unsigned int numOptions, CUjit_option *options, void **optionValues,
                             CUlinkState *stateOut))
NOT_SUPPORTED(cuLinkAddData,
              (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
               unsigned int numOptions, CUjit_option *options, void **optionValues))
NOT_SUPPORTED(cuLinkComplete, (CUlinkState state, void **cubinOut, size_t *sizeOut))
NOT_SUPPORTED(cuMemAddressReserve, (CUdeviceptr * ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags))
NOT_SUPPORTED(cuMemAddressFree, (CUdeviceptr ptr, size_t size))
NOT_SUPPORTED(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags))
NOT_SUPPORTED(cuMemRelease, (CUmemGenericAllocationHandle handle))
NOT_SUPPORTED(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags))
NOT_SUPPORTED(cuMemUnmap, (CUdeviceptr ptr, size_t size))
NOT_SUPPORTED(cuMemSetAccess,
              (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))
NOT_SUPPORTED(cuMemGetAllocationGranularity, (size_t * granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option))
NOT_SUPPORTED(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr))
NOT_SUPPORTED(cuMemGetAllocationPropertiesFromHandle,
              (CUmemAllocationProp * prop, CUmemGenericAllocationHandle handle))
NOT_SUPPORTED(cuMemExportToShareableHandle,
              (void *shareableHandle, CUmemGenericAllocationHandle handle,
               CUmemAllocationHandleType handleType, unsigned long long flags))
NOT_SUPPORTED(cuMemImportFromShareableHandle,
              (CUmemGenericAllocationHandle * handle, void *osHandle,
               CUmemAllocationHandleType shHandleType))
NOT_SUPPORTED(cuMulticastCreate,
              (CUmemGenericAllocationHandle * mcHandle, const CUmulticastObjectProp *prop))
NOT_SUPPORTED(cuMulticastAddDevice, (CUmemGenericAllocationHandle mcHandle, CUdevice dev))
NOT_SUPPORTED(cuMulticastBindMem, (CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                   CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                   size_t size, unsigned long long flags))
NOT_SUPPORTED(cuMulticastUnbind,
              (CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, size_t size))
NOT_SUPPORTED(cuGreenCtxCreate,
              (CUgreenCtx * phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags))
NOT_SUPPORTED(cuGreenCtxDestroy, (CUgreenCtx hCtx))
NOT_SUPPORTED(cuGreenCtxStreamCreate,
              (CUstream * phStream, CUgreenCtx greenCtx, unsigned int flags, int priority))
NOT_SUPPORTED(cuCtxFromGreenCtx, (CUcontext * pContext, CUgreenCtx hCtx))
NOT_SUPPORTED(cuDeviceGetDevResource,
              (CUdevice device, CUdevResource *resource, CUdevResourceType type))
NOT_SUPPORTED(cuDevSmResourceSplitByCount,
              (CUdevResource * result, unsigned int *nbGroups, const CUdevResource *input,
               CUdevResource *remaining, unsigned int useFlags, unsigned int minCount))
NOT_SUPPORTED(cuDevResourceGenerateDesc,
              (CUdevResourceDesc * phDesc, CUdevResource *resources, unsigned int nbResources))

/* The names without _v2 that cuda.h maps onto the _v2 functions; the real library exports
 * both, with these signatures.  cuMemGetAddressRange's first version has 32-bit pointers
 * and sizes: not served. */
__asm__(".globl cuCtxPushCurrent\n.set cuCtxPushCurrent, cuCtxPushCurrent_v2\n"
        ".globl cuCtxPopCurrent\n.set cuCtxPopCurrent, cuCtxPopCurrent_v2\n"
        ".globl cuDeviceGetUuid\n.set cuDeviceGetUuid, cuDeviceGetUuid_v2\n"
        ".globl cuStreamWriteValue32\n.set cuStreamWriteValue32, cuStreamWriteValue32_v2\n"
        ".globl cuLinkCreate\n.set cuLinkCreate, cuLinkCreate_v2\n"
        ".globl cuLinkAddData\n.set cuLinkAddData, cuLinkAddData_v2\n");
CUresult CUDAAPI cuMemGetAddressRange_v1(unsigned int *pbase, unsigned int *psize,
                                         unsigned int dptr) __asm__("cuMemGetAddressRange");
CUresult CUDAAPI
cuMemGetAddressRange_v1(unsigned int *pbase, unsigned int *psize, unsigned int dptr)
{
    (void)pbase;
    (void)psize;
    (void)dptr;
    return unsupported("cuMemGetAddressRange (32-bit, before CUDA 3.2)");
}
