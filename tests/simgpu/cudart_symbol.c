/* cudart_symbol.c: libcudart.so.13's module variables (__device__, __constant__ and
 * __managed__ variables nvcc's host code registers) and the calls that name them by their
 * host shadow (cudaGetSymbolAddress, cudaGetSymbolSize, cudaMemcpyToSymbol[Async],
 * cudaMemcpyFromSymbol[Async]); cooperative launches; the library calls the device does
 * not serve (cudaLibraryGetGlobal, cudaLibraryGetManaged, cudaLibraryGetUnifiedFunction).
 *
 * A __device__ / __constant__ variable's device memory is allocated at its first use
 * (simgpu_malloc: CUPTI sees one allocation), zeroed: the initial value in the image is not
 * read.  A __managed__ variable is the host memory __cudaRegisterManagedVar gave it.
 *
 * Contract of every exported function: the CUDA runtime documentation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#undef __CUDA_API_VERSION_INTERNAL

#define SIMGPU_CUDART_INTERNAL
#include "simgpu_internal.h"

#define SYM_BUCKETS 1024

struct symbol {
    const void *host; /* what host code names it by */
    char *name;
    size_t size;
    void *dev;   /* device memory, NULL until first used */
    int managed; /* dev is the managed memory */
    struct symbol *next;
};

static struct symbol *g_syms[SYM_BUCKETS];
static pthread_mutex_t g_sym_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned
sym_bucket(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)(x % SYM_BUCKETS);
}

cudaError_t
rt_symbol_add(const void *host, const char *name, size_t size, void *managed)
{
    struct symbol *s = calloc(1, sizeof(*s));
    unsigned b = sym_bucket(host);
    if (!s || !(s->name = strdup(name ? name : "")))
        goto oom;
    s->host = host;
    s->size = size;
    s->dev = managed;
    s->managed = managed != NULL;
    pthread_mutex_lock(&g_sym_lock);
    s->next = g_syms[b];
    g_syms[b] = s;
    pthread_mutex_unlock(&g_sym_lock);
    return cudaSuccess;
oom:
    free(s);
    return cudaErrorMemoryAllocation;
}

/* The device memory and size of the variable host code names `symbol`, allocating it at
 * first use.  Returns cudaSuccess, cudaErrorInvalidSymbol, or the allocation's error. */
static cudaError_t
sym_resolve(const void *symbol, void **dev, size_t *size)
{
    struct symbol *s;
    cudaError_t rc = cudaErrorInvalidSymbol;
    if (!symbol)
        return cudaErrorInvalidSymbol;
    pthread_mutex_lock(&g_sym_lock);
    for (s = g_syms[sym_bucket(symbol)]; s && s->host != symbol; s = s->next)
        ;
    if (s) {
        rc = s->dev ? cudaSuccess : simgpu_malloc(&s->dev, s->size ? s->size : 1, NULL);
        if (rc == cudaSuccess) {
            *dev = s->dev;
            *size = s->size;
        }
    }
    pthread_mutex_unlock(&g_sym_lock);
    return rc;
}

cudaError_t CUDARTAPI
cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    size_t size;
    void *dev;
    cudaError_t rc;
    RT_ENTER(cudaGetSymbolAddress, v3020, devPtr, symbol);
    if (!devPtr)
        RT_EXIT(cudaErrorInvalidValue);
    rc = sym_resolve(symbol, &dev, &size);
    if (rc == cudaSuccess)
        *devPtr = dev;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaGetSymbolSize(size_t *size, const void *symbol)
{
    size_t n;
    void *dev;
    cudaError_t rc;
    RT_ENTER(cudaGetSymbolSize, v3020, size, symbol);
    if (!size)
        RT_EXIT(cudaErrorInvalidValue);
    rc = sym_resolve(symbol, &dev, &n);
    if (rc == cudaSuccess)
        *size = n;
    RT_EXIT(rc);
}

/* A copy to (`to`) or from a variable: count bytes at offset within it; the direction must
 * be from (to) the host or the device, or cudaMemcpyDefault. */
static cudaError_t
sym_copy(int to, const void *symbol, void *mem, size_t count, size_t offset,
         enum cudaMemcpyKind kind, cudaStream_t stream, int ptds, int async)
{
    void *dev;
    size_t size;
    cudaError_t rc;
    if (to ? (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
              kind != cudaMemcpyDefault)
           : (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
              kind != cudaMemcpyDefault))
        return cudaErrorInvalidMemcpyDirection;
    rc = sym_resolve(symbol, &dev, &size);
    if (rc != cudaSuccess)
        return rc;
    if (offset > size || count > size - offset)
        return cudaErrorInvalidValue;
    return to ? rt_memcpy((char *)dev + offset, mem, count, kind, stream, ptds, async)
              : rt_memcpy(mem, (const char *)dev + offset, count, kind, stream, ptds, async);
}

cudaError_t CUDARTAPI
cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                   enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpyToSymbol, v3020, symbol, src, count, offset, kind);
    RT_EXIT(sym_copy(1, symbol, (void *)src, count, offset, kind, NULL, 0, 0));
}

cudaError_t CUDARTAPI
cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                        enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpyToSymbol_ptds, v7000, symbol, src, count, offset, kind);
    RT_EXIT(sym_copy(1, symbol, (void *)src, count, offset, kind, NULL, 1, 0));
}

cudaError_t CUDARTAPI
cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                     enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpyFromSymbol, v3020, dst, symbol, count, offset, kind);
    RT_EXIT(sym_copy(0, symbol, dst, count, offset, kind, NULL, 0, 0));
}

cudaError_t CUDARTAPI
cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                          enum cudaMemcpyKind kind)
{
    RT_ENTER(cudaMemcpyFromSymbol_ptds, v7000, dst, symbol, count, offset, kind);
    RT_EXIT(sym_copy(0, symbol, dst, count, offset, kind, NULL, 1, 0));
}

cudaError_t CUDARTAPI
cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyToSymbolAsync, v3020, symbol, src, count, offset, kind, stream);
    RT_EXIT(sym_copy(1, symbol, (void *)src, count, offset, kind, stream, 0, 1));
}

cudaError_t CUDARTAPI
cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyToSymbolAsync_ptsz, v7000, symbol, src, count, offset, kind, stream);
    RT_EXIT(sym_copy(1, symbol, (void *)src, count, offset, kind, stream, 1, 1));
}

cudaError_t CUDARTAPI
cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                          enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyFromSymbolAsync, v3020, dst, symbol, count, offset, kind, stream);
    RT_EXIT(sym_copy(0, symbol, dst, count, offset, kind, stream, 0, 1));
}

cudaError_t CUDARTAPI
cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_ENTER(cudaMemcpyFromSymbolAsync_ptsz, v7000, dst, symbol, count, offset, kind, stream);
    RT_EXIT(sym_copy(0, symbol, dst, count, offset, kind, stream, 1, 1));
}

/* ---- cooperative launches ------------------------------------------------------------- */

/* A cooperative grid must be resident at once: at most the occupancy times the SMs. */
static cudaError_t
coop_impl(const void *func, const char *name, uint64_t dur, dim3 grid, dim3 block, size_t shmem,
          cudaStream_t stream, int ptds, void **args)
{
    struct cudaDeviceProp p;
    int per_sm = 0;
    cudaError_t rc;
    if (!func || !simgpu_kernel_resolve(func))
        return cudaErrorInvalidDeviceFunction;
    rc = rt_occupancy(&per_sm, func, (int)(block.x * block.y * block.z), shmem);
    simgpu_device_props(&p, simgpu_current_device());
    if (rc == cudaSuccess &&
        (uint64_t)grid.x * grid.y * grid.z > (uint64_t)per_sm * (uint64_t)p.multiProcessorCount)
        rc = cudaErrorCooperativeLaunchTooLarge;
    /* an occupancy error (a bad block) is the launch's to report */
    return rc == cudaErrorCooperativeLaunchTooLarge
               ? rc
               : rt_launch(func, name, dur, grid, block, shmem, stream, ptds, args);
}

cudaError_t CUDARTAPI
cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                            size_t sharedMem, cudaStream_t stream)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchCooperativeKernel, v9000, name, func, gridDim, blockDim, args, sharedMem,
                 stream);
    RT_EXIT(coop_impl(func, name, dur, gridDim, blockDim, sharedMem, stream, 0, args));
}

cudaError_t CUDARTAPI
cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                 size_t sharedMem, cudaStream_t stream)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (func)
        rt_kernel_lookup(func, &name, &dur);
    RT_ENTER_SYM(cudaLaunchCooperativeKernel_ptsz, v9000, name, func, gridDim, blockDim, args,
                 sharedMem, stream);
    RT_EXIT(coop_impl(func, name, dur, gridDim, blockDim, sharedMem, stream, 1, args));
}

/* ---- what libraries do not serve here ---------------------------------------------------- */
cudaError_t CUDARTAPI
cudaLibraryGetGlobal(void **dptr, size_t *bytes, cudaLibrary_t library, const char *name)
{
    RT_ENTER(cudaLibraryGetGlobal, v12060, dptr, bytes, library, name);
    simgpu_say_unsupported("cudaLibraryGetGlobal");
    RT_EXIT(cudaErrorNotSupported);
}

cudaError_t CUDARTAPI
cudaLibraryGetManaged(void **dptr, size_t *bytes, cudaLibrary_t library, const char *name)
{
    RT_ENTER(cudaLibraryGetManaged, v12060, dptr, bytes, library, name);
    simgpu_say_unsupported("cudaLibraryGetManaged");
    RT_EXIT(cudaErrorNotSupported);
}

cudaError_t CUDARTAPI
cudaLibraryGetUnifiedFunction(void **fptr, cudaLibrary_t library, const char *symbol)
{
    RT_ENTER(cudaLibraryGetUnifiedFunction, v12060, fptr, library, symbol);
    simgpu_say_unsupported("cudaLibraryGetUnifiedFunction");
    RT_EXIT(cudaErrorNotSupported);
}
