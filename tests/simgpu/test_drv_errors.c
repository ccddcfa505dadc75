/* test_drv_errors: the libcuda.so.1 stand-in's memset and stream-write entry points
 * (cuMemsetD32Async, cuStreamWriteValue32) answer each failure with the error the driver
 * API gives for it: a misaligned address CUDA_ERROR_INVALID_VALUE, a destroyed stream
 * CUDA_ERROR_INVALID_HANDLE, and, once a collective failed on the device (a peer that
 * never arrived: SIMGPU_NCCL_TIMEOUT_S), the device's sticky error, CUDA_ERROR_LAUNCH_FAILED
 * as cudaErrorLaunchFailure is for the runtime. The communicator's two ranks are two
 * threads of this process; only rank 0 calls the all-reduce. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu_check.h"

static ncclUniqueId g_id;
static ncclComm_t g_comms[2];

/* Joins rank (intptr_t)arg of the two-rank communicator g_id. */
static void *
join_rank(void *arg)
{
    int rank = (int)(intptr_t)arg;
    CHECK(ncclCommInitRank(&g_comms[rank], 2, g_id, rank) == ncclSuccess);
    return NULL;
}

/* Misaligned, NULL or destroyed: the caller's mistakes, answered before any enqueue. */
static void
test_invalid(uint32_t *d32)
{
    cudaStream_t gone;
    CHECK(cuMemsetD32Async((CUdeviceptr)d32 + 2, 1, 4, NULL) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemsetD32Async(0, 1, 4, NULL) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuStreamWriteValue32(NULL, (CUdeviceptr)d32 + 2, 1, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK_CUDA(cudaStreamCreate(&gone));
    CHECK_CUDA(cudaStreamDestroy(gone));
    CHECK(cuMemsetD32Async((CUdeviceptr)d32, 1, 4, (CUstream)gone) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuStreamWriteValue32((CUstream)gone, (CUdeviceptr)d32, 1, 0) ==
          CUDA_ERROR_INVALID_HANDLE);
}

/* A collective whose peer never comes fails the device: the calls then return its
 * sticky error, as every later call on a real context does. */
static void
test_sticky(uint32_t *d32)
{
    pthread_t th[2];
    cudaStream_t s;
    float *buf;
    CHECK(ncclGetUniqueId(&g_id) == ncclSuccess);
    for (intptr_t r = 0; r < 2; r++)
        CHECK(pthread_create(&th[r], NULL, join_rank, (void *)r) == 0);
    for (int r = 0; r < 2; r++)
        CHECK(pthread_join(th[r], NULL) == 0);
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaMalloc((void **)&buf, 1024));
    CHECK(ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, g_comms[0], s) == ncclSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
    CHECK(cuMemsetD32Async((CUdeviceptr)d32, 1, 4, (CUstream)s) == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)d32, 1, 0) == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(cuMemsetD32Async((CUdeviceptr)d32, 1, 4, NULL) == CUDA_ERROR_LAUNCH_FAILED);
}

int
main(void)
{
    uint32_t *d32;
    /* the peer that never arrives fails the collective at once, not in two minutes */
    setenv("SIMGPU_NCCL_TIMEOUT_S", "1", 1);
    CHECK_CUDA(cudaMalloc((void **)&d32, 64));
    test_invalid(d32);
    test_sticky(d32);
    printf("PASS\n");
    return 0;
}
