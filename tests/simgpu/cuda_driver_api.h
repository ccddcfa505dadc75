/* cuda_driver_api.h: the entry and exit of every libcuda.so.1 stand-in call (cuda_driver.c,
 * cuda_driver_torch.c, cuda_driver_triton.c): the CUPTI driver-API callback and activity
 * record around it, and the check that the driver is initialised (cuInit, or the runtime's
 * first call). */
#ifndef SIMGPU_CUDA_DRIVER_API_H
#define SIMGPU_CUDA_DRIVER_API_H

#include <cuda.h>

#include "simgpu_internal.h"

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
