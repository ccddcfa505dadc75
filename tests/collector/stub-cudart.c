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

/* A created stream's handle is a slot of a fixed pool that holds its id, one of its own,
 * as the runtime's ids are never reused, though a destroyed stream's handle is: the lowest
 * free slot comes next (a pool, not malloc, whose reuse a sanitizer's quarantine delays). */
#define STUB_STREAMS 256
static unsigned long long stub_stream_slot[STUB_STREAMS];
static int stub_stream_used[STUB_STREAMS];

cudaError_t
cudaStreamCreate(cudaStream_t *stream)
{
    static unsigned long long next_id = 100;
    for (int i = 0; i < STUB_STREAMS; i++) {
        int free_slot = 0;
        if (__atomic_compare_exchange_n(&stub_stream_used[i], &free_slot, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            stub_stream_slot[i] = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
            *stream = (cudaStream_t)&stub_stream_slot[i];
            return cudaSuccess;
        }
    }
    return cudaErrorMemoryAllocation;
}

cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
    unsigned long long *s = (unsigned long long *)stream;
    if (s < stub_stream_slot || s >= stub_stream_slot + STUB_STREAMS)
        return cudaErrorInvalidResourceHandle;
    __atomic_store_n(&stub_stream_used[s - stub_stream_slot], 0, __ATOMIC_RELEASE);
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
    *id = h <= 2 ? 7 + h : *(const unsigned long long *)stream;
    return cudaSuccess;
}
