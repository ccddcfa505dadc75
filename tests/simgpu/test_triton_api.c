/* test_triton_api: the libcuda.so.1 calls Triton's launcher makes beyond the other tests'
 * (cuda_driver_triton.c): context limits, a stream's capture status, cluster occupancy of
 * a handle that is no loaded kernel, im2col tensor maps refused; and the device's rule for
 * the time of Triton kernels (README.md, "torch.compile"), in the simple physics: a
 * triton_ pointwise kernel 3 us + 48 bytes a thread at 1.5 TB/s, a template 3 us + 2 x 32 x
 * 256 FLOPs a thread at 19.5 TFLOP/s, a registered duration kept, another name the default
 * 10 us; and the same rule's torch eager kernels (README.md, "Kernels named by their class"),
 * by the names torch 2.15's fat binaries register: 3 us + their bytes a thread (by class,
 * vector width, dtype and data pointers) at 1.5 TB/s, a tiny launch 3 us; multi_tensor_apply
 * kernels by the elements of their tensors, read from a hand-built TensorListMetadata
 * (runtime and driver launches, the driver's packed buffer), full chunks when it does not fit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define CHECK_CU(call) CHECK((call) == CUDA_SUCCESS)

static dim3
dim3_of(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

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

/* How a test launches a kernel: threads a block, its arguments (runtime or driver
 * kernelParams, or the driver's packed `extra`), and by which API. */
struct launch {
    unsigned block;
    void **params, **extra;
    int runtime; /* 1: cudaLaunchKernel of a PTX module's kernel, 0: cuLaunchKernel by name */
};

/* The device time, us, of kernel `name` launched on grid blocks as `how` says: measured
 * between events around it on stream s, kept busy before by a 50 ms kernel (longer than a
 * loaded host takes between the first event and the launch) so that the kernel starts at the
 * first event. */
static double
launch_us(cudaStream_t s, const char *name, unsigned grid, const struct launch *how)
{
    CUfunction busy, f;
    CUmodule m = NULL;
    cudaEvent_t a, b;
    float ms = 0;
    char ptx[1024];
    CHECK_CU(cuModuleGetFunction(&busy, NULL, "busy_50ms"));
    if (how->runtime) { /* a kernel of a loaded module: a handle cudaLaunchKernel takes */
        snprintf(ptx, sizeof(ptx),
                 ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry %s()\n"
                 "{\n\tret;\n}\n",
                 name);
        CHECK_CU(cuModuleLoadData(&m, ptx));
    }
    CHECK_CU(cuModuleGetFunction(&f, m, name));
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    CHECK_CU(cuLaunchKernel(busy, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, NULL, NULL));
    CHECK_CUDA(cudaEventRecord(a, s));
    if (how->runtime)
        CHECK_CUDA(cudaLaunchKernel((const void *)f, dim3_of(grid), dim3_of(how->block),
                                    how->params, 0, s));
    else
        CHECK_CU(cuLaunchKernel(f, grid, 1, 1, how->block, 1, 1, 0, (CUstream)s, how->params,
                                how->extra));
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    if (m)
        CHECK_CU(cuModuleUnload(m));
    return ms * 1000.0;
}

/* The device time, us, of kernel `name` launched by the driver on grid x 128 threads with no
 * arguments. */
static double
kernel_us(cudaStream_t s, const char *name, unsigned grid)
{
    struct launch how = {128, NULL, NULL, 0};
    return launch_us(s, name, grid, &how);
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

/* torch 2.15's multi_tensor_apply metadata built for CUDA 13 (MultiTensorApply.cuh, 32 KiB
 * argument limits): 448 tensors of 2 lists, 252 of 4 lists with their step counts (fused
 * optimizers), 672 of 1 list with a scalar each; 2240 blocks. */
#define MTA_BLOCKS 2240
struct tensor_list2 {
    const void *addresses[2][448];
    int64_t numel_for_tensor[448];
    uint16_t block_to_tensor[MTA_BLOCKS];
    int32_t block_to_chunk[MTA_BLOCKS];
    int32_t start_tensor_this_launch;
};
struct fused_list4 {
    const void *addresses[4][252];
    int64_t numel_for_tensor[252];
    const void *state_steps_addresses[252];
    uint16_t block_to_tensor[MTA_BLOCKS];
    int32_t block_to_chunk[MTA_BLOCKS];
    int32_t start_tensor_this_launch;
};
struct scalar_list1 {
    const void *addresses[1][672];
    int64_t numel_for_tensor[672];
    float scalar_vals[672];
    uint16_t block_to_tensor[MTA_BLOCKS];
    int32_t block_to_chunk[MTA_BLOCKS];
};

/* Fills numel_for_tensor and the block maps as multi_tensor_apply does for n tensors of
 * numel[] elements, the first from chunk `first` on (the rest of a tensor whose first chunks
 * went in the launch before): returns the blocks. */
static unsigned
mta_fill(int64_t *numel_for_tensor, uint16_t *b2t, int32_t *b2c, const int64_t *numel, int n,
         int first)
{
    unsigned blocks = 0;
    for (int t = 0; t < n; t++) {
        numel_for_tensor[t] = numel[t];
        for (int64_t c = t ? 0 : first; c * 65536 < numel[t]; c++) {
            b2t[blocks] = (uint16_t)t;
            b2c[blocks++] = (int32_t)c;
        }
    }
    return blocks;
}

/* Checks that kernel `name` launched on `grid` blocks of 512 threads as `how` says takes 3 us
 * + `bytes` at 1.5 TB/s (the simple physics), within 1 %. */
static void
check_mta_us(cudaStream_t s, const char *name, unsigned grid, struct launch *how, double bytes)
{
    double want = 3.0 + bytes / 1.5e6, us;
    how->block = 512;
    us = launch_us(s, name, grid, how);
    if (!(us > 0.99 * want && us < 1.01 * want))
        fprintf(stderr, "%s: %.2f us, want %.2f\n", name, us, want);
    CHECK(us > 0.99 * want && us < 1.01 * want);
}

#define FOREACH_ADD                                                                                \
    "_ZN2at6native55_GLOBAL__N__f86471ef_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_"        \
    "apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2E"         \
    "Li0EEEJSt4plusIfEfEEEvT_T0_DpT1_"
#define FUSED_ADAM                                                                                 \
    "_ZN2at6native51_GLOBAL__N__b7f847be_18_fused_adam_impl_cu_454205f325multi_tensor_apply_"      \
    "kernelINS1_32FusedOptimizerTensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIfLi4ELNS0_"    \
    "9ADAM_MODEE0ELb0EEEJPKfdddddbS9_S9_EEEvT_T0_DpT1_"
#define FOREACH_DIV_SCALARS                                                                        \
    "_ZN2at6native61_GLOBAL__N__832b9cb6_28_ForeachBinaryOpScalarList_cu_dda10a6925multi_"         \
    "tensor_apply_kernelINS1_28TensorListScalarListMetadataIfLi1EEENS1_25BinaryOpScalarList"       \
    "FunctorIfLi1ELi1ELi0EEEJSt7dividesIfEEEEvT_T0_DpT1_"

/* torch's multi_tensor_apply kernels timed by the elements their blocks process, read from
 * the metadata they are passed (README.md, "Kernels named by their class"): min(65536, numel
 * - chunk x 65536) a block, x 4 bytes (float) x the accesses of the depth (2 lists: 3; 1: 2;
 * Adam's 4: 7), by cudaLaunchKernel, cuLaunchKernel's kernelParams and its packed buffer;
 * metadata that does not fit the layout (a buffer too short, a chunk past its tensor,
 * tensors out of order) is timed as full chunks and counted as unknown. */
static void
test_mta_times(cudaStream_t s)
{
    static struct tensor_list2 tl;
    static struct fused_list4 fl;
    static struct scalar_list1 sl;
    static unsigned char packed[sizeof(fl) + 64];
    static const int64_t sizes[] = {1000, 150000, 10}, rest[] = {150000, 500},
                         adam[] = {4096, 70000}, scaled[] = {300, 70000};
    uint64_t unknown = simgpu_mta_unknown_launches();
    char functor = 0;
    float alpha = 1;
    size_t bytes = sizeof(packed);
    void *args[] = {&tl, &functor, &alpha}, *sargs[] = {&sl, &functor};
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                     CU_LAUNCH_PARAM_END};
    struct launch rt = {512, args, NULL, 1}, drv = {512, args, NULL, 0},
                  buf = {512, NULL, extra, 0}, rts = {512, sargs, NULL, 1};
    unsigned blocks;

    /* foreach add of 2 lists: 1000 + 150000 (3 chunks) + 10 elements, runtime then driver */
    blocks = mta_fill(tl.numel_for_tensor, tl.block_to_tensor, tl.block_to_chunk, sizes, 3, 0);
    CHECK(blocks == 5);
    check_mta_us(s, FOREACH_ADD, blocks, &rt, 151010.0 * 4 * 3);
    check_mta_us(s, FOREACH_ADD, blocks, &drv, 151010.0 * 4 * 3);
    /* a launch that goes on with the last chunk of a tensor (150000 - 2 x 65536), then 500 */
    blocks = mta_fill(tl.numel_for_tensor, tl.block_to_tensor, tl.block_to_chunk, rest, 2, 2);
    check_mta_us(s, FOREACH_ADD, blocks, &drv, (150000.0 - 131072 + 500) * 4 * 3);
    /* the same by a demangled name */
    check_mta_us(s,
                 "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
                 "(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
                 "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, "
                 "float>(at::native::(anonymous namespace)::TensorListMetadata<2>, ...)",
                 blocks, &drv, (150000.0 - 131072 + 500) * 4 * 3);
    /* fused Adam through the packed buffer: 4096 + 70000 (2 chunks) elements */
    blocks = mta_fill(fl.numel_for_tensor, fl.block_to_tensor, fl.block_to_chunk, adam, 2, 0);
    memcpy(packed, &fl, sizeof(fl));
    check_mta_us(s, FUSED_ADAM, blocks, &buf, 74096.0 * 4 * 7);
    /* scalar-list division of 1 list: 300 + 70000 elements */
    blocks = mta_fill(sl.numel_for_tensor, sl.block_to_tensor, sl.block_to_chunk, scaled, 2, 0);
    check_mta_us(s, FOREACH_DIV_SCALARS, blocks, &rts, 70300.0 * 4 * 2);
    CHECK(simgpu_mta_unknown_launches() == unknown);

    /* a buffer with no room for the callable after the metadata: full chunks, unknown */
    bytes = sizeof(fl);
    check_mta_us(s, FUSED_ADAM, 3, &buf, 3 * 65536.0 * 4 * 7);
    /* a chunk past its tensor's end, then tensors out of order: full chunks, unknown */
    blocks = mta_fill(tl.numel_for_tensor, tl.block_to_tensor, tl.block_to_chunk, sizes, 3, 0);
    tl.block_to_chunk[0] = 1;
    check_mta_us(s, FOREACH_ADD, blocks, &rt, blocks * 65536.0 * 4 * 3);
    tl.block_to_chunk[0] = 0;
    tl.block_to_tensor[4] = 3;
    check_mta_us(s, FOREACH_ADD, blocks, &drv, blocks * 65536.0 * 4 * 3);
    CHECK(simgpu_mta_unknown_launches() == unknown + 3);
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
    test_mta_times(s);
    CHECK_CUDA(cudaStreamDestroy(s));
    printf("PASS\n");
    return 0;
}
