/* nccl_data.c: the data that libnccl.so.2's collectives and point-to-point calls move.
 *
 * Device memory of the simulated device is host memory of each rank's process, so the
 * data travel through the communicator's shared segment (nccl.c): each rank copies in and
 * out.  A collective uses the lane: every rank has a staging region of `stage` bytes
 * (SIMGPU_NCCL_STAGE_KB, default 1024, at most 256 MiB for all ranks together); the
 * collective runs in rounds of as many elements as a region holds: each rank stages its
 * chunk, a barrier, each rank reads what it needs and writes its output, a barrier.  A
 * (sender, receiver) pair has a channel whose buffer one send/receive pair at a time fills
 * and drains, chunk by chunk; the parts of a group progress together, so any order of
 * sends and receives inside a group completes, as in NCCL.
 *
 * Which operations move data: the copying takes host time (the rounds' barriers wait for
 * every rank's stream worker to get a CPU), which a real GPU spends inside the kernel's
 * time; where the copy outlasts the modelled end, a stream wait or synchronize would
 * return late.  So only operations whose largest buffer on a rank (an all-gather's
 * output, a reduce-scatter's input, else the message) is at most SIMGPU_NCCL_DATA_KB
 * (64) move their data: the small messages a program reads from the host (object
 * collectives, barriers, DDP's parameter check).  Larger ones leave their
 * output buffers as they were (the simulated kernels compute nothing either).
 * SIMGPU_NCCL_DATA=1 moves every operation's data; 0 (which ddp-sim sets for itself: its
 * buffers hold nothing) moves none.  Ranks agree on each operation at its rendezvous
 * (nccl_coll.c), so they all make the same choice.
 *
 * Results: reductions fold the ranks' inputs in rank order (0, 1, ..., n-1), each step
 * rounded once to the element type, round to nearest even (fp16, bf16, fp8 are computed
 * in double and rounded: exact for these types); fp8 (e4m3, e5m2) saturate to their
 * largest finite value, as NCCL's conversions do; max and min of floats follow fmax and
 * fmin.  ncclAvg is NCCL's: floating types multiply each input by 1/n (rounded to the type)
 * and sum, integer types sum and divide by n; PreMulSum multiplies each input by its
 * scalar.  Integer sums and products wrap.  Every rank gets the same bits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#define SIMGPU_NCCL_INTERNAL /* the shared part of simgpu_internal.h */
#include "simgpu_internal.h"

/* ---- layout ------------------------------------------------------------------------- */
static size_t
chan_area(uint64_t n)
{
    return (n * n * sizeof(struct p2p_chan) + 4095) & ~(size_t)4095;
}

/* The data settings, read once per process (read_data_settings): the sizes in KiB, and
 * SIMGPU_NCCL_DATA (0: no operation moves data, 1: every one, -1: unset, the size rule). */
static pthread_once_t g_data_once = PTHREAD_ONCE_INIT;
static uint64_t g_stage_kib, g_data_kib;
static int g_data_all;

static void
read_data_settings(void)
{
    const char *on = getenv("SIMGPU_NCCL_DATA");
    g_stage_kib = simgpu_env_whole("SIMGPU_NCCL_STAGE_KB", 1, 1ULL << 40, 1024);
    g_data_kib = simgpu_env_whole("SIMGPU_NCCL_DATA_KB", 0, 1ULL << 40, 64);
    g_data_all = on && strcmp(on, "0") == 0 ? 0 : on && strcmp(on, "1") == 0 ? 1 : -1;
    if (on && *on && g_data_all < 0)
        fprintf(stderr, "simgpu: SIMGPU_NCCL_DATA=%s is neither 0 nor 1: unset\n", on);
}

size_t
data_bytes(int nranks, uint64_t *stage, uint64_t *chunk, uint64_t *max)
{
    pthread_once(&g_data_once, read_data_settings);
    uint64_t n = nranks > 0 ? (uint64_t)nranks : 1;
    uint64_t s = g_stage_kib * 1024, c;
    if (g_data_all == 0) { /* no data areas: the operations move nothing */
        *stage = *chunk = *max = 0;
        return 0;
    }
    if (g_data_all == 1)
        *max = UINT64_MAX;
    else
        *max = g_data_kib * 1024;
    if (s > (256ULL << 20) / n)
        s = (256ULL << 20) / n;
    s &= ~(uint64_t)4095;
    if (s < 4096)
        s = 4096;
    c = (32ULL << 20) / (n * n);
    if (c > s)
        c = s;
    c &= ~(uint64_t)63;
    if (c < 4096)
        c = 4096;
    *stage = s;
    *chunk = c;
    return chan_area(n) + n * s + n * n * c;
}

static struct p2p_chan *
chan_of(struct shm_hdr *h, int src, int dst)
{
    return (struct p2p_chan *)((char *)h + h->data_off) + (size_t)src * h->nranks + (size_t)dst;
}

static char *
stage_of(struct shm_hdr *h, int r)
{
    return (char *)h + h->data_off + chan_area(h->nranks) + (size_t)r * h->stage;
}

static char *
chunk_of(struct shm_hdr *h, int src, int dst)
{
    return stage_of(h, (int)h->nranks) + ((size_t)src * h->nranks + (size_t)dst) * h->chunk;
}

/* ---- small floating-point formats --------------------------------------------------- */
struct mini {
    int ebits, mbits, bias;
    int sat;      /* saturate to the largest finite value (fp8), else overflow to inf */
    int fn;       /* e4m3fn: no infinities, all-ones is NaN */
    uint32_t nan; /* a quiet NaN */
    double max;   /* largest finite value */
};

static const struct mini k_f16 = {5, 10, 15, 0, 0, 0x7e00, 65504.0};
static const struct mini k_bf16 = {8, 7, 127, 0, 0, 0x7fc0, 3.38953138925153547590e38};
static const struct mini k_e4m3 = {4, 3, 7, 1, 1, 0x7f, 448.0};
static const struct mini k_e5m2 = {5, 2, 15, 1, 0, 0x7e, 57344.0};

static const struct mini *
mini_of(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat16:
        return &k_f16;
    case ncclBfloat16:
        return &k_bf16;
    case ncclFloat8e4m3:
        return &k_e4m3;
    case ncclFloat8e5m2:
        return &k_e5m2;
    default:
        return NULL;
    }
}

static double
mini_decode(uint32_t b, const struct mini *f)
{
    uint32_t emask = (1u << f->ebits) - 1, e = (b >> f->mbits) & emask;
    uint32_t m = b & ((1u << f->mbits) - 1);
    double v;
    if (f->fn && e == emask && m == (1u << f->mbits) - 1)
        v = NAN;
    else if (!f->fn && e == emask)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(m + (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return (b >> (f->ebits + f->mbits)) & 1 ? -v : v;
}

/* x rounded to nearest even in format f. */
static uint32_t
mini_encode(double x, const struct mini *f)
{
    uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0, field, mant;
    double a = fabs(x), half_ulp_max;
    int e, emin = 1 - f->bias;
    uint64_t r;
    if (isnan(x))
        return f->nan;
    if (a == 0)
        return sign;
    half_ulp_max = ldexp(1.0, (int)floor(log2(f->max)) - f->mbits - 1);
    if (f->sat && a >= f->max) /* the largest finite: all ones less one (fn) or less one
                                  exponent step */
        return sign | ((1u << (f->ebits + f->mbits)) - 1 - (f->fn ? 1 : (1u << f->mbits)));
    if (!f->sat && a >= f->max + half_ulp_max)
        return sign | (((1u << f->ebits) - 1) << f->mbits);
    frexp(a, &e);
    e -= 1;
    if (e < emin)
        e = emin;
    r = (uint64_t)nearbyint(ldexp(a, f->mbits - e));
    if (e == emin && r < (1u << f->mbits)) {
        field = 0;
        mant = (uint32_t)r;
    } else {
        if (r >= (2u << f->mbits)) {
            r >>= 1;
            e++;
        }
        field = (uint32_t)(e + f->bias);
        mant = (uint32_t)r - (1u << f->mbits);
    }
    return sign | (field << f->mbits) | mant;
}

static uint32_t
mini_load(const void *p, size_t i, const struct mini *f)
{
    return f->ebits + f->mbits == 7 ? ((const uint8_t *)p)[i] : ((const uint16_t *)p)[i];
}

static void
mini_store(void *p, size_t i, const struct mini *f, uint32_t b)
{
    if (f->ebits + f->mbits == 7)
        ((uint8_t *)p)[i] = (uint8_t)b;
    else
        ((uint16_t *)p)[i] = (uint16_t)b;
}

/* ---- reductions --------------------------------------------------------------------- */
enum red { RED_SUM, RED_PROD, RED_MAX, RED_MIN };

static void
mini_reduce(void *acc, const void *x, size_t n, const struct mini *f, enum red op)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t ab = mini_load(acc, i, f), xb = mini_load(x, i, f);
        double a = mini_decode(ab, f), b = mini_decode(xb, f);
        if (op == RED_SUM)
            mini_store(acc, i, f, mini_encode(a + b, f));
        else if (op == RED_PROD)
            mini_store(acc, i, f, mini_encode(a * b, f));
        else if (op == RED_MAX)
            mini_store(acc, i, f, isnan(a) || (!isnan(b) && b > a) ? xb : ab);
        else
            mini_store(acc, i, f, isnan(a) || (!isnan(b) && b < a) ? xb : ab);
    }
}

#define RED_INT(T, UT)                                                                             \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        const T *b_ = x;                                                                           \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = op == RED_SUM    ? (T)((UT)a_[i] + (UT)b_[i])                                  \
                    : op == RED_PROD ? (T)((UT)a_[i] * (UT)b_[i])                                  \
                    : op == RED_MAX  ? (a_[i] > b_[i] ? a_[i] : b_[i])                             \
                                     : (a_[i] < b_[i] ? a_[i] : b_[i]);                             \
    } while (0)

#define RED_FLT(T, MAXF, MINF)                                                                     \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        const T *b_ = x;                                                                           \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = op == RED_SUM    ? a_[i] + b_[i]                                               \
                    : op == RED_PROD ? a_[i] * b_[i]                                               \
                    : op == RED_MAX  ? MAXF(a_[i], b_[i])                                          \
                                     : MINF(a_[i], b_[i]);                                          \
    } while (0)

/* acc[i] = acc[i] op x[i] for n elements of type t. */
static void
reduce_into(void *acc, const void *x, size_t n, ncclDataType_t t, enum red op)
{
    switch (t) {
    case ncclInt8:
        RED_INT(int8_t, uint8_t);
        break;
    case ncclUint8:
        RED_INT(uint8_t, unsigned);
        break;
    case ncclInt32:
        RED_INT(int32_t, uint32_t);
        break;
    case ncclUint32:
        RED_INT(uint32_t, uint32_t);
        break;
    case ncclInt64:
        RED_INT(int64_t, uint64_t);
        break;
    case ncclUint64:
        RED_INT(uint64_t, uint64_t);
        break;
    case ncclFloat32:
        RED_FLT(float, fmaxf, fminf);
        break;
    case ncclFloat64:
        RED_FLT(double, fmax, fmin);
        break;
    default:
        mini_reduce(acc, x, n, mini_of(t), op);
        break;
    }
}

/* The scalar of a PreMulSum (or of ncclAvg on a floating type: 1/n in the type). */
struct scalar {
    double f;  /* floating types (the value of the type's bits) */
    int64_t i; /* integer types */
};

#define PREMUL_INT(T, UT)                                                                          \
    do {                                                                                           \
        T *d_ = dst;                                                                               \
        const T *s_ = src;                                                                         \
        for (size_t i = 0; i < n; i++)                                                             \
            d_[i] = (T)((UT)s_[i] * (UT)s->i);                                                     \
    } while (0)

/* dst[i] = src[i] * scalar, rounded to t. */
static void
premul(void *dst, const void *src, size_t n, ncclDataType_t t, const struct scalar *s)
{
    const struct mini *f = mini_of(t);
    if (t == ncclFloat32) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = ((const float *)src)[i] * (float)s->f;
    } else if (t == ncclFloat64) {
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = ((const double *)src)[i] * s->f;
    } else if (f) {
        for (size_t i = 0; i < n; i++)
            mini_store(dst, i, f, mini_encode(mini_decode(mini_load(src, i, f), f) * s->f, f));
    } else if (t == ncclInt8) {
        PREMUL_INT(int8_t, uint8_t);
    } else if (t == ncclUint8) {
        PREMUL_INT(uint8_t, unsigned);
    } else if (t == ncclInt32) {
        PREMUL_INT(int32_t, uint32_t);
    } else if (t == ncclUint32) {
        PREMUL_INT(uint32_t, uint32_t);
    } else if (t == ncclInt64) {
        PREMUL_INT(int64_t, uint64_t);
    } else {
        PREMUL_INT(uint64_t, uint64_t);
    }
}

#define POSTDIV(T)                                                                                 \
    do {                                                                                           \
        T *a_ = acc;                                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            a_[i] = (T)(a_[i] / (T)nranks);                                                        \
    } while (0)

/* acc[i] /= nranks for an integer type t (ncclAvg). */
static void
postdiv(void *acc, size_t n, ncclDataType_t t, int nranks)
{
    switch (t) {
    case ncclInt8:
        POSTDIV(int8_t);
        break;
    case ncclUint8:
        POSTDIV(uint8_t);
        break;
    case ncclInt32:
        POSTDIV(int32_t);
        break;
    case ncclUint32:
        POSTDIV(uint32_t);
        break;
    case ncclInt64:
        POSTDIV(int64_t);
        break;
    default:
        POSTDIV(uint64_t);
        break;
    }
}

static int
is_float(ncclDataType_t t)
{
    return t == ncclFloat32 || t == ncclFloat64 || mini_of(t) != NULL;
}

/* The value of a scalar of type t at p. */
static void
scalar_read(const void *p, ncclDataType_t t, struct scalar *s)
{
    const struct mini *f = mini_of(t);
    memset(s, 0, sizeof(*s));
    if (t == ncclFloat32)
        s->f = *(const float *)p;
    else if (t == ncclFloat64)
        s->f = *(const double *)p;
    else if (f)
        s->f = mini_decode(mini_load(p, 0, f), f);
    else if (t == ncclInt8)
        s->i = *(const int8_t *)p;
    else if (t == ncclUint8)
        s->i = *(const uint8_t *)p;
    else if (t == ncclInt32)
        s->i = *(const int32_t *)p;
    else if (t == ncclUint32)
        s->i = *(const uint32_t *)p;
    else
        s->i = *(const int64_t *)p;
}

/* ---- collectives through the lane ---------------------------------------------------- */
/* What one collective does with its data: the reduction, the pre-multiplication, the
 * post-division, the elements a staging region holds per round. */
struct coll_plan {
    enum red red;
    int use_premul, use_postdiv;
    struct scalar scalar;
    size_t es, per_round, total;
};

static void
plan_coll(const struct shm_hdr *h, const struct part *p, struct coll_plan *cp)
{
    const struct part_data *d = &p->d;
    memset(cp, 0, sizeof(*cp));
    cp->es = type_size(d->dtype);
    cp->red = d->op == ncclProd  ? RED_PROD
              : d->op == ncclMax ? RED_MAX
              : d->op == ncclMin ? RED_MIN
                                 : RED_SUM;
    if (d->premul) {
        cp->use_premul = 1;
        scalar_read(d->scalar_dev ? d->scalar_dev : d->scalar, d->dtype, &cp->scalar);
    } else if (d->op == ncclAvg && is_float(d->dtype)) {
        /* NCCL: 1/n in the element type, then a PreMulSum */
        const struct mini *f = mini_of(d->dtype);
        double inv = 1.0 / h->nranks;
        cp->use_premul = 1;
        cp->scalar.f = d->dtype == ncclFloat32 ? (double)(float)inv
                       : f                     ? mini_decode(mini_encode(inv, f), f)
                                               : inv;
    } else if (d->op == ncclAvg) {
        cp->use_postdiv = 1;
    }
    cp->per_round = h->stage / cp->es;
    if (p->coll == SIMGPU_COLL_REDUCESCATTER)
        cp->per_round /= h->nranks;
    cp->total = d->count;
}

/* Copies (or pre-multiplies) m elements from src into the staging region at dst. */
static void
stage_in(void *dst, const void *src, size_t m, const struct part_data *d,
         const struct coll_plan *cp)
{
    if (cp->use_premul)
        premul(dst, src, m, d->dtype, &cp->scalar);
    else if (m)
        memcpy(dst, src, m * cp->es);
}

/* Waits, holding mu, until every rank reached the lane's barrier; the last to arrive
 * frees the lane when `release` is nonzero.  Returns 0, or -1 when waiting had to stop
 * (the comm is then broken). */
static int
lane_barrier(struct shm_hdr *h, uint64_t deadline, int release)
{
    struct data_lane *l = &h->lane;
    uint64_t gen = l->gen;
    if (++l->count == h->nranks) {
        l->count = 0;
        if (release)
            l->busy = 0;
        l->gen++;
        pthread_cond_broadcast(&h->cv);
        return 0;
    }
    while (l->gen == gen && !wait_tick(h, deadline))
        ;
    if (l->gen != gen)
        return 0;
    h->broken = 1;
    pthread_cond_broadcast(&h->cv);
    return -1;
}

/* Stages this rank's input of round [off, off + m). */
static void
coll_stage(struct shm_hdr *h, int rank, const struct part *p, const struct coll_plan *cp,
           size_t off, size_t m)
{
    const struct part_data *d = &p->d;
    const char *src = d->sbuf;
    char *mine = stage_of(h, rank);
    if (p->coll == SIMGPU_COLL_BROADCAST) {
        if (rank == d->root && m)
            memcpy(mine, src + off * cp->es, m * cp->es);
    } else if (p->coll == SIMGPU_COLL_REDUCESCATTER) {
        for (uint32_t b = 0; b < h->nranks; b++)
            stage_in(mine + b * cp->per_round * cp->es, src + (b * d->count + off) * cp->es, m, d,
                     cp);
    } else if (p->coll == SIMGPU_COLL_ALLGATHER) {
        if (m)
            memcpy(mine, src + off * cp->es, m * cp->es);
    } else {
        stage_in(mine, src + off * cp->es, m, d, cp);
    }
}

/* Reduces block `blk` (of per_round elements) of every rank's region into dst. */
static void
coll_fold(struct shm_hdr *h, const struct part *p, const struct coll_plan *cp, size_t blk,
          char *dst, size_t m)
{
    size_t at = blk * cp->per_round * cp->es;
    if (!m)
        return;
    memcpy(dst, stage_of(h, 0) + at, m * cp->es);
    for (uint32_t r = 1; r < h->nranks; r++)
        reduce_into(dst, stage_of(h, (int)r) + at, m, p->d.dtype, cp->red);
    if (cp->use_postdiv)
        postdiv(dst, m, p->d.dtype, (int)h->nranks);
}

/* Reads what this rank needs of round [off, off + m) and writes its output. */
static void
coll_gather(struct shm_hdr *h, int rank, const struct part *p, const struct coll_plan *cp,
            size_t off, size_t m)
{
    const struct part_data *d = &p->d;
    char *dst = (char *)d->rbuf + off * cp->es;
    if (p->coll == SIMGPU_COLL_BROADCAST) {
        if (m)
            memcpy(dst, stage_of(h, d->root), m * cp->es);
    } else if (p->coll == SIMGPU_COLL_ALLGATHER) {
        for (uint32_t r = 0; r < h->nranks && m; r++)
            memcpy((char *)d->rbuf + (r * d->count + off) * cp->es, stage_of(h, (int)r),
                   m * cp->es);
    } else if (p->coll == SIMGPU_COLL_REDUCESCATTER) {
        coll_fold(h, p, cp, (size_t)rank, dst, m);
    } else if (p->coll == SIMGPU_COLL_ALLREDUCE || rank == d->root) {
        coll_fold(h, p, cp, 0, dst, m);
    }
}

/* Moves the data of collective part p: takes the lane in sequence order, runs the rounds,
 * passes the lane on.  Returns 0 or -1 with *why set. */
static int
coll_data(struct shm_hdr *h, int rank, const struct part *p, uint64_t deadline, const char **why)
{
    struct coll_plan cp;
    size_t rounds, off = 0;
    int rc = 0;
    plan_coll(h, p, &cp);
    rounds = cp.total ? (cp.total + cp.per_round - 1) / cp.per_round : 1;
    shm_lock(h);
    while (h->lane.busy != 0 && h->lane.busy != p->seq + 1 && !wait_tick(h, deadline))
        ;
    if (h->lane.busy != 0 && h->lane.busy != p->seq + 1) {
        rc = -1;
        *why = "the previous collective of the communicator did not finish";
    } else {
        h->lane.busy = p->seq + 1;
    }
    pthread_mutex_unlock(&h->mu);
    for (size_t k = 0; rc == 0 && k < rounds; k++, off += cp.per_round) {
        size_t m = cp.total - off < cp.per_round ? cp.total - off : cp.per_round;
        coll_stage(h, rank, p, &cp, off, m);
        shm_lock(h);
        rc = lane_barrier(h, deadline, 0);
        pthread_mutex_unlock(&h->mu);
        if (rc == 0)
            coll_gather(h, rank, p, &cp, off, m);
        shm_lock(h);
        if (rc == 0)
            rc = lane_barrier(h, deadline, k + 1 == rounds);
        pthread_mutex_unlock(&h->mu);
        if (rc && !*why)
            *why = "a peer died or aborted during a collective";
    }
    return rc;
}

/* 1 when part p moves its data: its largest buffer on a rank is at most h->data_max. */
static int
part_moves(const struct shm_hdr *h, const struct part *p)
{
    uint64_t bytes = (uint64_t)p->d.count * type_size(p->d.dtype);
    if (p->kind == PART_COLL &&
        (p->coll == SIMGPU_COLL_ALLGATHER || p->coll == SIMGPU_COLL_REDUCESCATTER))
        bytes *= h->nranks;
    return bytes <= h->data_max;
}

/* ---- point-to-point through the channels ---------------------------------------------- */
struct p2p_state {
    size_t off;
    int moved; /* a chunk (maybe empty) went through */
    int done;
};

/* One step of send or receive part p (mu held; released around the copy).  Returns 1 when
 * it moved a chunk, 0 when it must wait, -1 when sender and receiver disagree on the size. */
static int
p2p_step(struct shm_hdr *h, int rank, const struct part *p, struct p2p_state *st)
{
    int send = p->kind == PART_SEND;
    struct p2p_chan *ch = chan_of(h, send ? rank : p->peer, send ? p->peer : rank);
    char *buf = chunk_of(h, send ? rank : p->peer, send ? p->peer : rank);
    size_t total = p->d.count * type_size(p->d.dtype), len;
    int ours = ch->tag == p->seq + 1 || (send && ch->tag == 0); /* a sender takes a free one */
    if (!ours || ch->full != (uint32_t)!send)
        return 0;
    if (send) {
        len = total - st->off < h->chunk ? total - st->off : h->chunk;
        pthread_mutex_unlock(&h->mu);
        if (len)
            memcpy(buf, (const char *)p->d.sbuf + st->off, len);
        shm_lock(h);
        ch->tag = p->seq + 1;
        ch->total = total;
        ch->len = (uint32_t)len;
        ch->full = 1;
    } else {
        if (ch->total != total)
            return -1;
        len = ch->len;
        pthread_mutex_unlock(&h->mu);
        if (len)
            memcpy((char *)p->d.rbuf + st->off, buf, len);
        shm_lock(h);
        ch->full = 0;
    }
    st->off += len;
    st->moved = 1;
    st->done = st->off == total;
    if (st->done && !send)
        ch->tag = 0; /* the channel is free for the next transfer */
    pthread_cond_broadcast(&h->cv);
    return 1;
}

/* Moves the data of the launch's copies, sends and receives, all progressing together.
 * Returns 0 or -1 with *why set. */
static int
p2p_data(struct shm_hdr *h, int rank, struct part *parts, int n, uint64_t deadline,
         const char **why)
{
    struct p2p_state *st = calloc((size_t)n, sizeof(*st));
    int rc = 0, left;
    if (!st) {
        *why = "out of memory";
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct part *p = &parts[i];
        size_t bytes = p->d.count * type_size(p->d.dtype);
        int moves = part_moves(h, p);
        if (p->kind == PART_COPY && moves && bytes && p->d.rbuf != p->d.sbuf)
            memmove(p->d.rbuf, p->d.sbuf, bytes);
        st[i].done = (p->kind != PART_SEND && p->kind != PART_RECV) || !moves;
    }
    shm_lock(h);
    for (;;) {
        int moved = 0;
        left = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            int s = st[i].done ? 0 : p2p_step(h, rank, &parts[i], &st[i]);
            if (s < 0) {
                *why = "a send and its receive disagree on the size";
                h->broken = 1;
                pthread_cond_broadcast(&h->cv);
                rc = -1;
            }
            moved |= s > 0;
            left += !st[i].done;
        }
        if (rc || !left)
            break;
        if (!moved && wait_tick(h, deadline)) {
            *why = "a peer died, aborted or did not match a send or receive";
            rc = -1;
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    free(st);
    return rc;
}

int
data_run(struct shm_hdr *h, int rank, struct part *parts, int n, uint64_t deadline,
         const char **why)
{
    int rc = 0, others = 0;
    *why = NULL;
    if (h->stage == 0)
        return 0; /* SIMGPU_NCCL_DATA=0 */
    for (int i = 0; i < n && rc == 0; i++) {
        if (!part_moves(h, &parts[i]))
            continue;
        if (parts[i].kind == PART_COLL)
            rc = coll_data(h, rank, &parts[i], deadline, why);
        else
            others = 1;
    }
    if (rc == 0 && others)
        rc = p2p_data(h, rank, parts, n, deadline, why);
    return rc;
}
