/* cublas.c: the libcublas.so.13 stand-in of the simulated device.  Handles (stream,
 * workspace, math, pointer and atomics modes, emulation settings), the GEMM family
 * (S/D/C/Z/H gemm, strided-batched, batched, GemmEx, GemmStridedBatchedEx,
 * GemmBatchedEx, SgemmEx, 32- and 64-bit sizes), gemv, gemv strided-batched and geam:
 * each call is one kernel on the handle's stream whose time the device's physics takes
 * from the operation's shape, dtype and math (simblas.c).  Nothing is computed.  The
 * other entry points torch imports are in cublas_unsupported.c.
 *
 * Contract of every exported cublas* function: the cuBLAS documentation; errors as
 * cuBLAS gives them (CUBLAS_STATUS_NOT_INITIALIZED for a bad handle,
 * CUBLAS_STATUS_INVALID_VALUE for bad sizes, leading dimensions or enums,
 * CUBLAS_STATUS_EXECUTION_FAILED when the launch fails).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "simblas.h"

#define HANDLE_MAGIC SIMBLAS_HANDLE_MAGIC

struct cublasContext {
    uint32_t magic;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    cublasMath_t math;
    cublasPointerMode_t pointer_mode;
    cublasAtomicsMode_t atomics;
    int sm_count_target;
    cublasEmulationStrategy_t emulation;
    cudaEmulationSpecialValuesSupport special_values;
    cudaEmulationMantissaControl mantissa_control;
    int max_mantissa_bits, mantissa_bit_offset;
    int *mantissa_bit_count;
};

static int
handle_ok(cublasHandle_t h)
{
    return h && h->magic == HANDLE_MAGIC;
}

cublasStatus_t CUBLASWINAPI
cublasCreate_v2(cublasHandle_t *handle)
{
    cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
    struct cublasContext *h;
    if (!handle) {
        rc = CUBLAS_STATUS_INVALID_VALUE;
    } else if (cudaFree(NULL) != cudaSuccess) { /* the runtime's context, as cuBLAS does */
        rc = CUBLAS_STATUS_NOT_INITIALIZED;
    } else if (!(h = calloc(1, sizeof(*h)))) {
        rc = CUBLAS_STATUS_ALLOC_FAILED;
    } else {
        h->magic = HANDLE_MAGIC;
        h->math = CUBLAS_DEFAULT_MATH;
        h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
        h->atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
        h->emulation = CUBLAS_EMULATION_STRATEGY_DEFAULT;
        *handle = h;
    }
    return rc;
}

cublasStatus_t CUBLASWINAPI
cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION:
        *value = CUBLAS_VER_MAJOR;
        break;
    case MINOR_VERSION:
        *value = CUBLAS_VER_MINOR;
        break;
    case PATCH_LEVEL:
        *value = CUBLAS_VER_PATCH;
        break;
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

size_t CUBLASWINAPI
cublasGetCudartVersion(void)
{
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? (size_t)v : 0;
}

const char *CUBLASWINAPI
cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
        return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *CUBLASWINAPI
cublasGetStatusString(cublasStatus_t status)
{
    return cublasGetStatusName(status);
}

cublasStatus_t CUBLASWINAPI
cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!streamId)
        return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    /* cuBLAS wants 256-byte alignment of a user workspace */
    if (workspace && ((uintptr_t)workspace % 256) != 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_bytes = workspace ? workspaceSizeInBytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t *mode)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->atomics;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_ATOMICS_NOT_ALLOWED && mode != CUBLAS_ATOMICS_ALLOWED)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->atomics = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH &&
        base != CUBLAS_PEDANTIC_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH &&
        base != CUBLAS_FP32_EMULATED_BF16X9_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasGetSmCountTarget(cublasHandle_t handle, int *smCountTarget)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!smCountTarget)
        return CUBLAS_STATUS_INVALID_VALUE;
    *smCountTarget = handle->sm_count_target;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasSetSmCountTarget(cublasHandle_t handle, int smCountTarget)
{
    if (!handle_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (smCountTarget < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->sm_count_target = smCountTarget;
    return CUBLAS_STATUS_SUCCESS;
}

/* Emulation settings: kept and answered back (the device does not emulate: no numerics). */
#define EMU_ACCESSORS(Name, type, field)                                                           \
    cublasStatus_t CUBLASWINAPI cublasGet##Name(cublasHandle_t handle, type *v)                    \
    {                                                                                              \
        if (!handle_ok(handle))                                                                    \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
        if (!v)                                                                                    \
            return CUBLAS_STATUS_INVALID_VALUE;                                                    \
        *v = handle->field;                                                                        \
        return CUBLAS_STATUS_SUCCESS;                                                              \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublasSet##Name(cublasHandle_t handle, type v)                     \
    {                                                                                              \
        if (!handle_ok(handle))                                                                    \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
        handle->field = v;                                                                         \
        return CUBLAS_STATUS_SUCCESS;                                                              \
    }
EMU_ACCESSORS(EmulationStrategy, cublasEmulationStrategy_t, emulation)
EMU_ACCESSORS(EmulationSpecialValuesSupport, cudaEmulationSpecialValuesSupport, special_values)
EMU_ACCESSORS(FixedPointEmulationMantissaControl, cudaEmulationMantissaControl, mantissa_control)
EMU_ACCESSORS(FixedPointEmulationMaxMantissaBitCount, int, max_mantissa_bits)
EMU_ACCESSORS(FixedPointEmulationMantissaBitOffset, int, mantissa_bit_offset)
EMU_ACCESSORS(FixedPointEmulationMantissaBitCountPointer, int *, mantissa_bit_count)

/* ---- the operations ------------------------------------------------------------------- */
static int
op_char(cublasOperation_t op, char *c)
{
    switch (op) {
    case CUBLAS_OP_N:
        *c = 'n';
        return 0;
    case CUBLAS_OP_T:
        *c = 't';
        return 0;
    case CUBLAS_OP_C:
        *c = 'c';
        return 0;
    default:
        return -1;
    }
}

/* Whether C is read: beta != 0 when it is readable on the host, else assumed. */
static int
reads_c(cublasHandle_t h, const void *beta, size_t size)
{
    static const unsigned char zero[16];
    if (!beta || h->pointer_mode != CUBLAS_POINTER_MODE_HOST || size > sizeof(zero))
        return 1;
    return memcmp(beta, zero, size) != 0;
}

/* Whether fp32 math of this handle may use TF32 tensor cores. */
static int
tf32_allowed(cublasHandle_t h)
{
    unsigned base = (unsigned)h->math & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return base == CUBLAS_TF32_TENSOR_OP_MATH;
}

static cublasStatus_t
launch(cublasHandle_t h, const struct simblas_op *op)
{
    return simblas_launch(op, h->stream) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                        : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* One GEMM (or `batch` of them) after the argument checks cuBLAS makes. */
static cublasStatus_t
gemm(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
     int64_t k, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, cudaDataType at,
     cudaDataType bt, cudaDataType ct, int tensor, const void *beta, size_t beta_size)
{
    struct simblas_op op = {0};
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (op_char(transa, &op.ta) || op_char(transb, &op.tb) || m < 0 || n < 0 || k < 0 ||
        batch < 0 || lda < (transa == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
        ldb < (transb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) ||
        ldc < (m > 1 ? m : 1) || !simblas_type_size(at) || !simblas_type_size(bt) ||
        !simblas_type_size(ct))
        return CUBLAS_STATUS_INVALID_VALUE;
    op.level = 3;
    op.family = "gemm";
    op.m = m;
    op.n = n;
    op.k = k;
    op.batch = batch;
    op.a = at;
    op.b = bt;
    op.c = ct;
    op.tensor = tensor;
    op.reads_c = reads_c(h, beta, beta_size);
    return launch(h, &op);
}

/* Tensor cores for GemmEx-style calls: 16-bit and 8-bit inputs unless pedantic, fp32
 * with a fast compute type or the handle's TF32 math. */
static int
ex_tensor(cublasHandle_t h, cudaDataType at, cublasComputeType_t ct)
{
    if (ct == CUBLAS_COMPUTE_32F_PEDANTIC || ct == CUBLAS_COMPUTE_16F_PEDANTIC ||
        ct == CUBLAS_COMPUTE_64F || ct == CUBLAS_COMPUTE_64F_PEDANTIC ||
        ct == CUBLAS_COMPUTE_32I_PEDANTIC)
        return 0;
    if (simblas_type_size(at) <= 2)
        return 1;
    if (ct == CUBLAS_COMPUTE_32F_FAST_TF32 || ct == CUBLAS_COMPUTE_32F_FAST_16F ||
        ct == CUBLAS_COMPUTE_32F_FAST_16BF)
        return 1;
    return at == CUDA_R_32F && handle_ok(h) && tf32_allowed(h);
}

/* Size of alpha/beta for a compute type (host pointer mode). */
static size_t
scale_size(cublasComputeType_t ct)
{
    switch (ct) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        return 2;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
        return 8;
    default:
        return 4;
    }
}

#define GEMM_FAMILY(P, T, DT, TENSOR)                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemm_v2(                                                \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,   \
        int k, const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, T *C,      \
        int ldc)                                                                                   \
    {                                                                                              \
        return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, 1, DT, DT, DT, TENSOR, beta,   \
                    sizeof(T));                                                                    \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemm_v2_64(                                             \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,      \
        int64_t n, int64_t k, const T *alpha, const T *A, int64_t lda, const T *B, int64_t ldb,    \
        const T *beta, T *C, int64_t ldc)                                                          \
    {                                                                                              \
        return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, 1, DT, DT, DT, TENSOR, beta,   \
                    sizeof(T));                                                                    \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemmStridedBatched(                                     \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,   \
        int k, const T *alpha, const T *A, int lda, long long int strideA, const T *B, int ldb,    \
        long long int strideB, const T *beta, T *C, int ldc, long long int strideC,                \
        int batchCount)                                                                            \
    {                                                                                              \
        return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, DT, DT, DT,        \
                    TENSOR, beta, sizeof(T));                                                      \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemmStridedBatched_64(                                  \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,      \
        int64_t n, int64_t k, const T *alpha, const T *A, int64_t lda, long long int strideA,      \
        const T *B, int64_t ldb, long long int strideB, const T *beta, T *C, int64_t ldc,          \
        long long int strideC, int64_t batchCount)                                                 \
    {                                                                                              \
        return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, DT, DT, DT,        \
                    TENSOR, beta, sizeof(T));                                                      \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemmBatched(                                            \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,   \
        int k, const T *alpha, const T *const Aarray[], int lda, const T *const Barray[], int ldb, \
        const T *beta, T *const Carray[], int ldc, int batchCount)                                 \
    {                                                                                              \
        return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, DT, DT, DT,        \
                    TENSOR, beta, sizeof(T));                                                      \
    }

GEMM_FAMILY(S, float, CUDA_R_32F, tf32_allowed(handle))
GEMM_FAMILY(D, double, CUDA_R_64F, 0)
GEMM_FAMILY(C, cuComplex, CUDA_C_32F, tf32_allowed(handle))
GEMM_FAMILY(Z, cuDoubleComplex, CUDA_C_64F, 0)

/* The half GEMMs: cublas_api.h declares them for C++ only (with __half, which C lacks);
 * their prototypes here take __half_raw, the same 2-byte struct behind the same pointers. */
cublasStatus_t CUBLASWINAPI cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int m, int n, int k,
                                        const __half_raw *alpha, const __half_raw *A, int lda,
                                        const __half_raw *B, int ldb, const __half_raw *beta,
                                        __half_raw *C, int ldc);
cublasStatus_t CUBLASWINAPI cublasHgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const __half_raw *alpha, const __half_raw *A, int lda, long long int strideA,
    const __half_raw *B, int ldb, long long int strideB, const __half_raw *beta, __half_raw *C,
    int ldc, long long int strideC, int batchCount);
cublasStatus_t CUBLASWINAPI cublasHgemmBatched(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k,
                                               const __half_raw *alpha,
                                               const __half_raw *const Aarray[], int lda,
                                               const __half_raw *const Barray[], int ldb,
                                               const __half_raw *beta, __half_raw *const Carray[],
                                               int ldc, int batchCount);

cublasStatus_t CUBLASWINAPI
cublasHgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
            int k, const __half_raw *alpha, const __half_raw *A, int lda, const __half_raw *B,
            int ldb, const __half_raw *beta, __half_raw *C, int ldc)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, 1, CUDA_R_16F, CUDA_R_16F,
                CUDA_R_16F, 1, beta, sizeof(*beta));
}

cublasStatus_t CUBLASWINAPI
cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                          int m, int n, int k, const __half_raw *alpha, const __half_raw *A,
                          int lda, long long int strideA, const __half_raw *B, int ldb,
                          long long int strideB, const __half_raw *beta, __half_raw *C, int ldc,
                          long long int strideC, int batchCount)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, CUDA_R_16F, CUDA_R_16F,
                CUDA_R_16F, 1, beta, sizeof(*beta));
}

cublasStatus_t CUBLASWINAPI
cublasHgemmBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                   int n, int k, const __half_raw *alpha, const __half_raw *const Aarray[], int lda,
                   const __half_raw *const Barray[], int ldb, const __half_raw *beta,
                   __half_raw *const Carray[], int ldc, int batchCount)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, CUDA_R_16F, CUDA_R_16F,
                CUDA_R_16F, 1, beta, sizeof(*beta));
}

cublasStatus_t CUBLASWINAPI
cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
              int n, int k, const float *alpha, const void *A, cudaDataType Atype, int lda,
              const void *B, cudaDataType Btype, int ldb, const float *beta, void *C,
              cudaDataType Ctype, int ldc)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, 1, Atype, Btype, Ctype,
                ex_tensor(handle, Atype, CUBLAS_COMPUTE_32F), beta, sizeof(float));
}

cublasStatus_t CUBLASWINAPI
cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
             int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
             const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
             cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, 1, Atype, Btype, Ctype,
                ex_tensor(handle, Atype, computeType), beta, scale_size(computeType));
}

cublasStatus_t CUBLASWINAPI
cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const void *alpha,
                           const void *A, cudaDataType Atype, int lda, long long int strideA,
                           const void *B, cudaDataType Btype, int ldb, long long int strideB,
                           const void *beta, void *C, cudaDataType Ctype, int ldc,
                           long long int strideC, int batchCount, cublasComputeType_t computeType,
                           cublasGemmAlgo_t algo)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, Atype, Btype, Ctype,
                ex_tensor(handle, Atype, computeType), beta, scale_size(computeType));
}

cublasStatus_t CUBLASWINAPI
cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, const void *alpha, const void *const Aarray[],
                    cudaDataType Atype, int lda, const void *const Barray[], cudaDataType Btype,
                    int ldb, const void *beta, void *const Carray[], cudaDataType Ctype, int ldc,
                    int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    return gemm(handle, transa, transb, m, n, k, lda, ldb, ldc, batchCount, Atype, Btype, Ctype,
                ex_tensor(handle, Atype, computeType), beta, scale_size(computeType));
}

/* y = alpha op(A) x + beta y, A m x n, `batch` times. */
static cublasStatus_t
gemv(cublasHandle_t h, cublasOperation_t trans, int64_t m, int64_t n, int64_t lda, int64_t incx,
     int64_t incy, int64_t batch, cudaDataType t, const void *beta, size_t beta_size)
{
    struct simblas_op op = {0};
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (op_char(trans, &op.ta) || m < 0 || n < 0 || batch < 0 || lda < (m > 1 ? m : 1) ||
        incx == 0 || incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    op.level = 2;
    op.family = "gemv";
    op.tb = 'n';
    op.m = m;
    op.n = n;
    op.k = 1;
    op.batch = batch;
    op.a = op.b = op.c = t;
    op.reads_c = reads_c(h, beta, beta_size);
    return launch(h, &op);
}

/* C = alpha op(A) + beta op(B), m x n. */
static cublasStatus_t
geam(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
     int64_t lda, int64_t ldb, int64_t ldc, cudaDataType t, const void *beta, size_t beta_size)
{
    struct simblas_op op = {0};
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (op_char(transa, &op.ta) || op_char(transb, &op.tb) || m < 0 || n < 0 ||
        lda < (transa == CUBLAS_OP_N ? (m > 1 ? m : 1) : (n > 1 ? n : 1)) ||
        ldb < (transb == CUBLAS_OP_N ? (m > 1 ? m : 1) : (n > 1 ? n : 1)) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    op.level = 1;
    op.family = "geam";
    op.m = m;
    op.n = n;
    op.batch = 1;
    op.a = op.b = op.c = t;
    op.reads_c = reads_c(h, beta, beta_size); /* here: whether B is read */
    return launch(h, &op);
}

#define GEMV_FAMILY(P, T, DT)                                                                      \
    cublasStatus_t CUBLASWINAPI cublas##P##gemv_v2(                                                \
        cublasHandle_t handle, cublasOperation_t trans, int m, int n, const T *alpha, const T *A,  \
        int lda, const T *x, int incx, const T *beta, T *y, int incy)                              \
    {                                                                                              \
        return gemv(handle, trans, m, n, lda, incx, incy, 1, DT, beta, sizeof(T));                 \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemv_v2_64(                                             \
        cublasHandle_t handle, cublasOperation_t trans, int64_t m, int64_t n, const T *alpha,      \
        const T *A, int64_t lda, const T *x, int64_t incx, const T *beta, T *y, int64_t incy)      \
    {                                                                                              \
        return gemv(handle, trans, m, n, lda, incx, incy, 1, DT, beta, sizeof(T));                 \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##gemvStridedBatched_64(                                  \
        cublasHandle_t handle, cublasOperation_t trans, int64_t m, int64_t n, const T *alpha,      \
        const T *A, int64_t lda, long long int strideA, const T *x, int64_t incx,                  \
        long long int stridex, const T *beta, T *y, int64_t incy, long long int stridey,           \
        int64_t batchCount)                                                                        \
    {                                                                                              \
        return gemv(handle, trans, m, n, lda, incx, incy, batchCount, DT, beta, sizeof(T));        \
    }                                                                                              \
    cublasStatus_t CUBLASWINAPI cublas##P##geam_64(                                                \
        cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m,      \
        int64_t n, const T *alpha, const T *A, int64_t lda, const T *beta, const T *B,             \
        int64_t ldb, T *C, int64_t ldc)                                                            \
    {                                                                                              \
        return geam(handle, transa, transb, m, n, lda, ldb, ldc, DT, beta, sizeof(T));             \
    }

GEMV_FAMILY(S, float, CUDA_R_32F)
GEMV_FAMILY(D, double, CUDA_R_64F)
GEMV_FAMILY(C, cuComplex, CUDA_C_32F)
GEMV_FAMILY(Z, cuDoubleComplex, CUDA_C_64F)

/* ---- host <-> device copies --------------------------------------------------------------- */
/* A strided copy of `rows` x `cols` elements as one cudaMemcpyAsync when both sides are
 * contiguous; a strided one is not simulated (the runtime stand-in has no 2-D copy). */
static cublasStatus_t
copy_async(const char *fn, int64_t rows, int64_t cols, int64_t elem, const void *src, int64_t lds,
           void *dst, int64_t ldd, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elem <= 0 || lds < rows || ldd < rows || lds <= 0 || ldd <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (rows == 0 || cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    if ((lds != rows || ldd != rows) && cols > 1) {
        simblas_unsupported("libcublas.so.13", fn, "CUBLAS_STATUS_NOT_SUPPORTED (strided copy)");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return cudaMemcpyAsync(dst, src, (size_t)(rows * cols * elem), cudaMemcpyDefault, stream) ==
                   cudaSuccess
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_MAPPING_ERROR;
}

cublasStatus_t CUBLASWINAPI
cublasSetVectorAsync(int n, int elemSize, const void *hostPtr, int incx, void *devicePtr, int incy,
                     cudaStream_t stream)
{
    if (incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return incx == 1 && incy == 1 ? copy_async("cublasSetVectorAsync", n, 1, elemSize, hostPtr, n,
                                               devicePtr, n, stream)
                                  : copy_async("cublasSetVectorAsync", 1, n, elemSize, hostPtr,
                                               incx, devicePtr, incy, stream);
}

cublasStatus_t CUBLASWINAPI
cublasGetVectorAsync(int n, int elemSize, const void *devicePtr, int incx, void *hostPtr, int incy,
                     cudaStream_t stream)
{
    if (incx <= 0 || incy <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return incx == 1 && incy == 1 ? copy_async("cublasGetVectorAsync", n, 1, elemSize, devicePtr, n,
                                               hostPtr, n, stream)
                                  : copy_async("cublasGetVectorAsync", 1, n, elemSize, devicePtr,
                                               incx, hostPtr, incy, stream);
}

cublasStatus_t CUBLASWINAPI
cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb,
                     cudaStream_t stream)
{
    return copy_async("cublasSetMatrixAsync", rows, cols, elemSize, A, lda, B, ldb, stream);
}

cublasStatus_t CUBLASWINAPI
cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb,
                     cudaStream_t stream)
{
    return copy_async("cublasGetMatrixAsync", rows, cols, elemSize, A, lda, B, ldb, stream);
}
