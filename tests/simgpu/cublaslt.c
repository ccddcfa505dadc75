/* cublaslt.c: the libcublasLt.so.13 stand-in of the simulated device: handles, matmul
 * descriptors, matrix layouts, preferences, algorithms (init, configuration attributes,
 * check, heuristics) and cublasLtMatmul, one kernel on the given stream whose time the
 * device's physics takes from the shape, the types, the compute type and the epilogue
 * (simblas.c).  Nothing is computed.
 *
 * Descriptors keep every attribute set on them and answer it back; the ones the time
 * depends on are read: TRANSA/TRANSB, COMPUTE_TYPE, EPILOGUE, BIAS_DATA_TYPE (matmul),
 * TYPE, ROWS, COLS, LD, BATCH_COUNT (layouts), MAX_WORKSPACE_BYTES (preferences).  The
 * heuristics offer one algorithm (a 128x128 or 64x64 tile by the output's size) that
 * needs no workspace.
 *
 * Contract of every exported cublasLt* function: the cuBLASLt documentation; errors as
 * cuBLASLt gives them (CUBLAS_STATUS_NOT_INITIALIZED for a bad handle,
 * CUBLAS_STATUS_INVALID_VALUE for bad descriptors, attributes, sizes or shapes that do not
 * agree, CUBLAS_STATUS_NOT_SUPPORTED for types the device does not know,
 * CUBLAS_STATUS_EXECUTION_FAILED when the launch fails).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cublasLt.h declares cublasLtLoggerForceDisable() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop

#include "simblas.h"

#define LT_MAGIC 0x43424c54U /* "CBLT" */
#define DESC_MAGIC 0x4c54444dU
#define LAYOUT_MAGIC 0x4c544c59U
#define PREF_MAGIC 0x4c545052U
#define ALGO_MAGIC 0x53494d42U
#define NATTR 48
#define ATTR_BYTES 16
#define ALGO_WORDS 9 /* CUBLASLT_ALGO_CONFIG_ID .. CLUSTER_SHAPE_ID, uint32 each */

struct cublasLtContext {
    uint32_t magic;
};

/* The attributes of a descriptor: what was set (or the default), by attribute id. */
struct attrs {
    uint32_t magic;
    unsigned char set[NATTR];
    unsigned char size[NATTR];
    unsigned char v[NATTR][ATTR_BYTES];
};

static void
attr_put(struct attrs *a, unsigned id, const void *buf, size_t size)
{
    a->set[id] = 1;
    a->size[id] = (unsigned char)size;
    memset(a->v[id], 0, ATTR_BYTES);
    memcpy(a->v[id], buf, size);
}

static void
attr_put_u32(struct attrs *a, unsigned id, uint32_t v)
{
    attr_put(a, id, &v, sizeof(v));
}

static void
attr_put_u64(struct attrs *a, unsigned id, uint64_t v)
{
    attr_put(a, id, &v, sizeof(v));
}

static uint32_t
attr_u32(const struct attrs *a, unsigned id)
{
    uint32_t v = 0;
    if (a->set[id])
        memcpy(&v, a->v[id], sizeof(v));
    return v;
}

static uint64_t
attr_u64(const struct attrs *a, unsigned id)
{
    uint64_t v = 0;
    if (a->set[id])
        memcpy(&v, a->v[id], a->size[id] < sizeof(v) ? a->size[id] : sizeof(v));
    return v;
}

/* Set: the size must be the attribute's (`want`, 0: anything up to 16 bytes). */
static cublasStatus_t
attr_set(struct attrs *a, uint32_t magic, unsigned id, const void *buf, size_t size, size_t want)
{
    if (!a || a->magic != magic)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (id >= NATTR || !buf || size == 0 || size > ATTR_BYTES || (want && size != want))
        return CUBLAS_STATUS_INVALID_VALUE;
    attr_put(a, id, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* Get, with cuBLASLt's size query: sizeInBytes 0 and sizeWritten set asks the size. */
static cublasStatus_t
attr_get(const struct attrs *a, uint32_t magic, unsigned id, void *buf, size_t size,
         size_t *written)
{
    size_t have;
    if (!a || a->magic != magic)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (id >= NATTR)
        return CUBLAS_STATUS_INVALID_VALUE;
    have = a->set[id] ? a->size[id] : 4;
    if (size == 0 && written) {
        *written = have;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size < have)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(buf, 0, have);
    if (a->set[id])
        memcpy(buf, a->v[id], have);
    if (written)
        *written = have;
    return CUBLAS_STATUS_SUCCESS;
}

/* A cuBLASLt handle, or a cuBLAS one used as such (what PyTorch does). */
static int
lt_ok(cublasLtHandle_t h)
{
    return h && (h->magic == LT_MAGIC || h->magic == SIMBLAS_HANDLE_MAGIC);
}

static struct attrs *
as_attrs(const void *p, uint32_t magic)
{
    struct attrs *a = (struct attrs *)(uintptr_t)p;
    return a && a->magic == magic ? a : NULL;
}

cublasStatus_t CUBLASWINAPI
cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    struct cublasLtContext *h;
    if (!lightHandle)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (cudaFree(NULL) != cudaSuccess)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h = calloc(1, sizeof(*h));
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = LT_MAGIC;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle || lightHandle->magic != LT_MAGIC)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

size_t CUBLASWINAPI
cublasLtGetVersion(void)
{
    return CUBLAS_VERSION;
}

size_t CUBLASWINAPI
cublasLtGetCudartVersion(void)
{
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? (size_t)v : 0;
}

/* ---- matmul descriptors ----------------------------------------------------------------- */
cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                         cudaDataType_t scaleType)
{
    struct attrs *a;
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    a = calloc(1, sizeof(*a));
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    a->magic = DESC_MAGIC;
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, (uint32_t)computeType);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_SCALE_TYPE, (uint32_t)scaleType);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_POINTER_MODE, 0);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_N);
    attr_put_u32(a, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
    *matmulDesc = (cublasLtMatmulDesc_t)(void *)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    struct attrs *a = as_attrs(matmulDesc, DESC_MAGIC);
    if (!a)
        return CUBLAS_STATUS_INVALID_VALUE;
    a->magic = 0;
    free(a);
    return CUBLAS_STATUS_SUCCESS;
}

static size_t
desc_attr_size(unsigned id)
{
    switch (id) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
    case CUBLASLT_MATMUL_DESC_TRANSC:
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        return 4;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
        return sizeof(void *);
    default:
        return 0;
    }
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes)
{
    return attr_set((struct attrs *)(void *)matmulDesc, DESC_MAGIC, (unsigned)attr, buf,
                    sizeInBytes, desc_attr_size((unsigned)attr));
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                               void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
    return attr_get((struct attrs *)(void *)matmulDesc, DESC_MAGIC, (unsigned)attr, buf,
                    sizeInBytes, sizeWritten);
}

/* ---- matrix layouts ---------------------------------------------------------------------- */
cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                           uint64_t cols, int64_t ld)
{
    struct attrs *a;
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    a = calloc(1, sizeof(*a));
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    a->magic = LAYOUT_MAGIC;
    attr_put_u32(a, CUBLASLT_MATRIX_LAYOUT_TYPE, (uint32_t)type);
    attr_put_u32(a, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
    attr_put_u64(a, CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    attr_put_u64(a, CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    attr_put_u64(a, CUBLASLT_MATRIX_LAYOUT_LD, (uint64_t)ld);
    attr_put_u32(a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    attr_put_u64(a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
    *matLayout = (cublasLtMatrixLayout_t)(void *)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    struct attrs *a = as_attrs(matLayout, LAYOUT_MAGIC);
    if (!a)
        return CUBLAS_STATUS_INVALID_VALUE;
    a->magic = 0;
    free(a);
    return CUBLAS_STATUS_SUCCESS;
}

static size_t
layout_attr_size(unsigned id)
{
    switch (id) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        return 4;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
    case CUBLASLT_MATRIX_LAYOUT_COLS:
    case CUBLASLT_MATRIX_LAYOUT_LD:
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        return 8;
    default:
        return 0;
    }
}

cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                 cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                 size_t sizeInBytes)
{
    return attr_set((struct attrs *)(void *)matLayout, LAYOUT_MAGIC, (unsigned)attr, buf,
                    sizeInBytes, layout_attr_size((unsigned)attr));
}

cublasStatus_t CUBLASWINAPI
cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                 cublasLtMatrixLayoutAttribute_t attr, void *buf,
                                 size_t sizeInBytes, size_t *sizeWritten)
{
    return attr_get((struct attrs *)(void *)matLayout, LAYOUT_MAGIC, (unsigned)attr, buf,
                    sizeInBytes, sizeWritten);
}

/* ---- preferences ------------------------------------------------------------------------- */
cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    struct attrs *a;
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    a = calloc(1, sizeof(*a));
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    a->magic = PREF_MAGIC;
    attr_put_u32(a, CUBLASLT_MATMUL_PREF_SEARCH_MODE, 0);
    attr_put_u64(a, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 0);
    *pref = (cublasLtMatmulPreference_t)(void *)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    struct attrs *a = as_attrs(pref, PREF_MAGIC);
    if (!a)
        return CUBLAS_STATUS_INVALID_VALUE;
    a->magic = 0;
    free(a);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                     size_t sizeInBytes)
{
    return attr_set((struct attrs *)(void *)pref, PREF_MAGIC, (unsigned)attr, buf, sizeInBytes,
                    attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ? 8 : 0);
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                     size_t sizeInBytes, size_t *sizeWritten)
{
    return attr_get((struct attrs *)(void *)pref, PREF_MAGIC, (unsigned)attr, buf, sizeInBytes,
                    sizeWritten);
}

/* ---- the operation ----------------------------------------------------------------------- */
static int
op_char(uint32_t op, char *c)
{
    int rc = 0;
    if (op == CUBLAS_OP_N)
        *c = 'n';
    else if (op == CUBLAS_OP_T)
        *c = 't';
    else if (op == CUBLAS_OP_C)
        *c = 'c';
    else
        rc = -1;
    return rc;
}

/* Builds the operation of a matmul from its descriptors; CUBLAS_STATUS_SUCCESS or the
 * error cuBLASLt would give. */
static cublasStatus_t
describe(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
         cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc, int beta_nonzero,
         struct simblas_op *op)
{
    const struct attrs *d = as_attrs(desc, DESC_MAGIC), *a = as_attrs(Adesc, LAYOUT_MAGIC);
    const struct attrs *b = as_attrs(Bdesc, LAYOUT_MAGIC), *c = as_attrs(Cdesc, LAYOUT_MAGIC);
    const struct attrs *dd = as_attrs(Ddesc ? Ddesc : Cdesc, LAYOUT_MAGIC);
    uint64_t ar, ac, br, bc, m, n, k, kb;
    uint32_t ct, epi, batch;
    size_t sd;
    if (!d || !a || !b || !c || !dd)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(op, 0, sizeof(*op));
    if (op_char(attr_u32(d, CUBLASLT_MATMUL_DESC_TRANSA), &op->ta) ||
        op_char(attr_u32(d, CUBLASLT_MATMUL_DESC_TRANSB), &op->tb))
        return CUBLAS_STATUS_INVALID_VALUE;
    ar = attr_u64(a, CUBLASLT_MATRIX_LAYOUT_ROWS);
    ac = attr_u64(a, CUBLASLT_MATRIX_LAYOUT_COLS);
    br = attr_u64(b, CUBLASLT_MATRIX_LAYOUT_ROWS);
    bc = attr_u64(b, CUBLASLT_MATRIX_LAYOUT_COLS);
    m = attr_u64(dd, CUBLASLT_MATRIX_LAYOUT_ROWS);
    n = attr_u64(dd, CUBLASLT_MATRIX_LAYOUT_COLS);
    k = op->ta == 'n' ? ac : ar;
    kb = op->tb == 'n' ? br : bc;
    if ((op->ta == 'n' ? ar : ac) != m || (op->tb == 'n' ? bc : br) != n || k != kb ||
        attr_u64(c, CUBLASLT_MATRIX_LAYOUT_ROWS) != m ||
        attr_u64(c, CUBLASLT_MATRIX_LAYOUT_COLS) != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    op->a = (cudaDataType)attr_u32(a, CUBLASLT_MATRIX_LAYOUT_TYPE);
    op->b = (cudaDataType)attr_u32(b, CUBLASLT_MATRIX_LAYOUT_TYPE);
    op->c = (cudaDataType)attr_u32(dd, CUBLASLT_MATRIX_LAYOUT_TYPE);
    if (!simblas_type_size(op->a) || !simblas_type_size(op->b) || !simblas_type_size(op->c))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    ct = attr_u32(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
    if (ct == CUBLAS_COMPUTE_32F_PEDANTIC || ct == CUBLAS_COMPUTE_64F ||
        ct == CUBLAS_COMPUTE_64F_PEDANTIC || ct == CUBLAS_COMPUTE_16F_PEDANTIC)
        op->tensor = 0;
    else
        op->tensor = simblas_type_size(op->a) <= 2 || ct == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                     ct == CUBLAS_COMPUTE_32F_FAST_16F || ct == CUBLAS_COMPUTE_32F_FAST_16BF;
    batch = attr_u32(dd, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    op->level = 3;
    op->family = "gemm";
    op->m = (int64_t)m;
    op->n = (int64_t)n;
    op->k = (int64_t)k;
    op->batch = batch ? batch : 1;
    op->reads_c = beta_nonzero;
    /* The epilogue's extra traffic: a bias vector read, an auxiliary matrix written, a
     * bias gradient reduced into a vector. */
    epi = attr_u32(d, CUBLASLT_MATMUL_DESC_EPILOGUE);
    sd = simblas_type_size(op->c);
    if (epi & CUBLASLT_EPILOGUE_BIAS)
        op->extra_bytes += (double)m * sd * op->batch;
    if (epi & 128)
        op->extra_bytes += (double)m * n * sd * op->batch;
    if (epi & (16 | CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB))
        op->extra_bytes += (double)(m > n ? m : n) * sd * op->batch;
    return CUBLAS_STATUS_SUCCESS;
}

/* The one algorithm offered for op: tile 128 (id 1) or 64 (id 0), no workspace. */
static void
algo_fill(cublasLtMatmulAlgo_t *algo, int id)
{
    uint32_t words[16] = {0};
    words[CUBLASLT_ALGO_CONFIG_ID] = (uint32_t)id;
    words[CUBLASLT_ALGO_CONFIG_TILE_ID] =
        id ? CUBLASLT_MATMUL_TILE_128x128 : CUBLASLT_MATMUL_TILE_64x64;
    words[CUBLASLT_ALGO_CONFIG_SPLITK_NUM] = 1;
    words[15] = ALGO_MAGIC;
    memset(algo, 0, sizeof(*algo));
    memcpy(algo->data, words, sizeof(words));
}

static int
algo_ok(const cublasLtMatmulAlgo_t *algo)
{
    uint32_t words[16];
    memcpy(words, algo->data, sizeof(words));
    return words[15] == ALGO_MAGIC;
}

static void
result_fill(cublasLtMatmulHeuristicResult_t *r, const struct simblas_op *op)
{
    int big = op->m >= 128 && op->n >= 128, t = big ? 128 : 64;
    double tiles = (double)((op->m + t - 1) / t) * (double)((op->n + t - 1) / t) * op->batch;
    memset(r, 0, sizeof(*r));
    algo_fill(&r->algo, big);
    r->workspaceSize = 0;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = (float)(tiles / simblas_sm_count());
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle, cublasComputeType_t computeType,
                       cudaDataType_t scaleType, cudaDataType_t Atype, cudaDataType_t Btype,
                       cudaDataType_t Ctype, cudaDataType_t Dtype, int algoId,
                       cublasLtMatmulAlgo_t *algo)
{
    if (!lt_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!algo || algoId < 0 || algoId > 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!simblas_type_size(Atype) || !simblas_type_size(Btype) || !simblas_type_size(Ctype) ||
        !simblas_type_size(Dtype))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    algo_fill(algo, algoId);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                     cublasLtMatmulAlgoConfigAttributes_t attr, const void *buf,
                                     size_t sizeInBytes)
{
    uint32_t words[16];
    if (!algo || !algo_ok(algo) || (unsigned)attr >= ALGO_WORDS || !buf || sizeInBytes != 4)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(words, algo->data, sizeof(words));
    memcpy(&words[attr], buf, 4);
    memcpy(algo->data, words, sizeof(words));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                     cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
                                     size_t sizeInBytes, size_t *sizeWritten)
{
    uint32_t words[16];
    if (!algo || !algo_ok(algo) || (unsigned)attr >= ALGO_WORDS)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (sizeInBytes == 0 && sizeWritten) {
        *sizeWritten = 4;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || sizeInBytes < 4)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(words, algo->data, sizeof(words));
    memcpy(buf, &words[attr], 4);
    if (sizeWritten)
        *sizeWritten = 4;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                        cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                        cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                        const cublasLtMatmulAlgo_t *algo, cublasLtMatmulHeuristicResult_t *result)
{
    struct simblas_op op;
    cublasStatus_t rc;
    cublasLtMatmulAlgo_t keep;
    if (!lt_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!algo || !result || !algo_ok(algo))
        return CUBLAS_STATUS_INVALID_VALUE;
    rc = describe(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, 1, &op);
    if (rc != CUBLAS_STATUS_SUCCESS)
        return rc;
    keep = *algo; /* algo may point to result->algo */
    result_fill(result, &op);
    result->algo = keep;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                               cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                               cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                               cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                               cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                               int *returnAlgoCount)
{
    struct simblas_op op;
    cublasStatus_t rc;
    if (!lt_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!as_attrs(preference, PREF_MAGIC) || requestedAlgoCount < 1 || !heuristicResultsArray ||
        !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    rc = describe(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, 1, &op);
    if (rc != CUBLAS_STATUS_SUCCESS)
        return rc;
    result_fill(&heuristicResultsArray[0], &op);
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI
cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
               const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
               cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
               cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
               const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
               cudaStream_t stream)
{
    struct simblas_op op;
    cublasStatus_t rc;
    const struct attrs *d = as_attrs(computeDesc, DESC_MAGIC);
    int beta_nonzero = 1;
    if (!lt_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!d || !alpha || !beta || (algo && !algo_ok(algo)))
        return CUBLAS_STATUS_INVALID_VALUE;
    /* beta on the host (pointer mode 0): C is read only when beta != 0 */
    if (attr_u32(d, CUBLASLT_MATMUL_DESC_POINTER_MODE) == 0) {
        uint32_t st = attr_u32(d, CUBLASLT_MATMUL_DESC_SCALE_TYPE);
        size_t bs = st == CUDA_R_64F ? 8 : st == CUDA_R_16F || st == CUDA_R_16BF ? 2 : 4;
        static const unsigned char zero[8];
        beta_nonzero = memcmp(beta, zero, bs) != 0;
    }
    rc = describe(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, beta_nonzero, &op);
    if (rc != CUBLAS_STATUS_SUCCESS)
        return rc;
    return simblas_launch(&op, stream) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                      : CUBLAS_STATUS_EXECUTION_FAILED;
}
