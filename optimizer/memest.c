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
    if (!order || !cls || !live || !m->act_bytes || !m->act_time || !m->static_each) {
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
            if (live[i])
                m->other_bytes += b;
            break;
        }
    }
    free(order);
    free(cls);
    free(live);
    return 0;
}

void
memest_free(memest *m)
{
    free(m->act_bytes);
    free(m->act_time);
    free(m->static_each);
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
memest_predict(const memest *m, const uint8_t *recompute, int32_t n_recompute, double keep_fraction,
               int32_t accum_k)
{
    if (accum_k < 1)
        accum_k = 1;
    if (keep_fraction <= 0 || keep_fraction > 1)
        keep_fraction = 1;
    int64_t base = m->static_bytes + m->optimizer_bytes + m->other_bytes;
    int64_t kept = 0, worst = 0;
    for (int32_t l = 0; l < m->n_layers; l++) {
        int64_t act = m->act_bytes[l] / accum_k;
        int rc = recompute && l < n_recompute && recompute[l];
        int64_t keep = memest_round_block(rc ? (int64_t)((double)act * keep_fraction) : act);
        kept += keep;
        if (rc) {
            /* during l's backward: layers <= l still hold their share, plus the
             * rebuilt activations of l */
            int64_t during = kept + memest_round_block(act);
            if (during > worst)
                worst = during;
        }
    }
    if (accum_k == 1 && (!recompute || n_recompute <= 0) && m->n_layers == 0)
        return m->peak_bytes;
    return base + (kept > worst ? kept : worst);
}
