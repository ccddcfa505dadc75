/*
 * hook_cudart.c: the CUDA runtime API calls the collector interposes.
 *
 * Every hook follows one pattern (RT_HOOK): resolve the real function once; if it is
 * missing, answer cudaErrorSharedObjectInitFailed; if the thread must not record (inside
 * another hook, recording off), pass the call through; else stamp the clock, arm the CUPTI
 * correlation catch, call the real function, stamp again, fill one record and emit it.
 * errno and the return value are the real function's.
 *
 * The _ptsz/_ptds variants (what code built with --default-stream per-thread calls) are
 * interposed too; stream 0 in them means the calling thread's default stream.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "collector.h"

typedef cudaError_t (*rt_get_device_fn)(int *);

/* Returns the current device of the calling thread (0 if the runtime cannot say). */
static uint32_t
rt_current_device(void)
{
    static void *slot;
    rt_get_device_fn fn = (rt_get_device_fn)coll_real(COLL_LIB_CUDART, "cudaGetDevice", &slot);
    int dev = 0;
    if (fn == NULL || fn(&dev) != cudaSuccess)
        return 0;
    return (uint32_t)dev;
}

typedef cudaError_t (*rt_set_device_fn)(int);

/* cudaSetDevice: passed through, not recorded; the calling thread's current device, which
 * the stream ids of the legacy and per-thread handles depend on, is asked again. */
COLL_EXPORT cudaError_t cudaSetDevice(int device);
COLL_EXPORT cudaError_t
cudaSetDevice(int device)
{
    static void *slot;
    rt_set_device_fn real = (rt_set_device_fn)coll_real(COLL_LIB_CUDART, "cudaSetDevice", &slot);
    if (coll_unlikely(real == NULL))
        return cudaErrorSharedObjectInitFailed;
    cudaError_t rc = real(device);
    coll_device_changed();
    return rc;
}

/* Emits rec, with a call stack when stacks are on and this launch is sampled. */
static inline void
rt_emit(struct coll_thread *t, struct coll_rec *rec, int with_stack)
{
    if (coll_unlikely(with_stack && coll_cfg.stacks)) {
        uintptr_t frames[COLL_STACK_MAX];
        uint32_t nframes = 0;
        uint32_t slots = stk_capture(t, frames, &nframes);
        if (slots) {
            rec->flags |= COLL_REC_FRAMES;
            rec->ncont = (uint8_t)slots;
            rec->a4 = nframes;
            coll_rec_emit(t, rec, frames, nframes * sizeof(uintptr_t));
            return;
        }
    }
    coll_rec_emit(t, rec, NULL, 0);
}

/* Packs launch dimensions into a record. */
static inline void
rt_dims(struct coll_rec *rec, dim3 grid, dim3 block, size_t shmem)
{
    rec->a1 = (uint64_t)grid.x | ((uint64_t)grid.y << 32);
    rec->a2 = (uint64_t)grid.z | ((uint64_t)block.x << 32);
    rec->a3 = (uint64_t)block.y | ((uint64_t)block.z << 32);
    rec->u0 = (uint32_t)shmem;
}

/*
 * RT_HOOK(name, stack, params, args, fill...): defines the exported hook `name` with
 * parameter list params and argument list args. fill runs after the real call with `rec`
 * (the record), `t` (thread state) and `rc` (the result) in scope. stack: 1 when the call
 * is a launch site that may carry a call stack.
 */
#define RT_HOOK(name, stack, params, args, ...)                                                    \
    COLL_EXPORT cudaError_t name params;                                                           \
    COLL_EXPORT cudaError_t name params                                                            \
    {                                                                                              \
        COLL_HOOK_BEGIN(cudaError_t, COLL_LIB_CUDART, cudaErrorSharedObjectInitFailed,             \
                        coll_cfg.cuda, name, params, args);                                        \
        __VA_ARGS__;                                                                               \
        rt_emit(t, &rec, stack);                                                                   \
        COLL_HOOK_END;                                                                             \
    }

#define RT_STREAM(s, ptsz) rec.stream = coll_stream_id(t, (const void *)(s), ptsz)

/* ---- launches ------------------------------------------------------------------------- */

#define RT_LAUNCH_PARAMS                                                                           \
    (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,                 \
     cudaStream_t stream)
#define RT_LAUNCH_ARGS (func, gridDim, blockDim, args, sharedMem, stream)

RT_HOOK(cudaLaunchKernel, 1, RT_LAUNCH_PARAMS, RT_LAUNCH_ARGS, rec.a0 = (uint64_t)(uintptr_t)func;
        rt_dims(&rec, gridDim, blockDim, sharedMem); RT_STREAM(stream, 0))
RT_HOOK(cudaLaunchKernel_ptsz, 1, RT_LAUNCH_PARAMS, RT_LAUNCH_ARGS,
        rec.a0 = (uint64_t)(uintptr_t)func;
        rec.flags = COLL_REC_PTSZ; rt_dims(&rec, gridDim, blockDim, sharedMem);
        RT_STREAM(stream, 1))
RT_HOOK(cudaLaunchCooperativeKernel, 1, RT_LAUNCH_PARAMS, RT_LAUNCH_ARGS,
        rec.a0 = (uint64_t)(uintptr_t)func;
        rt_dims(&rec, gridDim, blockDim, sharedMem); RT_STREAM(stream, 0))
RT_HOOK(cudaLaunchCooperativeKernel_ptsz, 1, RT_LAUNCH_PARAMS, RT_LAUNCH_ARGS,
        rec.a0 = (uint64_t)(uintptr_t)func;
        rec.flags = COLL_REC_PTSZ; rt_dims(&rec, gridDim, blockDim, sharedMem);
        RT_STREAM(stream, 1))

/* What nvcc of CUDA 13 emits for <<<>>>: a cudaKernel_t from __cudaGetKernel, then
 * __cudaLaunchKernel. */
#define RT_KLAUNCH_PARAMS                                                                          \
    (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,              \
     cudaStream_t stream)
#define RT_KLAUNCH_ARGS (kernel, gridDim, blockDim, args, sharedMem, stream)

RT_HOOK(__cudaLaunchKernel, 1, RT_KLAUNCH_PARAMS, RT_KLAUNCH_ARGS,
        rec.a0 = (uint64_t)(uintptr_t)kernel;
        rec.flags = COLL_REC_HANDLE; rt_dims(&rec, gridDim, blockDim, sharedMem);
        RT_STREAM(stream, 0))
RT_HOOK(__cudaLaunchKernel_ptsz, 1, RT_KLAUNCH_PARAMS, RT_KLAUNCH_ARGS,
        rec.a0 = (uint64_t)(uintptr_t)kernel;
        rec.flags = COLL_REC_HANDLE | COLL_REC_PTSZ; rt_dims(&rec, gridDim, blockDim, sharedMem);
        RT_STREAM(stream, 1))

COLL_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);

/* Passes through, remembering which host function a cudaKernel_t stands for (names). */
COLL_EXPORT cudaError_t
__cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    static void *slot;
    typedef cudaError_t (*real_fn)(cudaKernel_t *, const void *);
    real_fn real = (real_fn)coll_real(COLL_LIB_CUDART, "__cudaGetKernel", &slot);
    if (real == NULL)
        return cudaErrorSharedObjectInitFailed;
    cudaError_t rc = real(kernel, func);
    if (rc == cudaSuccess && kernel && *kernel) {
        int saved = errno;
        coll_kernel_handle_add(*kernel, func);
        errno = saved;
    }
    return rc;
}

#define RT_EXC_PARAMS (const cudaLaunchConfig_t *config, const void *func, void **args)
#define RT_EXC_ARGS (config, func, args)

/* Fills a record from a cudaLaunchConfig_t. */
static inline void
rt_config(struct coll_thread *t, struct coll_rec *rec, const cudaLaunchConfig_t *config, int ptsz)
{
    if (config == NULL)
        return;
    rt_dims(rec, config->gridDim, config->blockDim, config->dynamicSmemBytes);
    rec->stream = coll_stream_id(t, config->stream, ptsz);
}

RT_HOOK(cudaLaunchKernelExC, 1, RT_EXC_PARAMS, RT_EXC_ARGS, rec.a0 = (uint64_t)(uintptr_t)func;
        rt_config(t, &rec, config, 0))
RT_HOOK(cudaLaunchKernelExC_ptsz, 1, RT_EXC_PARAMS, RT_EXC_ARGS, rec.a0 = (uint64_t)(uintptr_t)func;
        rec.flags = COLL_REC_PTSZ; rt_config(t, &rec, config, 1))

RT_HOOK(cudaGraphLaunch, 1, (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream),
        rec.a0 = (uint64_t)(uintptr_t)graphExec;
        RT_STREAM(stream, 0))
RT_HOOK(cudaGraphLaunch_ptsz, 1, (cudaGraphExec_t graphExec, cudaStream_t stream),
        (graphExec, stream), rec.a0 = (uint64_t)(uintptr_t)graphExec;
        rec.flags = COLL_REC_PTSZ; RT_STREAM(stream, 1))

/* ---- copies and memsets ----------------------------------------------------------------- */

#define RT_MEMCPY_FILL(ptsz)                                                                       \
    rec.a0 = (uint64_t)(uintptr_t)dst;                                                             \
    rec.a1 = (uint64_t)(uintptr_t)src;                                                             \
    rec.a2 = count;                                                                                \
    rec.u0 = (uint32_t)kind;                                                                       \
    rec.flags = (ptsz) ? COLL_REC_PTSZ : 0

RT_HOOK(cudaMemcpy, 0, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
        (dst, src, count, kind), RT_MEMCPY_FILL(0);
        RT_STREAM(0, 0))
RT_HOOK(cudaMemcpy_ptds, 0, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
        (dst, src, count, kind), RT_MEMCPY_FILL(1);
        RT_STREAM(0, 1))
RT_HOOK(cudaMemcpyAsync, 0,
        (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
        (dst, src, count, kind, stream), RT_MEMCPY_FILL(0);
        RT_STREAM(stream, 0))
RT_HOOK(cudaMemcpyAsync_ptsz, 0,
        (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
        (dst, src, count, kind, stream), RT_MEMCPY_FILL(1);
        RT_STREAM(stream, 1))

#define RT_MEMCPY2D_PARAMS                                                                         \
    (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,        \
     enum cudaMemcpyKind kind)
#define RT_MEMCPY2DA_PARAMS                                                                        \
    (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,        \
     enum cudaMemcpyKind kind, cudaStream_t stream)

RT_HOOK(cudaMemcpy2D, 0, RT_MEMCPY2D_PARAMS, (dst, dpitch, src, spitch, width, height, kind),
        size_t count = width * height;
        RT_MEMCPY_FILL(0); RT_STREAM(0, 0))
RT_HOOK(cudaMemcpy2DAsync, 0, RT_MEMCPY2DA_PARAMS,
        (dst, dpitch, src, spitch, width, height, kind, stream), size_t count = width * height;
        RT_MEMCPY_FILL(0); RT_STREAM(stream, 0))
RT_HOOK(cudaMemcpy2DAsync_ptsz, 0, RT_MEMCPY2DA_PARAMS,
        (dst, dpitch, src, spitch, width, height, kind, stream), size_t count = width * height;
        RT_MEMCPY_FILL(1); RT_STREAM(stream, 1))

RT_HOOK(cudaMemcpyPeer, 0, (void *dst, int dstDevice, const void *src, int srcDevice, size_t count),
        (dst, dstDevice, src, srcDevice, count), enum cudaMemcpyKind kind = cudaMemcpyDefault;
        RT_MEMCPY_FILL(0); RT_STREAM(0, 0))
RT_HOOK(cudaMemcpyPeerAsync, 0,
        (void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
         cudaStream_t stream),
        (dst, dstDevice, src, srcDevice, count, stream),
        enum cudaMemcpyKind kind = cudaMemcpyDefault;
        RT_MEMCPY_FILL(0); RT_STREAM(stream, 0))

#define RT_MEMSET_FILL(ptsz)                                                                       \
    rec.a0 = (uint64_t)(uintptr_t)devPtr;                                                          \
    rec.a2 = count;                                                                                \
    rec.u0 = (uint32_t)value;                                                                      \
    rec.flags = (ptsz) ? COLL_REC_PTSZ : 0

RT_HOOK(cudaMemset, 0, (void *devPtr, int value, size_t count), (devPtr, value, count),
        RT_MEMSET_FILL(0);
        RT_STREAM(0, 0))
RT_HOOK(cudaMemset_ptds, 0, (void *devPtr, int value, size_t count), (devPtr, value, count),
        RT_MEMSET_FILL(1);
        RT_STREAM(0, 1))
RT_HOOK(cudaMemsetAsync, 0, (void *devPtr, int value, size_t count, cudaStream_t stream),
        (devPtr, value, count, stream), RT_MEMSET_FILL(0);
        RT_STREAM(stream, 0))
RT_HOOK(cudaMemsetAsync_ptsz, 0, (void *devPtr, int value, size_t count, cudaStream_t stream),
        (devPtr, value, count, stream), RT_MEMSET_FILL(1);
        RT_STREAM(stream, 1))

/* ---- memory ------------------------------------------------------------------------------ */

#define RT_ALLOC_FILL(ptr, size, space)                                                            \
    rec.a0 = (rc == cudaSuccess && (ptr)) ? (uint64_t)(uintptr_t) * (ptr) : 0;                     \
    rec.a2 = (size);                                                                               \
    rec.u0 = (space);                                                                              \
    rec.u1 = DPRO_MEM_ALLOC;                                                                       \
    rec.u2 = rt_current_device();                                                                  \
    rec.corr = 0
#define RT_FREE_FILL(ptr, space)                                                                   \
    rec.a0 = (uint64_t)(uintptr_t)(ptr);                                                           \
    rec.u0 = (space);                                                                              \
    rec.u1 = DPRO_MEM_FREE;                                                                        \
    rec.u2 = rt_current_device();                                                                  \
    rec.corr = 0

RT_HOOK(cudaMalloc, 0, (void **devPtr, size_t size), (devPtr, size),
        RT_ALLOC_FILL(devPtr, size, DPRO_MEMSPACE_DEVICE))
RT_HOOK(cudaMallocHost, 0, (void **ptr, size_t size), (ptr, size),
        RT_ALLOC_FILL(ptr, size, DPRO_MEMSPACE_HOST_PINNED))
RT_HOOK(cudaHostAlloc, 0, (void **pHost, size_t size, unsigned int flags), (pHost, size, flags),
        RT_ALLOC_FILL(pHost, size, DPRO_MEMSPACE_HOST_PINNED))
RT_HOOK(cudaMallocManaged, 0, (void **devPtr, size_t size, unsigned int flags),
        (devPtr, size, flags), RT_ALLOC_FILL(devPtr, size, DPRO_MEMSPACE_MANAGED))
RT_HOOK(cudaMallocAsync, 0, (void **devPtr, size_t size, cudaStream_t hStream),
        (devPtr, size, hStream), RT_ALLOC_FILL(devPtr, size, DPRO_MEMSPACE_ASYNC_POOL);
        RT_STREAM(hStream, 0))
RT_HOOK(cudaMallocAsync_ptsz, 0, (void **devPtr, size_t size, cudaStream_t hStream),
        (devPtr, size, hStream), RT_ALLOC_FILL(devPtr, size, DPRO_MEMSPACE_ASYNC_POOL);
        RT_STREAM(hStream, 1))
RT_HOOK(cudaFree, 0, (void *devPtr), (devPtr), RT_FREE_FILL(devPtr, DPRO_MEMSPACE_DEVICE))
RT_HOOK(cudaFreeHost, 0, (void *ptr), (ptr), RT_FREE_FILL(ptr, DPRO_MEMSPACE_HOST_PINNED))
RT_HOOK(cudaFreeAsync, 0, (void *devPtr, cudaStream_t hStream), (devPtr, hStream),
        RT_FREE_FILL(devPtr, DPRO_MEMSPACE_ASYNC_POOL);
        RT_STREAM(hStream, 0))
RT_HOOK(cudaFreeAsync_ptsz, 0, (void *devPtr, cudaStream_t hStream), (devPtr, hStream),
        RT_FREE_FILL(devPtr, DPRO_MEMSPACE_ASYNC_POOL);
        RT_STREAM(hStream, 1))

/* ---- streams, events, synchronisation -------------------------------------------------- */

#define RT_STREAM_CREATE_FILL(flags, prio)                                                         \
    rec.corr = 0;                                                                                  \
    rec.u0 = (flags);                                                                              \
    rec.u1 = (uint32_t)(prio);                                                                     \
    rec.u2 = rt_current_device();                                                                  \
    if (rc == cudaSuccess && pStream)                                                              \
    RT_STREAM(*pStream, 0)

RT_HOOK(cudaStreamCreate, 0, (cudaStream_t * pStream), (pStream), RT_STREAM_CREATE_FILL(0, 0))
RT_HOOK(cudaStreamCreateWithFlags, 0, (cudaStream_t * pStream, unsigned int flags),
        (pStream, flags), RT_STREAM_CREATE_FILL(flags, 0))
RT_HOOK(cudaStreamCreateWithPriority, 0, (cudaStream_t * pStream, unsigned int flags, int priority),
        (pStream, flags, priority), RT_STREAM_CREATE_FILL(flags, priority))

COLL_EXPORT cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
    static void *slot;
    typedef cudaError_t (*real_fn)(cudaStream_t);
    real_fn real = (real_fn)coll_real(COLL_LIB_CUDART, "cudaStreamDestroy", &slot);
    if (real == NULL)
        return cudaErrorSharedObjectInitFailed;
    struct coll_thread *t = coll_cfg.cuda ? coll_enter() : NULL;
    if (t == NULL) {
        coll_stream_forget(stream);
        return real(stream);
    }
    uint64_t id = coll_stream_id(t, stream, 0);
    uint64_t t0 = coll_stamp();
    cudaError_t rc = real(stream);
    uint64_t t1 = coll_stamp();
    int saved = errno;
    coll_stream_forget(stream);
    struct coll_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.api = COLL_API_cudaStreamDestroy;
    rec.result = (int32_t)rc;
    rec.start = t0;
    rec.end = t1;
    rec.stream = id;
    coll_rec_emit(t, &rec, NULL, 0);
    coll_leave(t);
    errno = saved;
    return rc;
}

RT_HOOK(cudaStreamSynchronize, 0, (cudaStream_t stream), (stream), RT_STREAM(stream, 0))
RT_HOOK(cudaStreamSynchronize_ptsz, 0, (cudaStream_t stream), (stream), RT_STREAM(stream, 1))
RT_HOOK(cudaStreamQuery, 0, (cudaStream_t stream), (stream), rec.corr = 0; RT_STREAM(stream, 0))
RT_HOOK(cudaStreamQuery_ptsz, 0, (cudaStream_t stream), (stream), rec.corr = 0;
        RT_STREAM(stream, 1))
RT_HOOK(cudaStreamWaitEvent, 0, (cudaStream_t stream, cudaEvent_t event, unsigned int flags),
        (stream, event, flags), rec.a0 = (uint64_t)(uintptr_t)event;
        rec.u0 = flags; RT_STREAM(stream, 0))
RT_HOOK(cudaStreamWaitEvent_ptsz, 0, (cudaStream_t stream, cudaEvent_t event, unsigned int flags),
        (stream, event, flags), rec.a0 = (uint64_t)(uintptr_t)event;
        rec.u0 = flags; RT_STREAM(stream, 1))
RT_HOOK(cudaDeviceSynchronize, 0, (void), ())

RT_HOOK(cudaEventCreate, 0, (cudaEvent_t * event), (event), rec.corr = 0;
        rec.a0 = rc == cudaSuccess && event ? (uint64_t)(uintptr_t)*event : 0)
RT_HOOK(cudaEventCreateWithFlags, 0, (cudaEvent_t * event, unsigned int flags), (event, flags),
        rec.corr = 0;
        rec.u0 = flags; rec.a0 = rc == cudaSuccess && event ? (uint64_t)(uintptr_t)*event : 0)
RT_HOOK(cudaEventDestroy, 0, (cudaEvent_t event), (event), rec.corr = 0;
        rec.a0 = (uint64_t)(uintptr_t)event)
RT_HOOK(cudaEventRecord, 0, (cudaEvent_t event, cudaStream_t stream), (event, stream),
        rec.a0 = (uint64_t)(uintptr_t)event;
        RT_STREAM(stream, 0))
RT_HOOK(cudaEventRecord_ptsz, 0, (cudaEvent_t event, cudaStream_t stream), (event, stream),
        rec.a0 = (uint64_t)(uintptr_t)event;
        RT_STREAM(stream, 1))
RT_HOOK(cudaEventRecordWithFlags, 0, (cudaEvent_t event, cudaStream_t stream, unsigned int flags),
        (event, stream, flags), rec.a0 = (uint64_t)(uintptr_t)event;
        rec.u0 = flags; RT_STREAM(stream, 0))
RT_HOOK(cudaEventRecordWithFlags_ptsz, 0,
        (cudaEvent_t event, cudaStream_t stream, unsigned int flags), (event, stream, flags),
        rec.a0 = (uint64_t)(uintptr_t)event;
        rec.u0 = flags; RT_STREAM(stream, 1))
RT_HOOK(cudaEventSynchronize, 0, (cudaEvent_t event), (event), rec.a0 = (uint64_t)(uintptr_t)event)
RT_HOOK(cudaEventQuery, 0, (cudaEvent_t event), (event), rec.corr = 0;
        rec.a0 = (uint64_t)(uintptr_t)event)
