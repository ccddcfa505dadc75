/*
 * hook_driver.c: the CUDA driver launches the collector interposes (cuLaunchKernel,
 * cuLaunchKernelEx and their per-thread-stream variants): JIT compilers such as Triton
 * launch there, not through the runtime. The kernel name comes from cuFuncGetName, called
 * in the hook the first time a handle is seen (the record carries the text). The context
 * switches (cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent) pass through, telling the
 * stream-id cache that the thread's device may have changed.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <cuda.h>

#include "collector.h"

typedef CUresult (*drv_func_get_name_fn)(const char **name, CUfunction f);

/* Returns the name of a kernel the first time its handle is seen (NULL after, or when the
 * driver cannot tell): resolved here, on the application's thread, while the handle is
 * valid for sure. */
static const char *
drv_first_name(CUfunction f)
{
    static void *slot;
    const char *name = NULL;
    if (!coll_func_first_sight(f))
        return NULL;
    drv_func_get_name_fn get =
        (drv_func_get_name_fn)coll_real(COLL_LIB_CUDA, "cuFuncGetName", &slot);
    if (get == NULL || get(&name, f) != CUDA_SUCCESS)
        name = NULL;
    return name;
}

/* Emits a driver launch record, with a sampled call stack when stacks are on, else with
 * the kernel's name the first time its handle is seen (a record carries one or the other;
 * a handle first seen on a sampled launch gets its name on the writer thread). */
static void
drv_emit(struct coll_thread *t, struct coll_rec *rec, CUfunction f)
{
    if (coll_unlikely(coll_cfg.stacks)) {
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
    coll_rec_emit_named(t, rec, drv_first_name(f));
}

/*
 * The driver's context switches change the calling thread's current device: passed
 * through, not recorded; the device the stream-id cache keeps for the thread is dropped.
 */
#define DRV_CTX_SWITCH(name, params, args)                                                         \
    COLL_EXPORT CUresult name params;                                                              \
    COLL_EXPORT CUresult name params                                                               \
    {                                                                                              \
        static void *slot;                                                                         \
        typedef CUresult(*real_fn) params;                                                         \
        real_fn real = (real_fn)coll_real(COLL_LIB_CUDA, #name, &slot);                            \
        if (coll_unlikely(real == NULL))                                                           \
            return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;                                           \
        CUresult rc = real args;                                                                   \
        coll_device_changed();                                                                     \
        return rc;                                                                                 \
    }

DRV_CTX_SWITCH(cuCtxSetCurrent, (CUcontext ctx), (ctx))
DRV_CTX_SWITCH(cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))
DRV_CTX_SWITCH(cuCtxPopCurrent_v2, (CUcontext * pctx), (pctx))

#define DRV_LAUNCH_PARAMS                                                                          \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,            \
     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                       \
     unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
#define DRV_LAUNCH_ARGS                                                                            \
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,    \
     kernelParams, extra)
#define DRV_EX_PARAMS                                                                              \
    (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
#define DRV_EX_ARGS (config, f, kernelParams, extra)

/*
 * DRV_HOOK(name, ptsz, params, args, fill...): the driver twin of RT_HOOK (see
 * hook_cudart.c): a missing libcuda answers CUDA_ERROR_SHARED_OBJECT_INIT_FAILED.
 */
#define DRV_HOOK(name, ptsz, params, args, ...)                                                    \
    COLL_EXPORT CUresult name params;                                                              \
    COLL_EXPORT CUresult name params                                                               \
    {                                                                                              \
        COLL_HOOK_BEGIN(CUresult, COLL_LIB_CUDA, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,             \
                        coll_cfg.cuda, name, params, args);                                        \
        rec.flags = COLL_REC_CUFUNC | ((ptsz) ? COLL_REC_PTSZ : 0);                                \
        rec.a0 = (uint64_t)(uintptr_t)f;                                                           \
        __VA_ARGS__;                                                                               \
        drv_emit(t, &rec, f);                                                                      \
        COLL_HOOK_END;                                                                             \
    }

#define DRV_LAUNCH_FILL(ptsz)                                                                      \
    rec.a1 = (uint64_t)gridDimX | ((uint64_t)gridDimY << 32);                                      \
    rec.a2 = (uint64_t)gridDimZ | ((uint64_t)blockDimX << 32);                                     \
    rec.a3 = (uint64_t)blockDimY | ((uint64_t)blockDimZ << 32);                                    \
    rec.u0 = sharedMemBytes;                                                                       \
    rec.stream = coll_stream_id(t, hStream, ptsz)

#define DRV_EX_FILL(ptsz)                                                                          \
    if (config) {                                                                                  \
        rec.a1 = (uint64_t)config->gridDimX | ((uint64_t)config->gridDimY << 32);                  \
        rec.a2 = (uint64_t)config->gridDimZ | ((uint64_t)config->blockDimX << 32);                 \
        rec.a3 = (uint64_t)config->blockDimY | ((uint64_t)config->blockDimZ << 32);                \
        rec.u0 = config->sharedMemBytes;                                                           \
        rec.stream = coll_stream_id(t, config->hStream, ptsz);                                     \
    }

#undef cuLaunchKernel
#undef cuLaunchKernelEx

DRV_HOOK(cuLaunchKernel, 0, DRV_LAUNCH_PARAMS, DRV_LAUNCH_ARGS, DRV_LAUNCH_FILL(0))
DRV_HOOK(cuLaunchKernel_ptsz, 1, DRV_LAUNCH_PARAMS, DRV_LAUNCH_ARGS, DRV_LAUNCH_FILL(1))
DRV_HOOK(cuLaunchKernelEx, 0, DRV_EX_PARAMS, DRV_EX_ARGS, DRV_EX_FILL(0))
DRV_HOOK(cuLaunchKernelEx_ptsz, 1, DRV_EX_PARAMS, DRV_EX_ARGS, DRV_EX_FILL(1))
