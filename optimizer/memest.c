/*
 * memest.c: peak-memory estimator from alloc/free events (see memest.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/memest.h"

enum { MEMEST_ALLOC = 1, MEMEST_FREE = 2 };

enum memest_class { CLS_STATIC, CLS_ACT, CLS_OPT, CLS_BWD, CLS_OTHER };

static int
cmp_event_time(const void *pa, const void *pb)
{
    const memest_event *a = *(const memest_event *const *)pa;
    const memest_event *b = *(const memest_event *const *)pb;
    if (a->t_ns != b->t_ns)
        return (a->t_ns > b->t_ns) - (a->t_ns < b->t_ns);
    return (a > b) - (a < b); /* stable: input order */
}

/* Class of an allocation made at time t on thread th. */
static int
classify(const memest_phases *ph, int64_t t, uint64_t th)
{
    if (ph->first_step) {
        if (t < ph->step_start)
            return CLS_STATIC;
        if (th == ph->fwd_thread)
            return t < ph->step_bwd ? CLS_ACT : CLS_OTHER;
        return th == ph->bwd_thread && t >= ph->step_bwd && t < ph->iter_start ? CLS_ACT
                                                                               : CLS_OTHER;
    }
    if (t < ph->iter_start)
        return CLS_STATIC;
    if (t >= ph->iter_end)
        return CLS_OTHER;
    if (th == ph->bwd_thread && ph->bwd_thread != ph->fwd_thread)
        return CLS_BWD;
    if (th == ph->fwd_thread)
        return t < ph->bwd_start ? CLS_ACT : CLS_OPT;
    return CLS_OTHER;
}

/* With phases.first_step (memest.h): the backward thread's first allocation in the step
 * is its workspace, and the forward's first activation allocation of that size is the
 * forward's: both become CLS_OTHER, and the size m->workspace_bytes when the forward has
 * one. order is in time order, cls its classes. */
static void
take_workspace(const memest_event **order, int8_t *cls, size_t n, const memest_phases *ph,
               memest *m)
{
    int64_t ws = 0;
    m->segments = 1;
    for (size_t i = 0; i < n && ws == 0; i++)
        if (cls[i] == CLS_ACT && order[i]->thread == ph->bwd_thread) {
            ws = order[i]->bytes;
            cls[i] = CLS_OTHER;
        }
    for (size_t i = 0; i < n && ws > 0; i++)
        if (cls[i] == CLS_ACT && order[i]->thread == ph->fwd_thread && order[i]->bytes == ws) {
            cls[i] = CLS_OTHER;
            m->workspace_bytes = ws;
            break;
        }
}

/* 1 when e, a live allocation past the first iteration, is a block the forward thread
 * made anew at the size of one of the activation allocations found so far (memest.h). */
static int
remade(const memest *m, const memest_phases *ph, const memest_event *e)
{
    int found = 0;
    if (!m->segments && e->thread == ph->fwd_thread && e->t_ns >= ph->iter_end)
        for (int32_t l = 0; l < m->n_layers && !found; l++)
            found = memest_round_block(m->act_bytes[l]) == memest_round_block(e->bytes);
    return found;
}

int
memest_build(const memest_event *ev, size_t n, const memest_phases *ph, memest *m)
{
    memset(m, 0, sizeof *m);
    const memest_event **order = malloc((n ? n : 1) * sizeof *order);
    int8_t *cls = malloc(n ? n : 1);
    uint8_t *live = calloc(n ? n : 1, 1);
    m->act_bytes = malloc((n ? n : 1) * sizeof *m->act_bytes);
    m->act_time = malloc((n ? n : 1) * sizeof *m->act_time);
    m->static_each = malloc((n ? n : 1) * sizeof *m->static_each);
    m->held_bytes = malloc((n ? n : 1) * sizeof *m->held_bytes);
    if (!order || !cls || !live || !m->act_bytes || !m->act_time || !m->static_each ||
        !m->held_bytes) {
        free(order);
        free(cls);
        free(live);
        memest_free(m);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &ev[i];
    qsort(order, n, sizeof *order, cmp_event_time);

    /* Walk in time order; a free releases the latest live allocation at its address
     * (linear search backwards: the events of a caching allocator are few). */
    int64_t in_use = 0;
    for (size_t i = 0; i < n; i++) {
        const memest_event *e = order[i];
        cls[i] = -1;
        if (e->op == MEMEST_ALLOC && e->bytes > 0) {
            live[i] = 1;
            cls[i] = (int8_t)classify(ph, e->t_ns, e->thread);
            in_use += e->bytes;
            if (in_use > m->peak_bytes)
                m->peak_bytes = in_use;
        } else if (e->op == MEMEST_FREE) {
            for (size_t j = i; j-- > 0;) {
                if (live[j] && order[j]->address == e->address) {
                    live[j] = 0;
                    in_use -= order[j]->bytes;
                    break;
                }
            }
        }
    }
    if (ph->first_step)
        take_workspace(order, cls, n, ph, m);
    /* What is live at the end of the first iteration (or of the trace) makes the
     * estimate; activations are counted even when the trace frees them. */
    for (size_t i = 0; i < n; i++) {
        if (cls[i] < 0)
            continue;
        int64_t b = order[i]->bytes;
        switch (cls[i]) {
        case CLS_ACT:
            m->act_bytes[m->n_layers] = b;
            m->act_time[m->n_layers] = order[i]->t_ns;
            m->n_layers++;
            break;
        case CLS_STATIC:
            if (live[i]) {
                m->static_bytes += b;
                m->static_each[m->n_static++] = b;
            }
            break;
        case CLS_OPT:
            if (live[i])
                m->optimizer_bytes += b;
            break;
        case CLS_BWD:
            m->backward_bytes += b;
            break;
        default:
            if (live[i] && remade(m, ph, order[i]))
                m->held_bytes[m->n_held++] = b;
            else if (live[i])
                m->other_bytes += b;
            break;
        }
    }
    free(order);
    free(cls);
    free(live);
    return 0;
}

/* The arrays of a memest, with their lengths, in the order they are packed. */
static int
memest_arrays(memest *m, int64_t ***arr, int32_t **len)
{
    static const int n = 4;
    arr[0] = &m->act_bytes;
    len[0] = &m->n_layers;
    arr[1] = &m->act_time;
    len[1] = &m->n_layers;
    arr[2] = &m->static_each;
    len[2] = &m->n_static;
    arr[3] = &m->held_bytes;
    len[3] = &m->n_held;
    return n;
}

int
memest_pack(const memest *m, void **buf, size_t *len)
{
    int64_t **arr[4];
    int32_t *cnt[4];
    memest c = *m;
    int n = memest_arrays(&c, arr, cnt), rc = 0;
    size_t total = sizeof c;
    for (int i = 0; i < n; i++)
        total += (size_t)(*cnt[i] > 0 ? *cnt[i] : 0) * sizeof(int64_t);
    char *p = malloc(total);
    if (!p) {
        rc = -1;
    } else {
        size_t at = sizeof c;
        for (int i = 0; i < n; i++) {
            size_t k = (size_t)(*cnt[i] > 0 ? *cnt[i] : 0) * sizeof(int64_t);
            if (k)
                memcpy(p + at, *arr[i], k);
            at += k;
            *arr[i] = NULL; /* the receiver's pointers are its own */
        }
        memcpy(p, &c, sizeof c);
        *buf = p;
        *len = total;
    }
    return rc;
}

int
memest_unpack(memest *m, const void *buf, size_t len)
{
    int64_t **arr[4];
    int32_t *cnt[4];
    int rc = 0;
    memset(m, 0, sizeof *m);
    if (len < sizeof *m)
        return -1;
    memcpy(m, buf, sizeof *m);
    int n = memest_arrays(m, arr, cnt);
    size_t at = sizeof *m;
    for (int i = 0; i < n; i++)
        *arr[i] = NULL;
    for (int i = 0; rc == 0 && i < n; i++) {
        size_t k = (size_t)(*cnt[i] > 0 ? *cnt[i] : 0) * sizeof(int64_t);
        *arr[i] = malloc(k + sizeof(int64_t));
        if (!*arr[i] || k > len - at)
            rc = -1;
        else
            memcpy(*arr[i], (const char *)buf + at, k);
        at += k;
    }
    if (rc != 0)
        memest_free(m);
    return rc;
}

void
memest_free(memest *m)
{
    free(m->act_bytes);
    free(m->act_time);
    free(m->static_each);
    free(m->held_bytes);
    memset(m, 0, sizeof *m);
}

int64_t
memest_round_block(int64_t bytes)
{
    if (bytes <= 0)
        return 0;
    if (bytes <= (1 << 20))
        return (bytes + 511) & ~(int64_t)511;
    return (bytes + (2 << 20) - 1) & ~(int64_t)((2 << 20) - 1);
}

int64_t
memest_act_bytes(const memest *m)
{
    int64_t sum = 0;
    for (int32_t l = 0; l < m->n_layers; l++)
        sum += m->act_bytes[l];
    return sum;
}

/* The free blocks of a caching allocator, sorted by size. */
typedef struct block_pool {
    int64_t *size;
    int32_t n;
} block_pool;

/* Takes the smallest free block of at least bytes and at most twice that out of p and
 * returns its size, or bytes when none is free (a new block). */
static int64_t
pool_take(block_pool *p, int64_t bytes)
{
    int32_t lo = 0, hi = p->n;
    int64_t got = bytes;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (p->size[mid] < bytes)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->n && p->size[lo] <= 2 * bytes) {
        got = p->size[lo];
        memmove(p->size + lo, p->size + lo + 1, (size_t)(p->n - lo - 1) * sizeof *p->size);
        p->n--;
    }
    return got;
}

/* Returns a block of `bytes` to p (which has room for it). */
static void
pool_put(block_pool *p, int64_t bytes)
{
    int32_t i = p->n;
    while (i > 0 && p->size[i - 1] > bytes) {
        p->size[i] = p->size[i - 1];
        i--;
    }
    p->size[i] = bytes;
    p->n++;
}

/* Micro-batches of a step run through the cache: each repeats the same requests, and once
 * one makes no new block the pool is what it was before it and the next ones repeat it. */
enum { REUSE_MICRO_BATCHES = 4 };

/* Peak bytes of the blocks in use when the plan's activation requests run through a
 * caching allocator that never splits a block (memest.h): two steps of accum_k
 * micro-batches (at most REUSE_MICRO_BATCHES), keep[l] allocated in forward order, in the
 * backward rebuild[l] (0: none) allocated and freed before keep[l] is freed; after the
 * first step a block of each remade size is served from the cache (or made) and stays.
 * Returns -1 when out of memory. */
static int64_t
reuse_peak(const memest *m, const int64_t *keep, const int64_t *rebuild, int32_t accum_k)
{
    int32_t L = m->n_layers;
    if (accum_k > REUSE_MICRO_BATCHES)
        accum_k = REUSE_MICRO_BATCHES;
    /* every request may make a block: 2 steps x k micro-batches x 2 L, and the held ones */
    size_t cap = (size_t)4 * (size_t)accum_k * (size_t)L + (size_t)m->n_held + 1;
    block_pool pool = {malloc(cap * sizeof(int64_t)), 0};
    int64_t *got = malloc((size_t)(L > 0 ? L : 1) * sizeof *got);
    int64_t peak = -1, in_use = 0;
    if (pool.size && got) {
        peak = 0;
        for (int step = 0; step < 2; step++) {
            for (int32_t k = 0; k < accum_k; k++) {
                for (int32_t l = 0; l < L; l++) {
                    got[l] = pool_take(&pool, keep[l]);
                    in_use += got[l];
                    peak = in_use > peak ? in_use : peak;
                }
                for (int32_t l = L; l-- > 0;) {
                    if (rebuild[l] > 0) {
                        int64_t b = pool_take(&pool, rebuild[l]);
                        peak = in_use + b > peak ? in_use + b : peak;
                        pool_put(&pool, b);
                    }
                    pool_put(&pool, got[l]);
                    in_use -= got[l];
                }
            }
            for (int32_t r = 0; step == 0 && r < m->n_held; r++) {
                in_use += pool_take(&pool, memest_round_block(m->held_bytes[r]));
                peak = in_use > peak ? in_use : peak;
            }
        }
    }
    free(pool.size);
    free(got);
    return peak;
}

int64_t
memest_predict(const memest *m, const uint8_t *recompute, int32_t n_recompute, double keep_fraction,
               int32_t accum_k)
{
    if (accum_k < 1)
        accum_k = 1;
    if (keep_fraction <= 0 || keep_fraction > 1)
        keep_fraction = 1;
    int64_t base = m->static_bytes + m->optimizer_bytes + m->other_bytes;
    int64_t kept = 0, worst = 0, result = -1;
    size_t n = (size_t)(m->n_layers > 0 ? m->n_layers : 1);
    int64_t *keep = malloc(n * sizeof *keep), *rebuild = malloc(n * sizeof *rebuild);
    for (int32_t l = 0; keep && rebuild && l < m->n_layers; l++) {
        int64_t act = m->act_bytes[l] / accum_k;
        int rc = recompute && l < n_recompute && recompute[l];
        keep[l] = memest_round_block(rc ? (int64_t)((double)act * keep_fraction) : act);
        rebuild[l] = rc ? memest_round_block(act) : 0;
        kept += keep[l];
        /* during l's backward: layers <= l still hold their share, plus the rebuilt
         * activations of l */
        if (rc && kept + rebuild[l] > worst)
            worst = kept + rebuild[l];
    }
    if (!keep || !rebuild) {
        result = -1;
    } else if (accum_k == 1 && (!recompute || n_recompute <= 0) && m->n_layers == 0) {
        result = m->peak_bytes;
    } else if (!m->segments && m->n_layers > 0) {
        int64_t peak = reuse_peak(m, keep, rebuild, accum_k);
        result = peak < 0 ? -1 : base + peak;
    } else {
        result = base + (kept > worst ? kept : worst); /* segments: nothing remade */
    }
    free(keep);
    free(rebuild);
    return result;
}
