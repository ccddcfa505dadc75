/* test_triton_api: the libcuda.so.1 calls Triton's launcher makes beyond the other tests'
 * (cuda_driver_triton.c): context limits, a stream's capture status, cluster occupancy of
 * a handle that is no loaded kernel, im2col tensor maps refused; and the device's rule for
 * the time of Triton kernels (README.md, "torch.compile"), in the simple physics: a
 * triton_ pointwise kernel 3 us + 48 bytes a thread at 1.5 TB/s, a template 3 us + 2 x 32 x
 * 256 FLOPs a thread at 19.5 TFLOP/s, a registered duration kept, another name the default
 * 10 us; and the same rule's torch eager kernels (README.md, "Kernels named by their class"),
 * by the names torch 2.15's fat binaries register: 3 us + their bytes a thread (by class,
 * vector width, dtype and data pointers) at 1.5 TB/s, a tiny launch 3 us. */
#include <stdint.h>
#include <stdio.h>
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

/* Checks that kernel `name` on grid x 128 threads takes 3 us + bytes_per_thread a thread at
 * 1.5 TB/s (the simple physics), within 1 %. */
static void
check_memory_us(cudaStream_t s, const char *name, unsigned grid, double bytes_per_thread)
{
    double want = 3.0 + grid * 128.0 * bytes_per_thread / 1.5e6, us = kernel_us(s, name, grid);
    if (!(us > 0.99 * want && us < 1.01 * want))
        fprintf(stderr, "%s: %.2f us, want %.2f\n", name, us, want);
    CHECK(us > 0.99 * want && us < 1.01 * want);
}

static void
test_torch_times(cudaStream_t s)
{
    /* add, float: vec 4 x 4 bytes x 3 data pointers (2 read, 1 written) */
    check_memory_us(s,
                    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5"
                    "arrayIPcLm3EELb0EEEviT0_T1_",
                    10000, 4 * 4 * 3);
    /* the same add of 10 elements: one block, latency class */
    check_memory_us(s,
                    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5"
                    "arrayIPcLm3EELb0EEEviT0_T1_",
                    1, 0);
    /* fill, c10::Half, vec 8: one pointer written */
    check_memory_us(
        s,
        "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_11FillFunctorIN3c104HalfEEESt5"
        "arrayIPcLm1EELb0EEEviT0_T1_",
        1000, 8 * 2 * 1);
    /* a copy by the legacy elementwise_kernel<128, 2>: 2 items, read + write, float */
    check_memory_us(
        s,
        "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_"
        "23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_"
        "EEvS4_RKT_EUliE_EEviT1_",
        1000, 2 * 4 * 2);
    /* a sum reduction: 16 inputs a thread */
    check_memory_us(
        s,
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_"
        "11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4ELi4EEEEEvT1_",
        1000, 16 * 4);
    /* layer norm, BFloat16: 4 elements, 3 accesses */
    check_memory_us(
        s,
        "_ZN2at6native53_GLOBAL__N__4da244e1_20_layer_norm_kernel_cu_9c5ada8a28vectorized_"
        "layer_norm_kernelIN3c108BFloat16EfLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_",
        1000, 4 * 2 * 3);
    /* softmax, demangled: as a norm */
    check_memory_us(s, "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>()",
                    1000, 4 * 4 * 3);
    /* index_select: an int64 index, source and destination */
    check_memory_us(s,
                    "_ZN2at6native12_GLOBAL__N_120indexSelectLargeIndexIfljLi2ELi2ELin2ELb1EEEvv",
                    1000, 4 * (8 + 2 * 4));
    /* fused Adam over 4 tensor lists: 128 elements a thread, 7 accesses */
    check_memory_us(
        s,
        "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4E"
        "EENS1_20FusedAdamMathFunctorIfLi4ELNS0_8ADAM_MODEE0ELb0EEEJPdddddbbPfS9_EEEvT_T0_"
        "DpT1_",
        100, 128 * 4 * 7);
    /* foreach add of 2 lists: 3 accesses */
    check_memory_us(
        s,
        "_ZN2at6native55_GLOBAL__N__f86471ef_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_"
        "apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2E"
        "Li0EEEJSt4plusIfEfEEEvT_T0_DpT1_",
        100, 128 * 4 * 3);
    /* FSDP2's copy-out: 16 bytes a thread read and written */
    check_memory_us(
        s,
        "_ZN2at6native6detail51split_with_sizes_copy_out_contiguous_no_cast_kernelEPPcS3_"
        "PlS4_S4_ll",
        1000, 32);
    /* an at::native kernel no rule knows, and attention outside at::native: the default */
    check_memory_us(s, "_ZN2at6native24_GLOBAL__N_118some_new_kernelEv", 1000,
                    (10.0 - 3) * 1.5e6 / 128e3);
    check_memory_us(
        s,
        "_Z39fmha_cutlassF_f32_aligned_64x64_rf_sm80N22PyTorchMemEffAttention15AttentionK"
        "ernelIfN7cutlass4arch4Sm80ELb1ELi64ELi64ELi64ELb1ELb1EE6ParamsE",
        1000, (10.0 - 3) * 1.5e6 / 128e3);
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
    test_torch_times(s);
    CHECK_CUDA(cudaStreamDestroy(s));
    printf("PASS\n");
    return 0;
}
