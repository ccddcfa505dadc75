/* cuda_driver_triton.c: the rest of the libcuda.so.1 Triton's launcher (driver.c of
 * triton/backends/nvidia, compiled against libcuda by torch.compile's Inductor) imports or
 * looks up with dlsym: context limits, a stream's capture status, the cluster occupancy.
 * What the device cannot do (im2col tensor maps) answers CUDA_ERROR_NOT_SUPPORTED and says
 * once on stderr which call it was.
 *
 * Contract of every exported cu* function: the CUDA driver documentation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdlib.h>

#include <cuda.h>

#include "cuda_driver_api.h"

/* Declared by cuda.h only in per-thread mode. */
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);

/* ---- context limits ------------------------------------------------------------------- */
/* One table for the process (the primary context of each device shares it: the device
 * runs no device code, so a limit changes nothing but what is read back).  Defaults are a
 * real driver's: 1 KiB stack, 1 MiB printf FIFO, 8 MiB malloc heap, sync depth 2, 2048
 * pending launches, 64-byte L2 fetch granularity, no persisting L2. */
static pthread_mutex_t g_limit_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_limit[CU_LIMIT_PERSISTING_L2_CACHE_SIZE + 1] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

/* Whether limit l is one of the table's; the CIG limits (a context shared with a graphics
 * API) do not exist on the device's contexts. */
static int
limit_known(CUlimit l)
{
    return (int)l >= 0 && (int)l <= (int)CU_LIMIT_PERSISTING_L2_CACHE_SIZE;
}

CUresult CUDAAPI
cuCtxSetLimit(CUlimit limit, size_t value)
{
    CUresult rc = CUDA_SUCCESS;
    int l2 = 0;
    DRV_ENTER(cuCtxSetLimit, limit, value);
    NEED_INIT();
    if (!limit_known(limit))
        DRV_EXIT(CUDA_ERROR_UNSUPPORTED_LIMIT);
    if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE &&
        (simgpu_device_attr(&l2, cudaDevAttrMaxPersistingL2CacheSize, simgpu_current_device()) !=
             cudaSuccess ||
         value > (size_t)l2))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&g_limit_lock);
        g_limit[limit] = value;
        pthread_mutex_unlock(&g_limit_lock);
    }
    DRV_EXIT(rc);
}

CUresult CUDAAPI
cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    DRV_ENTER(cuCtxGetLimit, pvalue, limit);
    NEED_INIT();
    if (!pvalue)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    if (!limit_known(limit))
        DRV_EXIT(CUDA_ERROR_UNSUPPORTED_LIMIT);
    pthread_mutex_lock(&g_limit_lock);
    *pvalue = g_limit[limit];
    pthread_mutex_unlock(&g_limit_lock);
    DRV_EXIT(CUDA_SUCCESS);
}

/* ---- capture status --------------------------------------------------------------------- */
static CUresult
is_capturing_impl(CUstream h, CUstreamCaptureStatus *st, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc;
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    rc = simgpu_stream_resolve((cudaStream_t)h, ptds, &s);
    if (rc != cudaSuccess)
        return CUDA_ERROR_INVALID_HANDLE;
    *st =
        simgpu_capture_status(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    DRV_ENTER(cuStreamIsCapturing, hStream, captureStatus);
    NEED_INIT();
    DRV_EXIT(is_capturing_impl(hStream, captureStatus, 0));
}

CUresult CUDAAPI
cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    DRV_ENTER(cuStreamIsCapturing_ptsz, hStream, captureStatus);
    NEED_INIT();
    DRV_EXIT(is_capturing_impl(hStream, captureStatus, 1));
}

/* ---- cluster occupancy ------------------------------------------------------------------- */
/* Blocks of a cluster: the config's CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, else 1. */
static unsigned
cluster_blocks(const CUlaunchConfig *c)
{
    for (unsigned i = 0; c->attrs && i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            return c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y *
                   c->attrs[i].value.clusterDim.z;
    return 1;
}

/* The clusters resident at once: the kernel's blocks per SM (as
 * cuOccupancyMaxActiveBlocksPerMultiprocessor) times the SMs, in whole clusters.  A
 * cluster of more than 8 blocks (the portable size; the device allows no more) is refused
 * with CUDA_ERROR_INVALID_CLUSTER_SIZE.  Real clusters also stay within one GPC,
 * which the device does not model. */
static CUresult
active_clusters(int *num, CUfunction func, const CUlaunchConfig *c)
{
    struct simgpu_kernel *k = simgpu_kernel_handle(func);
    struct simgpu_kernel_info info;
    unsigned per = 0, threads;
    int sms = 0;
    if (!num || !c)
        return CUDA_ERROR_INVALID_VALUE;
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    per = cluster_blocks(c);
    threads = c->blockDimX * c->blockDimY * c->blockDimZ;
    if (!per || !threads)
        return CUDA_ERROR_INVALID_VALUE;
    if (per > 8)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (simgpu_device_attr(&sms, cudaDevAttrMultiProcessorCount, simgpu_current_device()) !=
        cudaSuccess)
        return CUDA_ERROR_INVALID_CONTEXT;
    simgpu_kernel_info(k, &info);
    *num = simgpu_kernel_occupancy(&info, (int)threads, c->sharedMemBytes) * sms / (int)per;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
    DRV_ENTER(cuOccupancyMaxActiveClusters, numClusters, func, config);
    NEED_INIT();
    DRV_EXIT(active_clusters(numClusters, func, config));
}

/* ---- what the device cannot do ---------------------------------------------------------- */
CUresult CUDAAPI
cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                        cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                        const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                        const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                        cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                        CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                        CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
    (void)tensorMap, (void)tensorDataType, (void)tensorRank, (void)globalAddress;
    (void)globalDim, (void)globalStrides, (void)pixelBoxLowerCorner, (void)pixelBoxUpperCorner;
    (void)channelsPerPixel, (void)pixelsPerColumn, (void)elementStrides, (void)interleave;
    (void)swizzle, (void)l2Promotion, (void)oobFill;
    simgpu_say_unsupported("cuTensorMapEncodeIm2col");
    return CUDA_ERROR_NOT_SUPPORTED;
}
