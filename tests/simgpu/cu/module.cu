/* module.cu: kernels of an embedded fat binary (kmod.cu through nvcc -fatbin and bin2c)
 * loaded at run time by the runtime (cudaLibraryLoadData) and the driver
 * (cuModuleLoadData, cuLibraryLoadData), and of PTX text (cuModuleLoad of argv[1]):
 * names read from the image, launches by handle, unloading. */
#include <cuda.h>
#include <string.h>

#include "check.h"
#include "kmod_fatbin.h"

#define CU_DRV(call) CU_CHECK((call) == CUDA_SUCCESS)

int
main(int argc, char **argv)
{
    cudaLibrary_t lib;
    cudaKernel_t ka, kb, all[2] = {NULL, NULL};
    unsigned count = 0;
    const char *name = NULL;
    float *x;
    double *y;
    int n = 256, v = 0;
    void *args_a[] = {&x, &n}, *args_b[] = {&y};
    CUmodule mod, ptx;
    CUlibrary clib;
    CUkernel ck;
    CUfunction fa, fb, fc;
    static const unsigned char junk[64] = "not a device image";

    if (argc < 2) {
        fprintf(stderr, "usage: module KMOD.ptx\n");
        return 2;
    }
    CU_OK(cudaMalloc(&x, n * sizeof(float)));
    CU_OK(cudaMalloc(&y, n * sizeof(double)));

    /* the runtime's libraries */
    CU_OK(cudaLibraryLoadData(&lib, kmod_fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CU_OK(cudaLibraryGetKernelCount(&count, lib));
    CU_CHECK(count == 2);
    CU_OK(cudaLibraryEnumerateKernels(all, 2, lib));
    CU_CHECK(all[0] && all[1] && all[0] != all[1]);
    CU_OK(cudaLibraryGetKernel(&ka, lib, "kern_a"));
    CU_OK(cudaLibraryGetKernel(&kb, lib, "_Z6kern_bPd"));
    CU_CHECK(cudaLibraryGetKernel(&ka, lib, "kern_c") == cudaErrorSymbolNotFound);
    CU_OK(cudaLaunchKernel((const void *)ka, dim3(1), dim3(256), args_a, 0, 0));
    CU_OK(cudaLaunchKernel((const void *)kb, dim3(1), dim3(256), args_b, 0, 0));
    CU_OK(cudaFuncGetName(&name, (const void *)kb));
    CU_CHECK(name && !strcmp(name, "_Z6kern_bPd"));
    {
        struct cudaFuncAttributes fa_;
        CU_OK(cudaFuncGetAttributes(&fa_, (const void *)kb));
        CU_CHECK(fa_.sharedSizeBytes == 256 * sizeof(double));
        CU_CHECK(fa_.numRegs > 0 && fa_.binaryVersion == 90);
    }
    CU_OK(cudaDeviceSynchronize());
    CU_OK(cudaLibraryUnload(lib));
    CU_CHECK(cudaLaunchKernel((const void *)ka, dim3(1), dim3(256), args_a, 0, 0) != cudaSuccess);
    CU_CHECK(cudaLibraryUnload(lib) == cudaErrorInvalidResourceHandle);
    CU_CHECK(cudaLibraryLoadData(&lib, junk, NULL, NULL, 0, NULL, NULL, 0) ==
             cudaErrorInvalidKernelImage);

    /* the driver's modules and libraries */
    CU_DRV(cuInit(0));
    CU_DRV(cuModuleLoadData(&mod, kmod_fatbin));
    CU_DRV(cuModuleGetFunctionCount(&count, mod));
    CU_CHECK(count == 2);
    CU_DRV(cuModuleGetFunction(&fa, mod, "kern_a"));
    CU_DRV(cuModuleGetFunction(&fb, mod, "_Z6kern_bPd"));
    CU_CHECK(cuModuleGetFunction(&fc, mod, "kern_b") == CUDA_ERROR_NOT_FOUND);
    CU_DRV(cuFuncGetName(&name, fa));
    CU_CHECK(name && !strcmp(name, "kern_a"));
    CU_DRV(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fb));
    CU_CHECK(v == 256 * (int)sizeof(double));
    /* 256 threads: 8 blocks by the SM's 2048 threads, as the runtime answers */
    CU_DRV(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, fa, 256, 0));
    CU_CHECK(v == 8);
    CU_DRV(cuFuncSetCacheConfig(fa, CU_FUNC_CACHE_PREFER_L1));
    CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, fa, 256, 0, 9) ==
             CUDA_ERROR_INVALID_VALUE);
    CU_DRV(cuLaunchKernel(fa, 1, 1, 1, 256, 1, 1, 0, NULL, args_a, NULL));
    CU_DRV(cuLaunchKernel(fb, 1, 1, 1, 256, 1, 1, 0, NULL, args_b, NULL));
    /* more dynamic shared memory than the 48 KiB less kern_b's static 2 KiB: refused */
    CU_CHECK(cuLaunchKernel(fb, 1, 1, 1, 256, 1, 1, 47 * 1024, NULL, args_b, NULL) ==
             CUDA_ERROR_INVALID_VALUE);
    CU_DRV(cuCtxSynchronize());
    CU_DRV(cuModuleUnload(mod));
    CU_CHECK(cuLaunchKernel(fa, 1, 1, 1, 256, 1, 1, 0, NULL, args_a, NULL) ==
             CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuFuncGetName(&name, fa) == CUDA_ERROR_INVALID_HANDLE);
    CU_CHECK(cuModuleLoadData(&mod, junk) == CUDA_ERROR_INVALID_IMAGE);

    CU_DRV(cuLibraryLoadData(&clib, kmod_fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CU_DRV(cuLibraryGetKernel(&ck, clib, "kern_a"));
    CU_DRV(cuKernelGetName(&name, ck));
    CU_CHECK(name && !strcmp(name, "kern_a"));
    CU_DRV(cuKernelGetFunction(&fc, ck));
    CU_DRV(cuLaunchKernel(fc, 1, 1, 1, 256, 1, 1, 0, NULL, args_a, NULL));
    CU_DRV(cuCtxSynchronize());
    CU_DRV(cuLibraryUnload(clib));

    /* PTX: the names of its .entry directives */
    CU_DRV(cuModuleLoad(&ptx, argv[1]));
    CU_DRV(cuModuleGetFunction(&fb, ptx, "_Z6kern_bPd"));
    CU_DRV(cuLaunchKernel(fb, 1, 1, 1, 256, 1, 1, 0, NULL, args_b, NULL));
    CU_DRV(cuCtxSynchronize());
    CU_CHECK(cuModuleGetFunction(&fc, ptx, "kern_c") == CUDA_ERROR_NOT_FOUND);
    CU_DRV(cuModuleUnload(ptx));
    CU_CHECK(cuModuleLoad(&ptx, "/nonexistent/kmod.ptx") == CUDA_ERROR_FILE_NOT_FOUND);
    CU_DONE();
}
