/* test_nccl_data: one rank of the test of the data the NCCL stand-in moves, started by
 * test_nccl_data.sh under simrun.  Every rank makes every rank's input itself (a function
 * of rank and index), so it computes the exact expected result locally: all-reduce with
 * every operation on every type, PreMulSum (host and device scalars), reduce, broadcast,
 * all-gather and reduce-scatter (in and out of place), a grouped send/recv ring, an
 * all-to-all of grouped sends and receives (the own block included) and ncclAlltoAll,
 * gather.  The reference arithmetic is the test's own: fp16 in the compiler's _Float16,
 * bf16 in float rounded to nearest even, fp8 in float rounded to the nearest entry of the
 * format's table (the fold in rank order, each step rounded once: what the stand-in
 * promises, tests/simgpu/README.md).  Exits nonzero naming the first wrong element. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "simgpu_check.h"
#include "simrun_rdzv.h"

#define CHECK_NCCL(call) CHECK((call) == ncclSuccess)

static int g_rank, g_n, g_fail;
static ncclComm_t g_comm;
static cudaStream_t g_s;

/* ---- the element types, by the test's own arithmetic ------------------------------- */
static size_t
esize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return sizeof(uint8_t);
    case ncclFloat16:
    case ncclBfloat16:
        return sizeof(uint16_t);
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return sizeof(uint32_t);
    default: /* ncclInt64, ncclUint64, ncclFloat64 */
        return sizeof(uint64_t);
    }
}

static int
is_int(ncclDataType_t t)
{
    return t <= ncclUint64;
}

static double
fp8_value(uint32_t b, int e4m3)
{
    int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    int e = (int)((b >> mb) & (e4m3 ? 15 : 31)), m = (int)(b & ((1u << mb) - 1));
    double v = e ? ldexp(1.0 + m / (double)(1 << mb), e - bias) : ldexp(m, 1 - bias - mb);
    return (b & 0x80) ? -v : v;
}

static int
fp8_valid(uint32_t b, int e4m3)
{
    return e4m3 ? (b & 0x7f) != 0x7f : ((b >> 2) & 31) != 31;
}

/* Nearest fp8 value to x (ties: even code; the sign kept, -0 included), saturated to the
 * largest finite. */
static uint32_t
fp8_round(double x, int e4m3)
{
    uint32_t best = 0;
    double bd = INFINITY;
    if (signbit(x))
        return fp8_round(-x, e4m3) | 0x80;
    for (uint32_t b = 0; b < 128; b++) {
        double d;
        if (!fp8_valid(b, e4m3))
            continue;
        d = fabs(fp8_value(b, e4m3) - x);
        if (d < bd || (d == bd && !(b & 1))) {
            bd = d;
            best = b;
        }
    }
    return best;
}

static uint32_t
bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u + 0x7fff + ((u >> 16) & 1)) >> 16;
}

static double
to_double(ncclDataType_t t, uint64_t b)
{
    float f;
    double d;
    uint32_t u;
    _Float16 h;
    uint16_t hb = (uint16_t)b;
    switch (t) {
    case ncclFloat16:
        memcpy(&h, &hb, 2);
        return (double)h;
    case ncclBfloat16:
        u = (uint32_t)b << 16;
        memcpy(&f, &u, 4);
        return f;
    case ncclFloat32:
        u = (uint32_t)b;
        memcpy(&f, &u, 4);
        return f;
    case ncclFloat64:
        memcpy(&d, &b, 8);
        return d;
    case ncclFloat8e4m3:
        return fp8_value((uint32_t)b, 1);
    default:
        return fp8_value((uint32_t)b, 0);
    }
}

/* x (an exact float result of two values of t) rounded to t, as bits. */
static uint64_t
from_float(ncclDataType_t t, float x)
{
    _Float16 h;
    uint16_t hb;
    uint32_t u;
    switch (t) {
    case ncclFloat16:
        h = (_Float16)x;
        memcpy(&hb, &h, 2);
        return hb;
    case ncclBfloat16:
        return bf16_round(x);
    case ncclFloat32:
        memcpy(&u, &x, 4);
        return u;
    case ncclFloat8e4m3:
        return fp8_round(x, 1);
    default:
        return fp8_round(x, 0);
    }
}

static uint64_t
from_double64(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

/* Sign-extended or zero-extended integer value of bits b of integer type t. */
static int64_t
ival(ncclDataType_t t, uint64_t b)
{
    switch (t) {
    case ncclInt8:
        return (int8_t)b;
    case ncclUint8:
        return (uint8_t)b;
    case ncclInt32:
        return (int32_t)b;
    case ncclUint32:
        return (uint32_t)b;
    default:
        return (int64_t)b;
    }
}

static uint64_t
mask(ncclDataType_t t, uint64_t v)
{
    return esize(t) == 8 ? v : v & ((1ULL << (8 * esize(t))) - 1);
}

/* a op b in t (op: sum, prod, max, min), as bits. */
static uint64_t
ref_op(ncclDataType_t t, uint64_t a, uint64_t b, ncclRedOp_t op)
{
    if (is_int(t)) {
        int64_t x = ival(t, a), y = ival(t, b);
        int uns = t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
        int gt = uns ? (uint64_t)x > (uint64_t)y : x > y;
        if (op == ncclSum)
            return mask(t, (uint64_t)x + (uint64_t)y);
        if (op == ncclProd)
            return mask(t, (uint64_t)x * (uint64_t)y);
        return op == ncclMax ? (gt ? a : b) : (gt ? b : a);
    }
    if (op == ncclMax || op == ncclMin) {
        double x = to_double(t, a), y = to_double(t, b);
        return op == ncclMax ? (y > x ? b : a) : (y < x ? b : a);
    }
    if (t == ncclFloat64) {
        double x = to_double(t, a), y = to_double(t, b);
        return from_double64(op == ncclSum ? x + y : x * y);
    }
    {
        float x = (float)to_double(t, a), y = (float)to_double(t, b);
        return from_float(t, op == ncclSum ? x + y : x * y);
    }
}

/* Element i of rank r's input of type t (salt varies it between operations). */
static uint64_t
gen(ncclDataType_t t, int r, size_t i, int salt)
{
    uint64_t k = (uint64_t)r * 7919 + i * 104729 + (uint64_t)salt * 31337;
    uint64_t h = (k ^ (k >> 7)) * 0x9e3779b97f4a7c15ULL;
    double v = ((double)((h >> 20) % 2001) - 1000.0) / 1237.0;
    if (is_int(t))
        return mask(t, h >> 11);
    if (t == ncclFloat64)
        return from_double64(v);
    return from_float(t, (float)v);
}

static void
put(void *buf, ncclDataType_t t, size_t i, uint64_t b)
{
    memcpy((char *)buf + i * esize(t), &b, esize(t)); /* little-endian */
}

static uint64_t
get(const void *buf, ncclDataType_t t, size_t i)
{
    uint64_t b = 0;
    memcpy(&b, (const char *)buf + i * esize(t), esize(t));
    return b;
}

/* The reduction of element i over all ranks' inputs (of element index base + i): a fold
 * in rank order; scal (bits of t) pre-multiplies each input when premul. */
static uint64_t
ref_reduce(ncclDataType_t t, ncclRedOp_t op, size_t idx, int salt, int premul, uint64_t scal)
{
    ncclRedOp_t f = op == ncclAvg ? ncclSum : op;
    uint64_t acc = 0;
    if (op == ncclAvg && !is_int(t)) {
        premul = 1;
        scal = t == ncclFloat64 ? from_double64(1.0 / g_n) : from_float(t, 1.0f / (float)g_n);
    }
    for (int r = 0; r < g_n; r++) {
        uint64_t x = gen(t, r, idx, salt);
        if (premul)
            x = ref_op(t, x, scal, ncclProd);
        acc = r == 0 ? x : ref_op(t, acc, x, f);
    }
    if (op == ncclAvg && is_int(t)) {
        int uns = t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
        acc = uns ? mask(t, (uint64_t)ival(t, acc) / (uint64_t)g_n)
                  : mask(t, (uint64_t)(ival(t, acc) / g_n));
    }
    return acc;
}

/* ---- helpers -------------------------------------------------------------------------- */
static void *
dev_from(const void *host, size_t bytes)
{
    void *d = NULL;
    CHECK_CUDA(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes && host)
        CHECK_CUDA(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void
expect(const char *what, ncclDataType_t t, const void *dev, const void *want, size_t n)
{
    char *got = malloc(n * esize(t) + 1);
    CHECK(got != NULL);
    CHECK_CUDA(cudaStreamSynchronize(g_s));
    CHECK_CUDA(cudaMemcpy(got, dev, n * esize(t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (get(got, t, i) != get(want, t, i)) {
            fprintf(stderr,
                    "rank %d: %s (type %d, %zu elements): element %zu is %#llx, want %#llx\n",
                    g_rank, what, (int)t, n, i, (unsigned long long)get(got, t, i),
                    (unsigned long long)get(want, t, i));
            g_fail = 1;
            break;
        }
    free(got);
}

/* Rank r's input of n elements (salt) in a new host buffer. */
static void *
input(ncclDataType_t t, int r, size_t n, int salt)
{
    char *h = malloc(n * esize(t) + 1);
    CHECK(h != NULL);
    for (size_t i = 0; i < n; i++)
        put(h, t, i, gen(t, r, i, salt));
    return h;
}

/* ---- the operations ----------------------------------------------------------------- */
static void
test_allreduce(ncclDataType_t t, ncclRedOp_t op, size_t n, int inplace)
{
    int salt = (int)t * 10 + (int)op;
    void *h = input(t, g_rank, n, salt), *want = malloc(n * esize(t) + 1);
    void *d = dev_from(h, n * esize(t)), *o = inplace ? d : dev_from(NULL, n * esize(t));
    char what[64];
    for (size_t i = 0; i < n; i++)
        put(want, t, i, ref_reduce(t, op, i, salt, 0, 0));
    CHECK_NCCL(ncclAllReduce(d, o, n, t, op, g_comm, g_s));
    snprintf(what, sizeof(what), "allreduce op %d%s", (int)op, inplace ? " in place" : "");
    expect(what, t, o, want, n);
    if (o != d)
        CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(d));
    free(h);
    free(want);
}

static void
test_premul(ncclDataType_t t, uint64_t scal, int on_device, size_t n)
{
    int salt = 77 + (int)t;
    void *h = input(t, g_rank, n, salt), *want = malloc(n * esize(t) + 1);
    void *d = dev_from(h, n * esize(t)), *sd = dev_from(&scal, esize(t));
    ncclRedOp_t op;
    for (size_t i = 0; i < n; i++)
        put(want, t, i, ref_reduce(t, ncclSum, i, salt, 1, scal));
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, on_device ? sd : (void *)&scal, t,
                                        on_device ? ncclScalarDevice : ncclScalarHostImmediate,
                                        g_comm));
    CHECK_NCCL(ncclAllReduce(d, d, n, t, op, g_comm, g_s));
    expect(on_device ? "premulsum (device scalar)" : "premulsum", t, d, want, n);
    CHECK_NCCL(ncclRedOpDestroy(op, g_comm));
    CHECK_CUDA(cudaFree(sd));
    CHECK_CUDA(cudaFree(d));
    free(h);
    free(want);
}

static void
test_reduce_bcast(ncclDataType_t t, ncclRedOp_t op, size_t n)
{
    int root = g_n - 1, salt = 200 + (int)t, bsalt = 300 + (int)t;
    void *h = input(t, g_rank, n, salt), *want = malloc(n * esize(t) + 1);
    void *bh = input(t, 1 % g_n, n, bsalt), *bsrc = input(t, g_rank, n, bsalt);
    void *d = dev_from(h, n * esize(t)), *o = dev_from(NULL, n * esize(t));
    void *bd = dev_from(bsrc, n * esize(t));
    for (size_t i = 0; i < n; i++)
        put(want, t, i, ref_reduce(t, op, i, salt, 0, 0));
    CHECK_NCCL(ncclReduce(d, o, n, t, op, root, g_comm, g_s));
    if (g_rank == root)
        expect("reduce", t, o, want, n);
    /* broadcast from rank 1, in place: every rank ends with rank 1's input */
    CHECK_NCCL(ncclBroadcast(bd, bd, n, t, 1 % g_n, g_comm, g_s));
    expect("broadcast", t, bd, bh, n);
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(bd));
    free(h);
    free(bh);
    free(bsrc);
    free(want);
}

static void
test_gather_scatter(ncclDataType_t t, ncclRedOp_t op, size_t n, int inplace)
{
    int salt = 400 + (int)t + inplace;
    size_t all = n * (size_t)g_n, es = esize(t);
    void *want = malloc(all * es + 1), *h = input(t, g_rank, all, salt), *mine;
    char *d, *o;
    /* all-gather: block r is rank r's first n elements */
    for (int r = 0; r < g_n; r++)
        for (size_t i = 0; i < n; i++)
            put(want, t, (size_t)r * n + i, gen(t, r, i, salt));
    o = dev_from(NULL, all * es);
    mine = input(t, g_rank, n, salt);
    if (inplace)
        CHECK_CUDA(cudaMemcpy(o + (size_t)g_rank * n * es, mine, n * es, cudaMemcpyHostToDevice));
    d = inplace ? o + (size_t)g_rank * n * es : dev_from(mine, n * es);
    CHECK_NCCL(ncclAllGather(d, o, n, t, g_comm, g_s));
    expect(inplace ? "allgather in place" : "allgather", t, o, want, all);
    if (!inplace)
        CHECK_CUDA(cudaFree(d));
    /* reduce-scatter: this rank gets block g_rank of the reduction over all ranks */
    CHECK_CUDA(cudaMemcpy(o, h, all * es, cudaMemcpyHostToDevice));
    d = inplace ? o + (size_t)g_rank * n * es : dev_from(NULL, n * es);
    for (size_t i = 0; i < n; i++)
        put(want, t, i, ref_reduce(t, op, (size_t)g_rank * n + i, salt, 0, 0));
    CHECK_NCCL(ncclReduceScatter(o, d, n, t, op, g_comm, g_s));
    expect(inplace ? "reducescatter in place" : "reducescatter", t, d, want, n);
    if (!inplace)
        CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaFree(o));
    free(want);
    free(h);
    free(mine);
}

/* Grouped sends and receives: a ring, then an all-to-all with the own block (sends and
 * receives posted in opposite orders on odd ranks), then ncclAlltoAll and ncclGather. */
static void
test_p2p(ncclDataType_t t, size_t n)
{
    int salt = 500, next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    size_t es = esize(t), all = n * (size_t)g_n;
    void *h = input(t, g_rank, all, salt), *want = malloc(all * es + 1);
    char *d = dev_from(h, all * es), *o = dev_from(NULL, all * es);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclRecv(o, n, t, prev, g_comm, g_s));
    CHECK_NCCL(ncclSend(d, n, t, next, g_comm, g_s));
    CHECK_NCCL(ncclGroupEnd());
    for (size_t i = 0; i < n; i++)
        put(want, t, i, gen(t, prev, i, salt));
    expect("send/recv ring", t, o, want, n);
    /* block r of the output: block g_rank of rank r's input */
    for (int r = 0; r < g_n; r++)
        for (size_t i = 0; i < n; i++)
            put(want, t, (size_t)r * n + i, gen(t, r, (size_t)g_rank * n + i, salt));
    CHECK_CUDA(cudaMemset(o, 0, all * es));
    CHECK_NCCL(ncclGroupStart());
    for (int k = 0; k < g_n; k++) {
        int r = g_rank % 2 ? g_n - 1 - k : k;
        CHECK_NCCL(ncclSend(d + (size_t)r * n * es, n, t, r, g_comm, g_s));
        CHECK_NCCL(ncclRecv(o + (size_t)r * n * es, n, t, r, g_comm, g_s));
    }
    CHECK_NCCL(ncclGroupEnd());
    expect("all-to-all of grouped send/recv", t, o, want, all);
    CHECK_CUDA(cudaMemset(o, 0, all * es));
    CHECK_NCCL(ncclAlltoAll(d, o, n, t, g_comm, g_s));
    expect("ncclAlltoAll", t, o, want, all);
    for (int r = 0; r < g_n; r++)
        for (size_t i = 0; i < n; i++)
            put(want, t, (size_t)r * n + i, gen(t, r, i, salt));
    CHECK_NCCL(ncclGather(d, o, n, t, 0, g_comm, g_s));
    if (g_rank == 0)
        expect("gather", t, o, want, all);
    CHECK_CUDA(cudaFree(d));
    CHECK_CUDA(cudaFree(o));
    free(h);
    free(want);
}

int
main(void)
{
    ncclUniqueId id;
    static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    g_rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    g_n = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    CHECK_CUDA(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    if (g_rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    CHECK(simrun_rdzv_share(g_rank, &id, sizeof(id), 20) == 0);
    CHECK_NCCL(ncclCommInitRank(&g_comm, g_n, id, g_rank));

    for (int t = 0; t < (int)ncclNumTypes; t++)
        for (int k = 0; k < 5; k++)
            test_allreduce((ncclDataType_t)t, ops[k], 3001, k % 2);
    test_allreduce(ncclFloat32, ncclSum, 300007, 0); /* past one staging region */
    test_allreduce(ncclBfloat16, ncclAvg, 700001, 1);
    test_premul(ncclFloat32, from_float(ncclFloat32, 0.3f), 0, 2000);
    test_premul(ncclFloat16, from_float(ncclFloat16, 0.7f), 0, 2000);
    test_premul(ncclBfloat16, from_float(ncclBfloat16, 1.3f), 1, 2000);
    test_reduce_bcast(ncclFloat32, ncclSum, 5003);
    test_reduce_bcast(ncclInt32, ncclMax, 5003);
    test_reduce_bcast(ncclUint8, ncclSum, 1 << 20);
    test_gather_scatter(ncclFloat16, ncclSum, 4099, 0);
    test_gather_scatter(ncclFloat32, ncclAvg, 4099, 1);
    test_gather_scatter(ncclBfloat16, ncclSum, 70001, 1);
    test_gather_scatter(ncclFloat8e4m3, ncclMin, 999, 0);
    test_p2p(ncclFloat32, 3001);
    test_p2p(ncclInt64, 200003);
    CHECK_NCCL(ncclCommDestroy(g_comm));
    if (g_fail)
        return 1;
    printf("rank %d of %d: test_nccl_data ok\n", g_rank, g_n);
    return 0;
}
