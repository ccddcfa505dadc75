/*
 * drv-job: kernel launches through the CUDA driver API, as JIT compilers (Triton) and
 * libraries with their own static runtime make them. Three launches call the exported
 * cuLaunchKernel (the collector's hook); two call libcuda's function directly (a pointer
 * from dlsym on libcuda's handle), bypassing the hook: the collector must still record
 * them through its CUPTI driver callback. Prints "launches=5" on success.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include <cuda.h>

typedef CUresult (*drv_launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void **, void **);

int
main(void)
{
    CUcontext ctx;
    CUfunction f;
    int ok = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, NULL, "triton_poi_fused_add_0") != CUDA_SUCCESS) {
        fprintf(stderr, "drv-job: no driver\n");
        return 1;
    }
    for (int i = 0; i < 3; i++)
        ok += cuLaunchKernel(f, 8, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS;
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    drv_launch_fn direct = lib ? (drv_launch_fn)dlsym(lib, "cuLaunchKernel") : NULL;
    for (int i = 0; direct && i < 2; i++)
        ok += direct(f, 16, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS;
    cuCtxSynchronize();
    printf("launches=%d\n", ok);
    return ok == 5 ? 0 : 1;
}
