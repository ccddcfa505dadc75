/* test_classify: the meanings libdprotrace decides once (API classes, NCCL element sizes,
 * communication kernels), in every spelling producers write. */
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "fnv1a.h"
#include "testutil.h"

typedef struct spelling {
    const char *name;
    dpro_api_class cls;
} spelling;

static const spelling spellings[] = {
    {"cudaLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"cudaLaunchKernel_ptsz", DPRO_API_CLASS_LAUNCH},
    {"cudaLaunchKernelExC_ptsz", DPRO_API_CLASS_LAUNCH},
    {"cudaLaunchCooperativeKernel", DPRO_API_CLASS_LAUNCH},
    {"__cudaLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"__cudaLaunchKernel_ptsz", DPRO_API_CLASS_LAUNCH},
    {"cuLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"cuLaunchKernel_ptsz", DPRO_API_CLASS_LAUNCH},
    {"cuLaunchKernelEx", DPRO_API_CLASS_LAUNCH},
    {"hipLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"hipExtLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"hipModuleLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"hipHccModuleLaunchKernel", DPRO_API_CLASS_LAUNCH},
    {"cudaGraphLaunch", DPRO_API_CLASS_GRAPH_LAUNCH},
    {"cudaGraphLaunch_ptsz", DPRO_API_CLASS_GRAPH_LAUNCH},
    {"cuGraphLaunch", DPRO_API_CLASS_GRAPH_LAUNCH},
    {"cudaMemcpy", DPRO_API_CLASS_MEMCPY},
    {"cudaMemcpy_ptds", DPRO_API_CLASS_MEMCPY},
    {"cudaMemcpy2D", DPRO_API_CLASS_MEMCPY},
    {"cudaMemcpyToSymbol", DPRO_API_CLASS_MEMCPY},
    {"cuMemcpyHtoD_v2", DPRO_API_CLASS_MEMCPY},
    {"hipMemcpy", DPRO_API_CLASS_MEMCPY},
    {"cudaMemcpyAsync", DPRO_API_CLASS_MEMCPY_ASYNC},
    {"cudaMemcpyAsync_ptsz", DPRO_API_CLASS_MEMCPY_ASYNC},
    {"cudaMemcpy2DAsync_ptsz", DPRO_API_CLASS_MEMCPY_ASYNC},
    {"cuMemcpyHtoDAsync_v2_ptsz", DPRO_API_CLASS_MEMCPY_ASYNC},
    {"hipMemcpyAsync", DPRO_API_CLASS_MEMCPY_ASYNC},
    {"cudaMemset", DPRO_API_CLASS_MEMSET},
    {"cuMemsetD32_v2", DPRO_API_CLASS_MEMSET},
    {"cudaMemsetAsync", DPRO_API_CLASS_MEMSET_ASYNC},
    {"cudaMemsetAsync_ptsz", DPRO_API_CLASS_MEMSET_ASYNC},
    {"hipMemsetAsync", DPRO_API_CLASS_MEMSET_ASYNC},
    {"cudaEventRecord", DPRO_API_CLASS_EVENT_RECORD},
    {"cudaEventRecord_ptsz", DPRO_API_CLASS_EVENT_RECORD},
    {"cudaEventRecordWithFlags_ptsz", DPRO_API_CLASS_EVENT_RECORD},
    {"cuEventRecord", DPRO_API_CLASS_EVENT_RECORD},
    {"cuEventRecordWithFlags_ptsz", DPRO_API_CLASS_EVENT_RECORD},
    {"hipEventRecord", DPRO_API_CLASS_EVENT_RECORD},
    {"cudaStreamWaitEvent", DPRO_API_CLASS_STREAM_WAIT},
    {"cudaStreamWaitEvent_ptsz", DPRO_API_CLASS_STREAM_WAIT},
    {"cuStreamWaitEvent_ptsz", DPRO_API_CLASS_STREAM_WAIT},
    {"hipStreamWaitEvent", DPRO_API_CLASS_STREAM_WAIT},
    {"cudaEventSynchronize", DPRO_API_CLASS_EVENT_SYNC},
    {"cuEventSynchronize", DPRO_API_CLASS_EVENT_SYNC},
    {"cudaStreamSynchronize", DPRO_API_CLASS_STREAM_SYNC},
    {"cudaStreamSynchronize_ptsz", DPRO_API_CLASS_STREAM_SYNC},
    {"cuStreamSynchronize_ptsz", DPRO_API_CLASS_STREAM_SYNC},
    {"hipStreamSynchronize", DPRO_API_CLASS_STREAM_SYNC},
    {"cudaDeviceSynchronize", DPRO_API_CLASS_DEVICE_SYNC},
    {"cudaThreadSynchronize", DPRO_API_CLASS_DEVICE_SYNC},
    {"cuCtxSynchronize", DPRO_API_CLASS_DEVICE_SYNC},
    {"hipDeviceSynchronize", DPRO_API_CLASS_DEVICE_SYNC},
    {"cudaMalloc", DPRO_API_CLASS_MALLOC},
    {"cudaMallocAsync_ptsz", DPRO_API_CLASS_MALLOC},
    {"cudaMallocHost", DPRO_API_CLASS_MALLOC},
    {"cudaHostAlloc", DPRO_API_CLASS_MALLOC},
    {"cuMemAlloc_v2", DPRO_API_CLASS_MALLOC},
    {"cuMemAllocAsync_ptsz", DPRO_API_CLASS_MALLOC},
    {"hipMalloc", DPRO_API_CLASS_MALLOC},
    {"cudaFree", DPRO_API_CLASS_FREE},
    {"cudaFreeAsync_ptsz", DPRO_API_CLASS_FREE},
    {"cudaFreeHost", DPRO_API_CLASS_FREE},
    {"cuMemFree_v2", DPRO_API_CLASS_FREE},
    {"hipFree", DPRO_API_CLASS_FREE},
    /* Calls that look alike but are none of the classes. */
    {"cudaLaunchHostFunc", DPRO_API_CLASS_OTHER},
    {"cudaStreamIsCapturing", DPRO_API_CLASS_OTHER},
    {"cudaEventQuery", DPRO_API_CLASS_OTHER},
    {"cudaStreamQuery", DPRO_API_CLASS_OTHER},
    {"cudaGetDevice", DPRO_API_CLASS_OTHER},
    {"cudaStreamSynchronizeX", DPRO_API_CLASS_OTHER},
    {"cublasSgemm_v2", DPRO_API_CLASS_OTHER},
    {"cudnnConvolutionForward", DPRO_API_CLASS_OTHER},
    {"ncclAllReduce", DPRO_API_CLASS_OTHER},
    {"cuda", DPRO_API_CLASS_OTHER},
    {"cu", DPRO_API_CLASS_OTHER},
    {"_ptsz", DPRO_API_CLASS_OTHER},
    {"", DPRO_API_CLASS_OTHER},
};

static void
test_api_classes(void)
{
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        dpro_api_class got = dpro_api_classify(spellings[i].name);
        if (got != spellings[i].cls)
            fprintf(stderr, "%s: %s, expected %s\n", spellings[i].name, dpro_api_class_name(got),
                    dpro_api_class_name(spellings[i].cls));
        CHECK(got == spellings[i].cls);
    }
    CHECK(dpro_api_classify(NULL) == DPRO_API_CLASS_OTHER);
    CHECK(strcmp(dpro_api_class_name(DPRO_API_CLASS_STREAM_WAIT), "stream_wait") == 0);
    CHECK(strcmp(dpro_api_class_name(DPRO_API_CLASS_COUNT), "unknown") == 0);
    CHECK(strcmp(dpro_api_class_name(-1), "unknown") == 0);
    for (int c = 0; c < DPRO_API_CLASS_COUNT; c++)
        CHECK(strcmp(dpro_api_class_name(c), "unknown") != 0);
}

static void
test_nccl_and_hash(void)
{
    CHECK_EQ(dpro_nccl_dtype_size(0), 1); /* ncclInt8 */
    CHECK_EQ(dpro_nccl_dtype_size(6), 2); /* ncclFloat16 */
    CHECK_EQ(dpro_nccl_dtype_size(7), 4); /* ncclFloat32 */
    CHECK_EQ(dpro_nccl_dtype_size(8), 8); /* ncclFloat64 */
    CHECK_EQ(dpro_nccl_dtype_size(9), 2); /* ncclBfloat16 */
    CHECK_EQ(dpro_nccl_dtype_size(11), 1);
    CHECK_EQ(dpro_nccl_dtype_size(12), 0);
    CHECK_EQ(dpro_nccl_dtype_size(UINT32_MAX), 0);

    CHECK(dpro_kernel_is_comm("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    CHECK(dpro_kernel_is_comm("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"));
    CHECK(dpro_kernel_is_comm("void NCCL_kernel<1>()"));
    CHECK(dpro_kernel_is_comm("rcclGenericKernel"));
    CHECK(!dpro_kernel_is_comm("volta_sgemm_128x64_nn"));
    CHECK(!dpro_kernel_is_comm("ncc"));
    CHECK(!dpro_kernel_is_comm(""));
    CHECK(!dpro_kernel_is_comm(NULL));

    /* The published FNV-1a 64 test vectors. */
    CHECK_EQ_U(dpro_fnv1a("", 0, DPRO_FNV1A_INIT), 0xcbf29ce484222325ull);
    CHECK_EQ_U(dpro_fnv1a("a", 1, DPRO_FNV1A_INIT), 0xaf63dc4c8601ec8cull);
    CHECK_EQ_U(dpro_fnv1a("foobar", 6, DPRO_FNV1A_INIT), 0x85944171f73967e8ull);
    CHECK_EQ_U(dpro_fnv1a("bar", 3, dpro_fnv1a("foo", 3, DPRO_FNV1A_INIT)),
               dpro_fnv1a("foobar", 6, DPRO_FNV1A_INIT));
}

/* The reader's cached classes agree with dpro_api_classify for every string of a file. */
static void
test_reader_classes(void)
{
    char dir[] = "/tmp/dpro-classify-XXXXXX", path[64];
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/rank0-x-1.dpro", dir);
    dpro_writer *w = NULL;
    REQUIRE(dpro_writer_open(path, NULL, &w, NULL, 0) == DPRO_OK);
    uint32_t ids[sizeof spellings / sizeof spellings[0]];
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++)
        CHECK(dpro_writer_intern(w, spellings[i].name[0] ? spellings[i].name : "x", &ids[i]) ==
              DPRO_OK);
    dpro_event ev = {.kind = DPRO_KIND_API, .subkind = DPRO_API_RUNTIME, .name = ids[0]};
    CHECK(dpro_writer_append(w, &ev) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);

    dpro_reader *r = NULL;
    REQUIRE(dpro_reader_open(path, &r, NULL, 0) == DPRO_OK);
    for (int pass = 0; pass < 2 && r; pass++) /* the second pass reads the cache */
        for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++)
            if (spellings[i].name[0])
                CHECK(dpro_reader_api_class(r, ids[i]) == (int)spellings[i].cls);
    CHECK(dpro_reader_api_class(r, 0) == DPRO_API_CLASS_OTHER);
    CHECK(dpro_reader_api_class(r, UINT32_MAX) == DPRO_API_CLASS_OTHER);
    CHECK(dpro_reader_api_class(NULL, 1) == DPRO_API_CLASS_OTHER);
    dpro_reader_close(r);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int
main(void)
{
    test_api_classes();
    test_nccl_and_hash();
    test_reader_classes();
    return tests_done();
}
