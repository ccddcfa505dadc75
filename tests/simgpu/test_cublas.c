/* test_cublas: the cuBLAS and cuBLASLt stand-ins.  Handle state and argument errors as
 * cuBLAS gives them; under the simple physics each GEMM is one kernel of exactly
 * 3 us + 2mnk·batch / 19.5 TFLOP/s (README), the same through cublasSgemm, cublasGemmEx,
 * the strided-batched call and cublasLtMatmul; under the world physics (a child process:
 * the physics is read once) the dtype and math decide the time: an fp16 GEMM on tensor
 * cores is several times faster than fp32 on the CUDA cores, TF32 math in between; the
 * entry points that are not simulated answer CUBLAS_STATUS_NOT_SUPPORTED. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cublas_v2.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_check.h"

#define CHECK_BLAS(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,                        \
                    cublasGetStatusName(s_));                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* cublas_api.h declares the half GEMM for C++ only (see cublas.c). */
cublasStatus_t CUBLASWINAPI cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int m, int n, int k,
                                        const __half_raw *alpha, const __half_raw *A, int lda,
                                        const __half_raw *B, int ldb, const __half_raw *beta,
                                        __half_raw *C, int ldc);

static char k_block; /* a long kernel that keeps the stream busy while the work is queued */

/* Device time in us of what `enqueue` puts on s: s is first blocked for 200 ms so that the
 * measured work starts exactly at the first event (no host time in the figure). */
static double
device_us(cudaStream_t s, void (*enqueue)(cudaStream_t, void *), void *arg)
{
    cudaEvent_t a, b;
    float ms = 0;
    dim3 g = {1, 1, 1}, blk = {32, 1, 1};
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    simgpu_set_next_launch_duration(200000000ULL);
    CHECK_CUDA(cudaLaunchKernel(&k_block, g, blk, NULL, 0, s));
    CHECK_CUDA(cudaEventRecord(a, s));
    enqueue(s, arg);
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    return ms * 1000.0;
}

struct gemm_args {
    cublasHandle_t h;
    cublasLtHandle_t lt;
    int m, n, k, batch;
    void *A, *B, *C;
    int how; /* 0 Sgemm, 1 GemmEx fp32, 2 GemmEx fp16, 3 strided-batched, 4 cublasLtMatmul,
              * 5 Hgemm */
};

static void
enqueue_gemm(cudaStream_t s, void *p)
{
    struct gemm_args *g = p;
    float one = 1, zero = 0;
    CHECK_BLAS(cublasSetStream(g->h, s));
    switch (g->how) {
    case 0:
        CHECK_BLAS(cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->A, g->m,
                               g->B, g->k, &zero, g->C, g->m));
        break;
    case 1:
        CHECK_BLAS(cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->A,
                                CUDA_R_32F, g->m, g->B, CUDA_R_32F, g->k, &zero, g->C, CUDA_R_32F,
                                g->m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    case 2:
        CHECK_BLAS(cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->A,
                                CUDA_R_16F, g->m, g->B, CUDA_R_16F, g->k, &zero, g->C, CUDA_R_16F,
                                g->m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    case 3:
        CHECK_BLAS(cublasGemmStridedBatchedEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, g->m, g->n, g->k,
                                              &one, g->A, CUDA_R_32F, g->k, (long long)g->m * g->k,
                                              g->B, CUDA_R_32F, g->k, (long long)g->k * g->n, &zero,
                                              g->C, CUDA_R_32F, g->m, (long long)g->m * g->n,
                                              g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    case 5: {
        __half_raw h1 = {0x3c00}, h0 = {0};
        CHECK_BLAS(cublasHgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &h1, g->A, g->m,
                               g->B, g->k, &h0, g->C, g->m));
        break;
    }
    default: {
        cublasLtMatmulDesc_t d;
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulHeuristicResult_t res;
        int n = 0;
        uint64_t ws = 1 << 20;
        cublasOperation_t t = CUBLAS_OP_T;
        CHECK_BLAS(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CHECK_BLAS(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
        CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, g->k, g->m, g->k));
        CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, g->k, g->n, g->k));
        CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, g->m, g->n, g->m));
        CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
        CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        if (g->h) {
            /* A cuBLAS handle serves as a cuBLASLt one (PyTorch casts one to the other),
             * but is not destroyed as one. */
            CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)g->h, d, la, lb, lc, lc,
                                                      pref, 1, &res, &n));
            CHECK(n == 1);
            CHECK(cublasLtDestroy((cublasLtHandle_t)g->h) == CUBLAS_STATUS_NOT_INITIALIZED);
        }
        CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(g->lt, d, la, lb, lc, lc, pref, 1, &res, &n));
        CHECK(n == 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize <= ws);
        CHECK(res.wavesCount > 0);
        CHECK_BLAS(cublasLtMatmul(g->lt, d, &one, g->A, la, g->B, lb, &zero, g->C, lc, g->C, lc,
                                  &res.algo, NULL, 0, s));
        CHECK_BLAS(cublasLtMatmulPreferenceDestroy(pref));
        CHECK_BLAS(cublasLtMatrixLayoutDestroy(la));
        CHECK_BLAS(cublasLtMatrixLayoutDestroy(lb));
        CHECK_BLAS(cublasLtMatrixLayoutDestroy(lc));
        CHECK_BLAS(cublasLtMatmulDescDestroy(d));
        break;
    }
    }
}

static void
test_handle(void)
{
    cublasHandle_t h;
    cudaStream_t s, got = NULL;
    cublasMath_t mode;
    cublasPointerMode_t pm;
    void *ws;
    float one = 1;
    CHECK_BLAS(cublasCreate(&h));
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_BLAS(cublasSetStream(h, s));
    CHECK_BLAS(cublasGetStream(h, &got));
    CHECK(got == s);
    CHECK_BLAS(cublasGetMathMode(h, &mode));
    CHECK(mode == CUBLAS_DEFAULT_MATH);
    CHECK_BLAS(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    CHECK_BLAS(cublasGetMathMode(h, &mode));
    CHECK(mode == CUBLAS_TF32_TENSOR_OP_MATH);
    CHECK(cublasSetMathMode(h, (cublasMath_t)7) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_BLAS(cublasGetPointerMode(h, &pm));
    CHECK(pm == CUBLAS_POINTER_MODE_HOST);
    CHECK_CUDA(cudaMalloc(&ws, 1 << 20));
    CHECK_BLAS(cublasSetWorkspace(h, ws, 1 << 20));
    CHECK(cublasSetWorkspace(h, (char *)ws + 8, 1024) == CUBLAS_STATUS_INVALID_VALUE);
    /* argument errors as cuBLAS gives them */
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one, ws, 32, ws, 64, &one, ws,
                      64) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 64, 64, &one, ws, 64, ws, 64, &one, ws,
                      64) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasSgemm(h, (cublasOperation_t)9, CUBLAS_OP_N, 64, 64, 64, &one, ws, 64, ws, 64, &one,
                      ws, 64) == CUBLAS_STATUS_INVALID_VALUE);
    /* nothing to do: success, no kernel */
    CHECK_BLAS(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 64, 64, &one, ws, 1, ws, 64, &one, ws, 1));
    /* not simulated: an error, never a silent success */
    CHECK(cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                      CUBLAS_DIAG_NON_UNIT, 4, 4, &one, ws, 4, ws,
                      4) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_BLAS(cublasDestroy(h));
    CHECK(cublasSetStream(NULL, s) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK_CUDA(cudaFree(ws));
}

static void
test_lt_descriptors(void)
{
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulAlgo_t algo;
    int32_t v = 0;
    uint64_t rows = 0;
    uint32_t tile = 0;
    size_t w = 0;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CHECK_BLAS(cublasLtCreate(&lt));
    CHECK(cublasLtGetVersion() > 0);
    CHECK_BLAS(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
    CHECK_BLAS(
        cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &v, sizeof(v), &w));
    CHECK(v == CUBLAS_COMPUTE_32F_FAST_TF32 && w == 4);
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 2) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 96, 32, 96));
    CHECK_BLAS(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, NULL, 0, &w));
    CHECK(w == 8);
    CHECK_BLAS(
        cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), &w));
    CHECK(rows == 96);
    CHECK_BLAS(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                                      CUDA_R_16BF, CUDA_R_16BF, 1, &algo));
    CHECK_BLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                    sizeof(tile), &w));
    CHECK(tile == CUBLASLT_MATMUL_TILE_128x128);
    memset(&algo, 0, sizeof(algo)); /* not an algorithm of this library */
    CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                               sizeof(tile), &w) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_BLAS(cublasLtMatrixLayoutDestroy(l));
    CHECK_BLAS(cublasLtMatmulDescDestroy(d));
    CHECK_BLAS(cublasLtDestroy(lt));
    CHECK(cublasLtDestroy(NULL) == CUBLAS_STATUS_NOT_INITIALIZED);
}

/* Simple physics: 3 us + FLOPs / 19.5 TFLOP/s for every way of calling the GEMM. */
static void
test_simple_times(void)
{
    struct gemm_args g = {0};
    cudaStream_t s;
    double want, t;
    int how;
    CHECK_BLAS(cublasCreate(&g.h));
    CHECK_BLAS(cublasLtCreate(&g.lt));
    CHECK_CUDA(cudaStreamCreate(&s));
    g.m = 1024;
    g.n = 512;
    g.k = 256;
    g.batch = 1;
    CHECK_CUDA(cudaMalloc(&g.A, (size_t)8 << 20));
    CHECK_CUDA(cudaMalloc(&g.B, (size_t)8 << 20));
    CHECK_CUDA(cudaMalloc(&g.C, (size_t)8 << 20));
    want = 3.0 + 2.0 * g.m * g.n * g.k / 19.5e12 * 1e6;
    for (how = 0; how <= 5; how++) {
        g.how = how;
        t = device_us(s, enqueue_gemm, &g);
        printf("simple physics, call %d: %.2f us (want %.2f)\n", how, t, want);
        CHECK(t > want * 0.99 && t < want * 1.01);
    }
    g.how = 3;
    g.batch = 8;
    t = device_us(s, enqueue_gemm, &g);
    want = 3.0 + 8 * 2.0 * g.m * g.n * g.k / 19.5e12 * 1e6;
    printf("simple physics, strided-batched x8: %.2f us (want %.2f)\n", t, want);
    CHECK(t > want * 0.99 && t < want * 1.01);
    CHECK_BLAS(cublasDestroy(g.h));
    CHECK_BLAS(cublasLtDestroy(g.lt));
}

/* World physics (h100): the dtype and the math decide the GEMM's time. */
static void
test_world_dtypes(void)
{
    struct gemm_args g = {0};
    cudaStream_t s;
    double f32, tf32, f16;
    CHECK_BLAS(cublasCreate(&g.h));
    CHECK_CUDA(cudaStreamCreate(&s));
    g.m = g.n = g.k = 4096;
    g.batch = 1;
    CHECK_CUDA(cudaMalloc(&g.A, (size_t)64 << 20));
    CHECK_CUDA(cudaMalloc(&g.B, (size_t)64 << 20));
    CHECK_CUDA(cudaMalloc(&g.C, (size_t)64 << 20));
    g.how = 1;
    f32 = device_us(s, enqueue_gemm, &g);
    CHECK_BLAS(cublasSetMathMode(g.h, CUBLAS_TF32_TENSOR_OP_MATH));
    tf32 = device_us(s, enqueue_gemm, &g);
    CHECK_BLAS(cublasSetMathMode(g.h, CUBLAS_DEFAULT_MATH));
    g.how = 2;
    f16 = device_us(s, enqueue_gemm, &g);
    printf("world physics (h100), 4096^3: fp32 %.0f us, tf32 %.0f us, fp16 %.0f us\n", f32, tf32,
           f16);
    /* peaks 66.9 (fp32), 494.7 (tf32), 989.4 (fp16) TFLOP/s; efficiencies differ by class */
    CHECK(f32 > 137.4e9 / 66.9e12 * 1e6 * 0.9); /* 2 x 4096^3 FLOPs at most at the fp32 peak */
    CHECK(tf32 < f32 / 3);
    CHECK(f16 < tf32 / 1.5);
    CHECK_BLAS(cublasDestroy(g.h));
}

int
main(int argc, char **argv)
{
    int st = 0;
    pid_t pid;
    if (argc > 1 && strcmp(argv[1], "world") == 0) {
        setenv("SIMGPU_PHYSICS", "world", 1);
        setenv("SIMGPU_PROFILE", "h100", 1);
        test_world_dtypes();
        return 0;
    }
    setenv("SIMGPU_PHYSICS", "simple", 1); /* before the device reads its configuration */
    setenv("SIMGPU_LAUNCH_US", "1", 1);
    test_handle();
    test_lt_descriptors();
    test_simple_times();
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "world", (char *)NULL);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("test_cublas: ok\n");
    return 0;
}
