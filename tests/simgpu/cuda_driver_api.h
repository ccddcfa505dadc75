/* cuda_driver_api.h: the entry and exit of every libcuda.so.1 stand-in call (cuda_driver.c,
 * cuda_driver_torch.c, cuda_driver_triton.c): the CUPTI driver-API callback and activity
 * record around it, and the check that the driver is initialised (cuInit, or the runtime's
 * first call). */
#ifndef SIMGPU_CUDA_DRIVER_API_H
#define SIMGPU_CUDA_DRIVER_API_H

#include <cuda.h>

#include "simgpu_internal.h"

/* The driver API's result for the runtime error e of the device's own calls (a stream
 * resolved, an op enqueued, a device's sticky error), as libcuda returns it for the same
 * failure: the one mapping of every libcuda stand-in call. */
static inline CUresult
cu_result_of(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return CUDA_SUCCESS;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
        return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice:
        return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDeviceFunction:
        return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorNotReady:
        return CUDA_ERROR_NOT_READY;
    case cudaErrorLaunchFailure:
        return CUDA_ERROR_LAUNCH_FAILED;
    case cudaErrorLaunchOutOfResources:
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    case cudaErrorLaunchTimeout:
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    case cudaErrorIllegalAddress:
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    case cudaErrorIllegalState:
        return CUDA_ERROR_ILLEGAL_STATE;
    case cudaErrorNotPermitted:
        return CUDA_ERROR_NOT_PERMITTED;
    case cudaErrorStreamCaptureUnsupported:
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    case cudaErrorStreamCaptureInvalidated:
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    case cudaErrorStreamCaptureUnjoined:
        return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    case cudaErrorStreamCaptureIsolation:
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    case cudaErrorStreamCaptureImplicit:
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    case cudaErrorSymbolNotFound:
        return CUDA_ERROR_NOT_FOUND;
    case cudaErrorInvalidKernelImage:
        return CUDA_ERROR_INVALID_IMAGE;
    case cudaErrorNotSupported:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_UNKNOWN;
    }
}

/* Ends the call a: its exit callback and record carry rc; returns rc. */
static inline CUresult
drv_exit(struct simgpu_api *a, CUresult rc)
{
    int r = (int)rc;
    simgpu_api_exit(a, &r);
    return rc;
}

/* Opens call fn with its parameters (CUPTI's fn_params), naming kernel sym for launches. */
#define DRV_ENTER_SYM(fn, sym, ...)                                                                \
    fn##_params p__ = {__VA_ARGS__};                                                               \
    struct simgpu_api api__;                                                                       \
    simgpu_api_enter(&api__, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##fn, #fn, &p__,  \
                     sym)
#define DRV_ENTER(fn, ...) DRV_ENTER_SYM(fn, NULL, __VA_ARGS__)
#define DRV_EXIT(rc) return drv_exit(&api__, (rc))
#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!simgpu_driver_is_init())                                                              \
            DRV_EXIT(CUDA_ERROR_NOT_INITIALIZED);                                                  \
    } while (0)

#endif /* SIMGPU_CUDA_DRIVER_API_H */
