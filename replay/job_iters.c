/* job_iters.c: the iterations a load finds before its second pass (see job.h): the kernel
 * period's cut agreed across ranks from the first pass, the compared iterations and the
 * window. */
#include <stdlib.h>
#include <string.h>

#include "iter.h"
#include "job_int.h"
#include "period.h"

int
job_period_collect(period_collect *c, const dpro_reader *r, const dpro_event *e)
{
    int rc = 0, key = -1, yes = 0;
    if (c->on && e->kind == DPRO_KIND_MARKER) {
        yes = e->subkind == DPRO_MARK_ITERATION;
        if (!yes && (e->subkind == DPRO_MARK_RANGE || e->subkind == DPRO_MARK_CPU_OP) &&
            iter_text_is_iteration(dpro_reader_string(r, e->name), &key) && key >= 0 && key < 8)
            yes = ++c->key_count[key] >= 2;
    }
    if (yes) { /* the markers decide (replay_detect_iterations): no period is looked for */
        free(c->k);
        c->k = NULL;
        c->n = c->cap = 0;
        c->on = 0;
    }
    if (c->on && e->kind == DPRO_KIND_KERNEL && c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        period_kernel *x = realloc(c->k, cap * sizeof *x);
        if (x) {
            c->k = x;
            c->cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0 && c->on && e->kind == DPRO_KIND_KERNEL)
        c->k[c->n++] = (period_kernel){e->start_ns, e->end_ns, e->stream, e->name};
    return rc;
}

int
job_period_scan(rank_task *t, const period_collect *c)
{
    int rc = 0;
    if (c->on && period_scan_kernels(c->k, c->n, NULL, &t->period) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0 && t->period.p > 0 && period_scan_trim(&t->period) != 0)
        rc = DPRO_ERR_NOMEM;
    if (rc == 0 && t->period.p > 0)
        t->method = ITER_PERIOD;
    return rc;
}

/* Gives task x, scanned, the boundaries of its cut ri (taken): their positions, and
 * where its scan holds the kernels' ends (the rank read here) their ends, as bend and as
 * bstart (no window is taken on a period's boundaries: bstart only travels in shared
 * reading). Returns 0 or -1. */
static int
take_cut(rank_task *x, replay_rank_iters *ri)
{
    int rc = 0;
    if (x->period.dend) {
        free(x->bstart);
        free(x->bend);
        x->bstart = malloc((size_t)(ri->n > 0 ? ri->n : 1) * sizeof *x->bstart);
        x->bend = malloc((size_t)(ri->n > 0 ? ri->n : 1) * sizeof *x->bend);
        rc = x->bstart && x->bend ? 0 : -1;
    }
    if (rc == 0 && x->period.dend) {
        period_ends(&x->period, ri->event_index, (size_t)ri->n, x->bend);
        memcpy(x->bstart, x->bend, (size_t)ri->n * sizeof *x->bstart);
    }
    if (rc == 0) {
        x->nb = ri->n;
        x->bpos = ri->event_index;
        ri->event_index = NULL;
        x->bstream = x->period.stream;
        x->bperiod = x->period.p;
        period_scan_free(&x->period);
    }
    return rc;
}

/* What job_period_share hands over of one scan: these, then idle[p] and names[p]. */
typedef struct scan_head {
    uint64_t stream;
    uint64_t n, p, lo, hi;
} scan_head;

/* Appends task t's scan head and period to buf (*len bytes of *cap). Returns 0 or -1. */
static int
put_scan(const rank_task *t, unsigned char **buf, size_t *len, size_t *cap)
{
    const period_scan *ps = &t->period;
    scan_head h = {ps->stream, ps->n, ps->p, ps->lo, ps->hi};
    size_t need = sizeof h + ps->p * (sizeof *ps->idle + sizeof *ps->names);
    if (*len + need > *cap) {
        size_t c = 2 * (*len + need);
        unsigned char *x = realloc(*buf, c);
        if (!x)
            return -1;
        *buf = x;
        *cap = c;
    }
    memcpy(*buf + *len, &h, sizeof h);
    *len += sizeof h;
    if (ps->p > 0) {
        memcpy(*buf + *len, ps->idle, ps->p * sizeof *ps->idle);
        *len += ps->p * sizeof *ps->idle;
        memcpy(*buf + *len, ps->names + (ps->lo - ps->nbase), ps->p * sizeof *ps->names);
        *len += ps->p * sizeof *ps->names;
    }
    return 0;
}

/* Takes one scan from buf at *at (len bytes) into ps (trimmed, without ends). Returns 0
 * or -1 (out of memory, or the bytes end early). */
static int
get_scan(const unsigned char *buf, size_t len, size_t *at, period_scan *ps)
{
    scan_head h;
    memset(ps, 0, sizeof *ps);
    if (len - *at < sizeof h)
        return -1;
    memcpy(&h, buf + *at, sizeof h);
    *at += sizeof h;
    if (h.p == 0)
        return 0;
    if (h.p > (len - *at) / (sizeof *ps->idle + sizeof *ps->names) || h.lo + h.p > h.hi)
        return -1;
    *ps = (period_scan){.stream = h.stream,
                        .n = h.n,
                        .p = h.p,
                        .lo = h.lo,
                        .hi = h.hi,
                        .trimmed = 1,
                        .nbase = h.lo,
                        .base = h.lo > 0 ? h.lo - 1 : 0};
    ps->idle = malloc(h.p * sizeof *ps->idle);
    ps->names = malloc(h.p * sizeof *ps->names);
    if (!ps->idle || !ps->names) {
        period_scan_free(ps);
        return -1;
    }
    memcpy(ps->idle, buf + *at, h.p * sizeof *ps->idle);
    *at += h.p * sizeof *ps->idle;
    memcpy(ps->names, buf + *at, h.p * sizeof *ps->names);
    *at += h.p * sizeof *ps->names;
    return 0;
}

int
job_period_share(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi)
{
    unsigned char *out = NULL;
    size_t len = 0, cap = 0, all_len = 0, at = 0;
    void *all = NULL;
    int rc = 0;
    for (int32_t i = lo; rc == 0 && i < hi; i++)
        rc = put_scan(&t[i], &out, &len, &cap);
    /* every process takes part even when out of memory here (an empty share), and fails
     * afterwards on reading what it lacks */
    if (sh->gather(sh->ctx, out, rc == 0 ? len : 0, &all, &all_len) != 0)
        rc = -1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        period_scan ps;
        rc = get_scan(all, all_len, &at, &ps);
        if (rc == 0 && (i < lo || i >= hi)) {
            period_scan_free(&t[i].period);
            t[i].period = ps;
        } else if (rc == 0) {
            period_scan_free(&ps); /* its own, with the ends */
        }
    }
    free(out);
    free(all);
    return rc == 0 ? 0 : DPRO_ERR_NOMEM;
}

/* Gives t's rank the k boundary positions b found of t->nb (b taken). Returns 0,
 * DPRO_ERR_NOMEM (b NULL) or DPRO_ERR_CORRUPT (fewer than t->nb found; b freed). */
static int
take_bounds(rank_task *t, size_t *b, int32_t k)
{
    int rc = !b ? DPRO_ERR_NOMEM : k < t->nb ? DPRO_ERR_CORRUPT : 0;
    if (rc == 0) {
        t->jr->bounds = b;
        t->jr->n_bounds = t->nb;
        t->jr->period = t->bperiod;
    } else {
        free(b);
    }
    return rc;
}

int
job_period_place_ends(rank_task *t)
{
    job_rank *jr = t->jr;
    size_t *b = malloc((size_t)(t->nb > 0 ? t->nb : 1) * sizeof *b);
    int32_t k = 0;
    for (size_t i = 0; b && i < jr->n_events && k < t->nb; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind == DPRO_KIND_KERNEL && e->stream == t->bstream && e->end_ns == t->bend[k])
            b[k++] = i;
    }
    return take_bounds(t, b, k);
}

int
job_period_agree(job *j, rank_task *t, int32_t n)
{
    period_scan *ps = calloc((size_t)j->n_ranks + 1, sizeof *ps); /* shallow copies */
    replay_rank_iters *it = calloc((size_t)j->n_ranks + 1, sizeof *it);
    int rc = ps && it ? 0 : -1;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        int32_t r = t[i].jr->rank;
        if (t[i].period.p == 0)
            continue;
        ps[r] = t[i].period;
        rc = period_cut(&ps[r], period_own_phase(&ps[r]), &it[r]);
    }
    if (rc == 0)
        rc = period_match(j, ps, it);
    for (int32_t i = 0; rc == 0 && i < n; i++)
        if (t[i].period.p > 0)
            rc = take_cut(&t[i], &it[t[i].jr->rank]);
    for (int32_t r = 0; it && r < j->n_ranks; r++)
        replay_rank_iters_free(&it[r]);
    free(it);
    free(ps);
    return rc == 0 ? 0 : DPRO_ERR_NOMEM;
}

int
job_period_place(rank_task *t, size_t *missing)
{
    job_rank *jr = t->jr;
    size_t *b = malloc((size_t)(t->nb > 0 ? t->nb : 1) * sizeof *b);
    size_t pos = 0;
    int32_t k = 0;
    for (size_t i = 0; b && i < jr->n_events && k < t->nb; i++) {
        const job_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_KERNEL || e->stream != t->bstream || pos++ != t->bpos[k])
            continue;
        if (e->end_ns != t->bend[k])
            break;
        b[k++] = i;
    }
    int rc = take_bounds(t, b, k);
    if (rc != 0)
        *missing = k < t->nb ? t->bpos[k] : 0;
    return rc;
}

/* The warm-up the replay would detect: the most leading slow iterations of any rank,
 * from the ends of the boundary events (the replay takes the ends of the boundary nodes,
 * the last host call within each marker). Returns it, or -1 (out of memory). */
static int32_t
detect_warmup(const rank_task *t, int32_t n)
{
    int32_t warm = 0;
    for (int32_t i = 0; i < n && warm >= 0; i++) {
        int64_t *st = malloc((size_t)t[i].nb * sizeof *st);
        uint8_t *wu = malloc((size_t)t[i].nb);
        if (!st || !wu) {
            warm = -1;
        } else {
            for (int32_t k = 0; k < t[i].nb; k++)
                st[k] = (int64_t)t[i].bend[k];
            int32_t w = (int32_t)iter_mark_warmup(st, (size_t)t[i].nb, 0.10, wu);
            warm = w > warm ? w : warm;
        }
        free(st);
        free(wu);
    }
    return warm;
}

/* The compared iterations as the replay chooses them, from the first pass: warm-up given
 * or detected, then o->iterations of them (0: all), as boundary indices *first (the
 * boundary that opens them) to *last + 1, and each task's cmp_t0, cmp_t1, cmp_ni.
 * Returns 1 when every task's iterations come from markers or from the kernel period's
 * cut agreed in the first pass and some are compared, 0 when not, -1 when out of
 * memory. */
static int
compared_span(rank_task *t, int32_t n, const job_options *o, int32_t *first, int32_t *last,
              int32_t *n_common)
{
    *n_common = -1;
    for (int32_t i = 0; i < n; i++) {
        if ((t[i].method != ITER_MARKER && t[i].method != ITER_RANGE &&
             !(t[i].method == ITER_PERIOD && t[i].bpos)) ||
            t[i].nb < 2)
            return 0;
        if (*n_common < 0 || t[i].nb < *n_common)
            *n_common = t[i].nb;
    }
    *first = o->warmup >= 0 ? (o->warmup > 0 ? o->warmup - 1 : 0) : detect_warmup(t, n);
    if (n < 1 || *first < 0)
        return n < 1 ? 0 : -1;
    *last = *n_common - 2;
    if (*last < *first)
        *first = 0; /* everything looked like warm-up: the replay compares all */
    if (o->iterations > 0 && *last - *first + 1 > o->iterations)
        *last = *first + o->iterations - 1;
    if (*last < *first)
        return 0;
    for (int32_t i = 0; i < n; i++) {
        t[i].cmp_t0 = t[i].bend[*first];
        t[i].cmp_t1 = t[i].bend[*last + 1];
        t[i].cmp_ni = *last - *first + 1;
    }
    return 1;
}

int
job_choose_window(job *j, rank_task *t, int32_t n, const job_options *o, int32_t *span)
{
    int32_t first = 0, last = -1, n_common = 0;
    int rc = compared_span(t, n, o, &first, &last, &n_common);
    int period = 0; /* the kernel period needs the whole trace */
    for (int32_t i = 0; i < n; i++)
        period |= t[i].method == ITER_PERIOD;
    if (rc <= 0 || o->iterations <= 0 || o->full || o->max_events || period)
        return rc < 0 ? -1 : 0;
    int32_t from = first > 0 ? first - 1 : 0;
    if (from == 0 && last + 2 >= n_common)
        return 0; /* the window is everything */
    for (int32_t i = 0; i < n; i++) {
        t[i].windowed = 1;
        t[i].t0 = t[i].bstart[from];
        t[i].t1 = t[i].bend[last + 1];
        t[i].b_first = from;
        t[i].b_count = last + 2 - from;
    }
    j->iter_skipped = from;
    j->window_warmup = first - from + 1;
    span[0] = first + 1; /* numbered as the replay numbers them */
    span[1] = last + 1;
    return 1;
}
