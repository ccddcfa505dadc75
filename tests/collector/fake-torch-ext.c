/*
 * fake-torch-ext: a shared library that loads CUDA the way PyTorch does, for the collector's
 * test-python-dlopen.py. Python opens it with ctypes.CDLL(path, mode=os.RTLD_LOCAL), as it
 * opens torch/_C.so; it links libcudart.so.13 and libnccl.so.2 (the simgpu stand-ins, or
 * private copies of them, as torch carries its own), so those land in the library's local
 * scope, not in the global one: its calls to cudaLaunchKernel etc. bind through the normal
 * lookup (LD_PRELOAD first), and the real functions are not visible to dlsym(RTLD_NEXT).
 *
 * One entry point, fake_torch_train(), runs a small data-parallel training loop:
 *
 *   setup      cudaGetDeviceCount, cudaSetDevice(rank % count), cudaSetDevice(99) (fails:
 *              cudaErrorInvalidDevice), 2 cudaMalloc, 2 cudaStreamCreateWithFlags
 *              (compute, comm), 2 cudaEventCreateWithFlags, ncclGetUniqueId on rank 0
 *              (shared through simrun's rendezvous file when world > 1), ncclCommInitRank;
 *              one launch with a zero block (fails: cudaErrorInvalidConfiguration) and the
 *              cudaGetLastError that reads it back
 *   iteration  NVTX range "step N" around: cudaMemcpyAsync of the batch (host to device, on
 *              compute), launches of fake_fwd_gemm, fake_fwd_relu, fake_bwd_gemm (compute),
 *              cudaEventRecord(grads ready, compute), cudaStreamWaitEvent(comm, ...),
 *              ncclAllReduce of the gradients (comm), cudaEventRecord(reduced, comm),
 *              cudaStreamWaitEvent(compute, ...), launch of fake_sgd (compute),
 *              cudaStreamSynchronize(compute)
 *   teardown   ncclCommDestroy, 2 cudaEventDestroy, 2 cudaStreamDestroy, 2 cudaFree
 *
 * So per iteration: 4 kernel launches (+1 NCCL kernel), 1 copy, 1 all-reduce, 2 event
 * records, 2 waits, 1 synchronisation, 1 range. Every CUDA and NCCL call's return code is
 * stored, in call order, for the driver to compare with and without the collector.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <nvtx3/nvToolsExt.h>

#include "simgpu.h"
#include "simrun_rdzv.h"

/* Host stubs standing for the kernels (the simulated device runs no device code). */
static void
fake_fwd_gemm(void)
{
}

static void
fake_fwd_relu(void)
{
}

static void
fake_bwd_gemm(void)
{
}

static void
fake_sgd(void)
{
}

#define GRAD_FLOATS (1u << 18) /* 1 MiB of gradients */
#define BATCH_BYTES (1u << 16)

/* Where the return codes go: codes[0..max), n of them so far (may pass max: counted only). */
struct codes {
    int *codes;
    int max;
    int n;
};

/* Stores return code rc; returns rc so that calls can be chained on success. */
static int
note(struct codes *c, int rc)
{
    if (c->n < c->max)
        c->codes[c->n] = rc;
    c->n++;
    return rc;
}

int fake_torch_train(int rank, int world, int iters, int *codes, int max_codes);

/*
 * Runs `iters` iterations of the loop above as rank `rank` of `world` (world > 1 needs
 * simrun's SIMRUN_RDZV_FILE), storing each call's return code into codes[0..max_codes) in
 * call order. Registers the four kernels with simgpu first (names and durations).
 * Returns the number of return codes (which may exceed max_codes: the rest are dropped),
 * or -1 when the arguments are wrong or a call that the loop cannot go on without failed
 * (setup; an iteration's failure is only stored). Leaves nothing allocated behind on
 * success; a failed setup may leak what it had created, as the process then ends.
 */
int
fake_torch_train(int rank, int world, int iters, int *codes, int max_codes)
{
    struct codes c = {codes, max_codes < 0 ? 0 : max_codes, 0};
    if (rank < 0 || world < 1 || rank >= world || iters < 0 || (codes == NULL && max_codes > 0))
        return -1;
    simgpu_register_kernel((const void *)fake_fwd_gemm, "fake_fwd_gemm", 40000);
    simgpu_register_kernel((const void *)fake_fwd_relu, "fake_fwd_relu", 10000);
    simgpu_register_kernel((const void *)fake_bwd_gemm, "fake_bwd_gemm", 80000);
    simgpu_register_kernel((const void *)fake_sgd, "fake_sgd", 20000);

    int count = 0;
    if (note(&c, cudaGetDeviceCount(&count)) != cudaSuccess || count < 1 ||
        note(&c, cudaSetDevice(rank % count)) != cudaSuccess)
        return -1;
    note(&c, cudaSetDevice(99)); /* cudaErrorInvalidDevice, with or without the collector */

    float *grads = NULL;
    void *batch = NULL;
    cudaStream_t compute = NULL, comm_stream = NULL;
    cudaEvent_t grads_ready = NULL, reduced = NULL;
    if (note(&c, cudaMalloc((void **)&grads, GRAD_FLOATS * sizeof(float))) != cudaSuccess ||
        note(&c, cudaMalloc(&batch, BATCH_BYTES)) != cudaSuccess ||
        note(&c, cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking)) != cudaSuccess ||
        note(&c, cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking)) != cudaSuccess ||
        note(&c, cudaEventCreateWithFlags(&grads_ready, cudaEventDisableTiming)) != cudaSuccess ||
        note(&c, cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming)) != cudaSuccess)
        return -1;

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0 && note(&c, ncclGetUniqueId(&id)) != ncclSuccess)
        return -1;
    if (world > 1 && simrun_rdzv_share(rank, &id, sizeof id, 30) != 0)
        return -1;
    ncclComm_t comm = NULL;
    if (note(&c, ncclCommInitRank(&comm, world, id, rank)) != ncclSuccess)
        return -1;

    dim3 grid = {64, 1, 1}, block = {256, 1, 1}, no_block = {0, 1, 1};
    note(&c, cudaLaunchKernel((const void *)fake_fwd_relu, grid, no_block, NULL, 0, compute));
    note(&c, cudaGetLastError()); /* reads back cudaErrorInvalidConfiguration */

    unsigned char host_batch[256];
    memset(host_batch, 1, sizeof host_batch);
    for (int i = 0; i < iters; i++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", i);
        nvtxRangePushA(label);
        note(&c, cudaMemcpyAsync(batch, host_batch, sizeof host_batch, cudaMemcpyHostToDevice,
                                 compute));
        note(&c, cudaLaunchKernel((const void *)fake_fwd_gemm, grid, block, NULL, 0, compute));
        note(&c, cudaLaunchKernel((const void *)fake_fwd_relu, grid, block, NULL, 0, compute));
        note(&c, cudaLaunchKernel((const void *)fake_bwd_gemm, grid, block, NULL, 0, compute));
        note(&c, cudaEventRecord(grads_ready, compute));
        note(&c, cudaStreamWaitEvent(comm_stream, grads_ready, 0));
        note(&c, ncclAllReduce(grads, grads, GRAD_FLOATS, ncclFloat32, ncclSum, comm, comm_stream));
        note(&c, cudaEventRecord(reduced, comm_stream));
        note(&c, cudaStreamWaitEvent(compute, reduced, 0));
        note(&c, cudaLaunchKernel((const void *)fake_sgd, grid, block, NULL, 0, compute));
        note(&c, cudaStreamSynchronize(compute));
        nvtxRangePop();
    }

    note(&c, ncclCommDestroy(comm));
    note(&c, cudaEventDestroy(grads_ready));
    note(&c, cudaEventDestroy(reduced));
    note(&c, cudaStreamDestroy(comm_stream));
    note(&c, cudaStreamDestroy(compute));
    note(&c, cudaFree(batch));
    note(&c, cudaFree(grads));
    return c.n;
}
