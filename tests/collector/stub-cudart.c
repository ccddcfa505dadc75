/*
 * stub-cudart.c: a do-nothing CUDA runtime for the collector's tests and benchmarks
 * (libcollstub.so). Each call succeeds at once, so what a test measures or counts is the
 * collector alone. Only the calls coll-job and coll-bench make are here.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

cudaError_t
cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                 cudaStream_t stream)
{
    (void)func, (void)grid, (void)block, (void)args, (void)shmem, (void)stream;
    return cudaSuccess;
}

cudaError_t
cudaMalloc(void **ptr, size_t size)
{
    *ptr = malloc(size ? size : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t
cudaFree(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)dst, (void)src, (void)n, (void)kind, (void)stream;
    return cudaSuccess;
}

cudaError_t
cudaStreamCreate(cudaStream_t *stream)
{
    *stream = (cudaStream_t)malloc(16);
    return cudaSuccess;
}

cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
    free(stream);
    return cudaSuccess;
}

cudaError_t
cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return cudaSuccess;
}

cudaError_t
cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

cudaError_t
cudaGetDevice(int *dev)
{
    *dev = 0;
    return cudaSuccess;
}

cudaError_t
cudaStreamGetId(cudaStream_t stream, unsigned long long *id)
{
    /* the legacy (0) and per-thread (2) handles have ids of their own, as in the runtime */
    uintptr_t h = (uintptr_t)stream;
    *id = h <= 2 ? 7 + h : (h >> 4) & 0xffff;
    return cudaSuccess;
}
