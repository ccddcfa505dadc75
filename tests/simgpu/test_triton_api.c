/* test_triton_api: the libcuda.so.1 calls Triton's launcher makes beyond the other tests'
 * (cuda_driver_triton.c): context limits, a stream's capture status, cluster occupancy of
 * a handle that is no loaded kernel, im2col tensor maps refused; and the device's rule for
 * the time of Triton kernels (README.md, "torch.compile"), in the simple physics: a
 * triton_ pointwise kernel 3 us + 48 bytes a thread at 1.5 TB/s, a template 3 us + 2 x 32 x
 * 256 FLOPs a thread at 19.5 TFLOP/s, a registered duration kept, another name the default
 * 10 us. */
#include <stdint.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define CHECK_CU(call) CHECK((call) == CUDA_SUCCESS)

static void
test_limits(void)
{
    size_t v = 0;
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK(v == 1 << 20);
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4 << 20));
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK(v == 4 << 20);
    CHECK_CU(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    CHECK(v == 1024);
    CHECK(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 256) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxGetLimit(&v, CU_LIMIT_SHMEM_SIZE) == CUDA_ERROR_UNSUPPORTED_LIMIT);
    CHECK(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE) == CUDA_ERROR_INVALID_VALUE);
}

static void
test_capture_clusters_im2col(cudaStream_t s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    cudaGraph_t g;
    CUfunction f;
    CUlaunchConfig c = {0};
    CUtensorMap map;
    int n = -1;

    CHECK_CU(cuStreamIsCapturing((CUstream)s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_CU(cuStreamIsCapturing((CUstream)s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphDestroy(g));
    /* a function made by name is no loaded kernel: no attributes, no occupancy */
    CHECK_CU(cuModuleGetFunction(&f, NULL, "triton_poi_fused_add_0"));
    c.gridDimX = c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = 128;
    c.blockDimY = c.blockDimZ = 1;
    CHECK(cuOccupancyMaxActiveClusters(&n, f, &c) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuOccupancyMaxActiveClusters(&n, f, NULL) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, NULL, NULL, NULL, NULL,
                                  NULL, 1, 1, NULL, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_ERROR_NOT_SUPPORTED);
}

/* The device time, us, of kernel `name` launched on grid x 128 threads: measured between
 * events around it on stream s, kept busy before by a 50 ms kernel (longer than a loaded
 * host takes between the first event and the launch) so that the kernel starts at the first
 * event. */
static double
kernel_us(cudaStream_t s, const char *name, unsigned grid)
{
    CUfunction busy, f;
    cudaEvent_t a, b;
    float ms = 0;
    CHECK_CU(cuModuleGetFunction(&busy, NULL, "busy_50ms"));
    CHECK_CU(cuModuleGetFunction(&f, NULL, name));
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    CHECK_CU(cuLaunchKernel(busy, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, NULL, NULL));
    CHECK_CUDA(cudaEventRecord(a, s));
    CHECK_CU(cuLaunchKernel(f, grid, 1, 1, 128, 1, 1, 0, (CUstream)s, NULL, NULL));
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    return ms * 1000.0;
}

static void
test_triton_times(cudaStream_t s)
{
    double threads = 10000.0 * 128, us;
    CHECK(simgpu_register_kernel_name("busy_50ms", 50000000) == 0);
    CHECK(simgpu_register_kernel_name("triton_poi_registered_0", 50000) == 0);
    us = kernel_us(s, "triton_poi_fused_add_0", 10000);
    CHECK(us > 0.99 * (3.0 + threads * 48 / 1.5e6) && us < 1.01 * (3.0 + threads * 48 / 1.5e6));
    us = kernel_us(s, "triton_red_fused_sum_1", 10000);
    CHECK(us > 0.99 * (3.0 + threads * 48 / 1.5e6) && us < 1.01 * (3.0 + threads * 48 / 1.5e6));
    threads = 132.0 * 128;
    us = kernel_us(s, "triton_tem_fused_mm_2", 132);
    CHECK(us > 0.99 * (3.0 + threads * 2 * 32 * 256 / 19.5e6) &&
          us < 1.01 * (3.0 + threads * 2 * 32 * 256 / 19.5e6));
    us = kernel_us(s, "triton_poi_registered_0", 10000);
    CHECK(us > 49.5 && us < 50.5);
    us = kernel_us(s, "my_jit_kernel", 10000);
    CHECK(us > 9.9 && us < 10.1);
}

int
main(void)
{
    cudaStream_t s;
    setenv("SIMGPU_PHYSICS", "simple", 1);
    CHECK_CUDA(cudaStreamCreate(&s));
    test_limits();
    test_capture_clusters_im2col(s);
    test_triton_times(s);
    CHECK_CUDA(cudaStreamDestroy(s));
    printf("PASS\n");
    return 0;
}
