/* attrs.cu: cudaFuncGetAttributes from the kernels' cubin (registers, shared and local
 * memory, __launch_bounds__), occupancy queries (also the header's template
 * cudaOccupancyMaxPotentialBlockSize, which calls them), cudaFuncSetAttribute and
 * cudaFuncSetCacheConfig. */
#include "check.h"

__global__ void
small(float *x)
{
    x[threadIdx.x] += 1.0f;
}

__global__ void __launch_bounds__(128) bounded(float *x)
{
    x[threadIdx.x] = 1.0f;
}

__global__ void
staged(double *y)
{
    __shared__ double s[1024];
    s[threadIdx.x] = y[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = s[1023 - threadIdx.x];
}

__global__ void
dynamic(float *x)
{
    extern __shared__ float buf[];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

static void
not_a_kernel(void)
{
}

int
main(void)
{
    struct cudaFuncAttributes a;
    int blocks = -1, min_grid = 0, block = 0, sms = 0;
    size_t dyn = 0;
    CU_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

    CU_OK(cudaFuncGetAttributes(&a, (const void *)small));
    CU_CHECK(a.numRegs > 0 && a.numRegs <= 32);
    CU_CHECK(a.maxThreadsPerBlock == 1024 && a.sharedSizeBytes == 0);
    CU_CHECK(a.maxDynamicSharedSizeBytes == 48 * 1024);
    CU_CHECK(a.binaryVersion == 90 && a.ptxVersion == 90);
    CU_OK(cudaFuncGetAttributes(&a, (const void *)bounded));
    CU_CHECK(a.maxThreadsPerBlock == 128);
    CU_OK(cudaFuncGetAttributes(&a, (const void *)staged));
    CU_CHECK(a.sharedSizeBytes == 1024 * sizeof(double));
    CU_CHECK(a.maxDynamicSharedSizeBytes == 48 * 1024 - 8192);
    CU_CHECK(cudaFuncGetAttributes(&a, (const void *)not_a_kernel) ==
             cudaErrorInvalidDeviceFunction);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction);

    /* small: 256 threads are 8 warps; 2048 threads per SM give 8 blocks */
    CU_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)small, 256, 0));
    CU_CHECK(blocks == 8);
    CU_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)small, 32, 0));
    CU_CHECK(blocks == 32);
    /* more threads than __launch_bounds__ allows: none */
    CU_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)bounded, 256, 0));
    CU_CHECK(blocks == 0);
    /* 8 KiB static + 64 KiB dynamic (+ 1 KiB reserved) per block: 3 blocks in 228 KiB */
    CU_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &blocks, (const void *)staged, 128, 64 * 1024, cudaOccupancyDisableCachingOverride));
    CU_CHECK(blocks == 3);
    CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                 &blocks, (const void *)small, 256, 0, 7) == cudaErrorInvalidValue);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidValue); /* and clears it */
    CU_OK(cudaOccupancyAvailableDynamicSMemPerBlock(&dyn, (const void *)dynamic, 2, 256));
    CU_CHECK(dyn == 48 * 1024); /* the default limit: the opt-in would allow more */

    CU_OK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, small, 0, 0));
    CU_CHECK(block > 0 && block <= 1024 && block % 32 == 0);
    CU_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)small, block, 0));
    CU_CHECK(min_grid == blocks * sms);

    /* launches past the kernel's limits fail (nothing left from before) */
    CU_OK(cudaGetLastError());
    dynamic<<<1, 256, 100 * 1024>>>(NULL);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    bounded<<<1, 256>>>(NULL);
    CU_CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources);
    bounded<<<1, 128>>>(NULL);
    CU_OK(cudaGetLastError());

    /* more dynamic shared memory by opt-in, within the device's limit only */
    CU_OK(cudaFuncSetAttribute((const void *)dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               100 * 1024));
    CU_OK(cudaFuncGetAttributes(&a, (const void *)dynamic));
    CU_CHECK(a.maxDynamicSharedSizeBytes == 100 * 1024);
    CU_CHECK(cudaFuncSetAttribute((const void *)dynamic,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  300 * 1024) == cudaErrorInvalidValue);
    CU_CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    dynamic<<<1, 256, 100 * 1024>>>(NULL);
    CU_OK(cudaGetLastError());
    CU_OK(cudaFuncSetAttribute((const void *)dynamic,
                               cudaFuncAttributePreferredSharedMemoryCarveout, 50));
    CU_OK(cudaFuncGetAttributes(&a, (const void *)dynamic));
    CU_CHECK(a.preferredShmemCarveout == 50);
    /* a cooperative grid must be resident at once: 8 blocks of 256 threads per SM */
    {
        float *x = NULL;
        void *args[] = {&x};
        CU_OK(
            cudaLaunchCooperativeKernel((const void *)small, dim3(8 * sms), dim3(256), args, 0, 0));
        CU_CHECK(cudaLaunchCooperativeKernel((const void *)small, dim3(8 * sms + 1), dim3(256),
                                             args, 0, 0) == cudaErrorCooperativeLaunchTooLarge);
        (void)cudaGetLastError();
    }
    CU_OK(cudaFuncSetCacheConfig((const void *)small, cudaFuncCachePreferShared));
    CU_CHECK(cudaFuncSetCacheConfig((const void *)not_a_kernel, cudaFuncCachePreferShared) ==
             cudaErrorInvalidDeviceFunction);
    CU_OK(cudaDeviceSynchronize());
    CU_DONE();
}
