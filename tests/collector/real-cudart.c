/*
 * real-cudart: calls a few CUDA runtime functions and prints what each returned, one
 * "name=code" line each. Linked against the real libcudart of the toolkit: on a machine
 * without a GPU every call fails, and the collector must pass those codes through
 * unchanged (the test compares the output with and without the collector).
 */
#include "config.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

void real_cudart_kernel(void);
void
real_cudart_kernel(void)
{
}

int
main(void)
{
    void *dev = NULL;
    cudaStream_t stream = NULL;
    dim3 grid = {1, 1, 1}, block = {32, 1, 1};
    char host[64];
    printf("cudaMalloc=%d\n", (int)cudaMalloc(&dev, 1 << 20));
    printf("cudaStreamCreate=%d\n", (int)cudaStreamCreate(&stream));
    printf("cudaLaunchKernel=%d\n",
           (int)cudaLaunchKernel((const void *)real_cudart_kernel, grid, block, NULL, 0, stream));
    printf("cudaMemcpy=%d\n", (int)cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
    printf("cudaMemsetAsync=%d\n", (int)cudaMemsetAsync(dev, 0, 64, stream));
    printf("cudaDeviceSynchronize=%d\n", (int)cudaDeviceSynchronize());
    printf("cudaFree=%d\n", (int)cudaFree(dev));
    return 0;
}
