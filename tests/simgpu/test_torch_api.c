/* test_torch_api: the libcudart.so.13 and libcuda.so.1 calls PyTorch makes beyond the
 * other tests' (cudart_torch.c, cuda_driver_torch.c): peer access on a lone device, host
 * registration, the default pool's attributes, stream callbacks in stream order with host
 * functions, capture info outside and inside a capture, the capture mode exchange, user
 * objects and the graphs that retain them, managed memory, 2D copies, the driver's primary context
 * state before cuInit, the context stack, pointer attributes, 32-bit stream writes and sets, log
 * callbacks, and the calls the device cannot do answering an error. */
#include <stdint.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu_check.h"

#define CHECK_CU(call) CHECK((call) == CUDA_SUCCESS)

static int g_order[8], g_norder;

static void CUDART_CB
host_fn(void *arg)
{
    g_order[g_norder++] = (int)(intptr_t)arg;
}

static void CUDART_CB
stream_cb(cudaStream_t s, cudaError_t status, void *arg)
{
    (void)s;
    CHECK(status == cudaSuccess);
    g_order[g_norder++] = (int)(intptr_t)arg;
}

static int g_destroyed;
static void CUDART_CB
uobj_destroy(void *arg)
{
    g_destroyed += (int)(intptr_t)arg;
}

static void CUDA_CB
log_cb(void *data, CUlogLevel level, char *msg, size_t len)
{
    (void)data, (void)level, (void)msg, (void)len;
}

/* The driver before any runtime call: not initialised (the runtime initialises it). */
static void
test_driver_before_init(void)
{
    unsigned flags = 99;
    int active = -1;

    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_ERROR_NOT_INITIALIZED);
}

/* Peer access: the device itself or a device out of range. */
static void
test_peer(void)
{
    int can = -1;
    char bus[32];

    CHECK(cudaDeviceCanAccessPeer(&can, 0, 0) == cudaErrorInvalidDevice);
    CHECK(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaErrorInvalidDevice);
    CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
    CHECK(strlen(bus) == 16 && bus[8] == ':' && bus[11] == ':' && bus[14] == '.');
}

/* Host registration: overlap refused, unregistering what is not registered refused. */
static void
test_host_register(void)
{
    char host[256];

    CHECK_CUDA(cudaHostRegister(host, 128, cudaHostRegisterDefault));
    CHECK(cudaHostRegister(host + 64, 128, 0) == cudaErrorHostMemoryAlreadyRegistered);
    CHECK_CUDA(cudaHostRegister(host + 128, 128, 0));
    CHECK(cudaHostUnregister(host + 1) == cudaErrorHostMemoryNotRegistered);
    CHECK_CUDA(cudaHostUnregister(host));
    CHECK_CUDA(cudaHostUnregister(host + 128));
    CHECK(cudaHostUnregister(host) == cudaErrorHostMemoryNotRegistered);
}

/* The default pool: settable attributes read back, usage follows the device's (*d gets
 * the 1 MiB allocation the later tests use). */
static void
test_pool(char **d)
{
    cudaMemPool_t pool;
    unsigned long long v;
    int iv;
    char host[16];

    CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &iv));
    CHECK(iv == 1);
    v = 1ULL << 30;
    CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v));
    v = 0;
    CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v));
    CHECK(v == 1ULL << 30);
    CHECK_CUDA(cudaMalloc((void **)d, 1 << 20));
    CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v));
    CHECK(v >= 1 << 20);
    v = 5;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v) == cudaErrorInvalidValue);
    CHECK(cudaMemPoolGetAttribute((cudaMemPool_t)host, cudaMemPoolAttrUsedMemHigh, &v) ==
          cudaErrorInvalidResourceHandle);
    CHECK_CUDA(cudaMemPoolTrimTo(pool, 0));
}

/* Stream callbacks and host functions run in stream order (*s gets the stream the later
 * tests use). */
static void
test_stream_order(cudaStream_t *s)
{
    CHECK_CUDA(cudaStreamCreate(s));
    CHECK_CUDA(cudaLaunchHostFunc(*s, host_fn, (void *)1));
    CHECK_CUDA(cudaStreamAddCallback(*s, stream_cb, (void *)2, 0));
    CHECK_CUDA(cudaLaunchHostFunc(*s, host_fn, (void *)3));
    CHECK(cudaStreamAddCallback(*s, stream_cb, NULL, 1) == cudaErrorInvalidValue);
    CHECK_CUDA(cudaStreamSynchronize(*s));
    CHECK(g_norder == 3 && g_order[0] == 1 && g_order[1] == 2 && g_order[2] == 3);
}

/* Capture info: not capturing, then capturing (the graph is the id), and after; the
 * capture mode exchange. */
static void
test_capture(cudaStream_t s, char *d)
{
    enum cudaStreamCaptureStatus st;
    unsigned long long id = 1;
    cudaGraph_t g = NULL, cg = (cudaGraph_t)1;
    cudaGraphExec_t x;
    size_t nd = 9;
    const cudaGraphNode_t *deps = (const cudaGraphNode_t *)1;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;

    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, NULL, &nd));
    CHECK(st == cudaStreamCaptureStatusNone && id == 0 && cg == NULL && nd == 0);
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaMemsetAsync(d, 1, 16, s));
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, &id, &cg, NULL, NULL, NULL));
    CHECK(st == cudaStreamCaptureStatusActive && id != 0 && cg != NULL && id == (uintptr_t)cg);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK(g == cg);
    CHECK_CUDA(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    CHECK_CUDA(cudaGraphLaunch(x, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaGraphExecDestroy(x));
    CHECK_CUDA(cudaGraphGetNodes(g, NULL, &nd));
    CHECK(nd == 1);
    {
        cudaGraphNode_t nodes[2];
        CHECK(cudaGraphGetNodes(g, nodes, &nd) == cudaErrorNotSupported);
    }
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == cudaStreamCaptureModeGlobal);
    CHECK_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == cudaStreamCaptureModeRelaxed);
}

/* User objects: the destructor runs when the count reaches zero. IPC cannot be done. */
static void
test_user_objects_ipc(char *d)
{
    cudaUserObject_t uo;
    cudaIpcMemHandle_t ih;

    CHECK_CUDA(
        cudaUserObjectCreate(&uo, (void *)7, uobj_destroy, 2, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaUserObjectRelease(uo, 1));
    CHECK(g_destroyed == 0);
    CHECK_CUDA(cudaUserObjectRelease(uo, 1));
    CHECK(g_destroyed == 7);
    CHECK(cudaIpcGetMemHandle(&ih, d) == cudaErrorNotSupported);
}

/* A graph retains user objects (NCCL does inside a capture): the references it takes, new
 * or moved from the caller, are dropped when the graph is freed, after cudaGraphDestroy
 * and its last executable graph. */
static void
test_graph_user_objects(cudaStream_t s, char *d)
{
    cudaUserObject_t a, b;
    cudaGraph_t cg, g;
    cudaGraphExec_t x;
    enum cudaStreamCaptureStatus st;

    g_destroyed = 0;
    CHECK_CUDA(
        cudaUserObjectCreate(&a, (void *)1, uobj_destroy, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(
        cudaUserObjectCreate(&b, (void *)10, uobj_destroy, 1, cudaUserObjectNoDestructorSync));
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaMemsetAsync(d, 1, 16, s));
    CHECK_CUDA(cudaStreamGetCaptureInfo(s, &st, NULL, &cg, NULL, NULL, NULL));
    CHECK_CUDA(cudaGraphRetainUserObject(cg, a, 1, cudaGraphUserObjectMove));
    CHECK_CUDA(cudaGraphRetainUserObject(cg, b, 2, 0));
    CHECK(cudaGraphRetainUserObject(cg, b, 1, 2) == cudaErrorInvalidValue);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaUserObjectRelease(b, 1)); /* the caller's: the graph still holds 2 */
    CHECK(g_destroyed == 0);
    CHECK_CUDA(cudaGraphInstantiateWithFlags(&x, g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK(g_destroyed == 0); /* the executable graph keeps it */
    CHECK_CUDA(cudaGraphLaunch(x, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaGraphExecDestroy(x));
    CHECK(g_destroyed == 11);
}

/* Managed memory is host-addressable; a 2D copy moves each row. */
static void
test_managed_2d(cudaStream_t s)
{
    char *m, src[64], dst[64];

    CHECK_CUDA(cudaMallocManaged((void **)&m, 64, cudaMemAttachGlobal));
    for (int i = 0; i < 64; i++)
        src[i] = (char)i;
    memset(dst, 0, sizeof(dst));
    CHECK_CUDA(cudaMemcpy2DAsync(m, 16, src, 8, 8, 4, cudaMemcpyHostToDevice, s));
    CHECK_CUDA(cudaMemcpy2DAsync(dst, 8, m, 16, 8, 4, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(memcmp(dst, src, 32) == 0 && m[16] == 8 && m[24 + 8] == 16);
    CHECK(cudaMemcpy2DAsync(m, 4, src, 8, 8, 1, cudaMemcpyHostToDevice, s) ==
          cudaErrorInvalidPitchValue);
    CHECK_CUDA(cudaFree(m));
}

/* The driver after the runtime: initialised, primary context active; the context stack
 * and pointer attributes of the 1 MiB allocation d. */
static void
test_driver_after_init(cudaStream_t s, char *d)
{
    unsigned flags = 99, mtype = 0;
    int active = -1, ordinal = -1;
    CUcontext ctx, popped;
    CUdeviceptr base;
    size_t size;
    char host[16];

    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(flags == 0 && active == 1);
    CHECK_CU(cuCtxGetCurrent(&ctx));
    CHECK(ctx != NULL);
    CHECK_CU(cuCtxPushCurrent(ctx));
    CHECK_CU(cuCtxPopCurrent(&popped));
    CHECK(popped == ctx);
    CHECK(cuCtxPopCurrent(&popped) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuStreamGetCtx((CUstream)s, &popped));
    CHECK(popped == ctx);
    CHECK_CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)d + 5));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)d));
    CHECK(ordinal == 0);
    CHECK_CU(cuMemGetAddressRange(&base, &size, (CUdeviceptr)d + 100));
    CHECK(base == (CUdeviceptr)d && size == 1 << 20);
    CHECK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)host) == CUDA_ERROR_NOT_FOUND);
}

/* 32-bit writes and sets happen when the stream reaches them; log callbacks are kept and
 * can be removed once; virtual memory management cannot be done. */
static void
test_driver_stream_logs_vmm(cudaStream_t s, char *d)
{
    uint32_t *d32 = (uint32_t *)d;
    CUlogsCallbackHandle lh;
    CUdeviceptr base;

    CHECK_CU(cuMemsetD32Async((CUdeviceptr)d32, 0xabcd1234u, 4, (CUstream)s));
    CHECK_CU(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(d32 + 1), 42, 0));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(d32[0] == 0xabcd1234u && d32[1] == 42 && d32[3] == 0xabcd1234u);
    /* a captured write, launched twice: each launch writes (its own copy of the write's
     * value and place; the first launch once freed them, ASan's heap-use-after-free) */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_CU(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(d32 + 2), 7, 0));
    CHECK_CUDA(cudaStreamEndCapture(s, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 2; i++) {
        d32[2] = 0;
        CHECK_CUDA(cudaGraphLaunch(exec, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        CHECK(d32[2] == 7);
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    CHECK_CU(cuLogsRegisterCallback(log_cb, NULL, &lh));
    CHECK_CU(cuLogsUnregisterCallback(lh));
    CHECK(cuLogsUnregisterCallback(lh) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemAddressReserve(&base, 1 << 21, 0, 0, 0) == CUDA_ERROR_NOT_SUPPORTED);
}

int
main(void)
{
    cudaStream_t s;
    char *d;

    test_driver_before_init();
    test_peer();
    test_host_register();
    test_pool(&d);
    test_stream_order(&s);
    test_capture(s, d);
    test_user_objects_ipc(d);
    test_graph_user_objects(s, d);
    test_managed_2d(s);
    test_driver_after_init(s, d);
    test_driver_stream_logs_vmm(s, d);
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaStreamDestroy(s));
    printf("PASS\n");
    return 0;
}
