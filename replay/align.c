/* align.c: clock offsets between ranks from collective end times (see align.h). */
#include "align.h"
#include "order.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_sample(const void *pa, const void *pb)
{
    const align_sample *a = pa, *b = pb;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Median of v[0..n) (sorts v). n > 0. */
static int64_t
median_i64(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, order_i64);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

void
align_result_free(align_result *res)
{
    free(res->offset_ns);
    free(res->aligned);
    free(res->shared);
    free(res->residual_us);
    memset(res, 0, sizeof *res);
}

/* The scratch of one alignment: the samples grouped by collective, each rank's
 * collectives, and per-rank lists of differences. */
typedef struct align_work {
    align_sample *s; /* the samples of present ranks, by (comm, seq, rank) */
    size_t *cbeg;    /* per collective: [cbeg[c], cbeg[c+1]) in s */
    size_t nc;       /* collectives */
    size_t *roff;    /* per rank: its collectives are rcol[roff[r] .. roff[r+1]) (CSR) */
    size_t *rcol;
    size_t acc;                    /* entries in rcol */
    int32_t *queue;                /* ranks aligned, in the order of the breadth-first walk */
    int64_t *diffs;                /* one collective's aligned ends */
    size_t *dcount, *dfill, *doff; /* per rank: values in dvals[doff[r] ..] */
    int64_t *dvals;
    double *spread; /* per matched collective: spread of its aligned ends (us) */
} align_work;

static void
align_work_free(align_work *w)
{
    free(w->s);
    free(w->cbeg);
    free(w->queue);
    free(w->diffs);
    free(w->roff);
    free(w->rcol);
    free(w->dcount);
    free(w->dfill);
    free(w->dvals);
    free(w->doff);
    free(w->spread);
}

/* Allocates w for n samples and n_ranks ranks (zeroed counters). Returns 0, or -1 when
 * out of memory (free w with align_work_free either way). */
static int
align_work_alloc(align_work *w, size_t n, int32_t n_ranks)
{
    memset(w, 0, sizeof *w);
    w->s = malloc((n ? n : 1) * sizeof *w->s);
    w->cbeg = malloc((n + 1) * sizeof *w->cbeg);
    w->queue = malloc(((size_t)n_ranks + 1) * sizeof *w->queue);
    w->diffs = malloc((n ? n : 1) * sizeof *w->diffs);
    w->roff = calloc((size_t)n_ranks + 1, sizeof *w->roff);
    w->rcol = malloc((n ? n : 1) * sizeof *w->rcol);
    w->dcount = calloc((size_t)n_ranks + 1, sizeof *w->dcount);
    w->dfill = calloc((size_t)n_ranks + 1, sizeof *w->dfill);
    w->dvals = malloc((n ? n : 1) * sizeof *w->dvals);
    w->doff = calloc((size_t)n_ranks + 1, sizeof *w->doff);
    w->spread = malloc((n ? n : 1) * sizeof *w->spread);
    return w->s && w->cbeg && w->queue && w->diffs && w->roff && w->rcol && w->dcount && w->dfill &&
                   w->dvals && w->doff && w->spread
               ? 0
               : -1;
}

/* Keeps the samples of present ranks (parts[p][0 .. counts[p]), p < nparts), sorted by
 * (comm, seq, rank), groups them by collective and lists each rank's collectives. */
static void
group_collectives(align_work *w, const align_sample *const *parts, const size_t *counts,
                  size_t nparts, int32_t n_ranks, const uint8_t *present)
{
    align_sample *s = w->s;
    size_t m = 0;
    for (size_t p = 0; p < nparts; p++)
        for (size_t i = 0; i < counts[p]; i++) {
            const align_sample *x = &parts[p][i];
            if (x->rank >= 0 && x->rank < n_ranks && (!present || present[x->rank]))
                s[m++] = *x;
        }
    qsort(s, m, sizeof *s, cmp_sample);
    size_t nc = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || s[i].comm != s[i - 1].comm || s[i].seq != s[i - 1].seq)
            w->cbeg[nc++] = i;
    w->cbeg[nc] = m;
    w->nc = nc;

    /* rank -> collectives index (CSR): counts in roff, then offsets (n_ranks + 1 entries) */
    size_t *rcount = w->roff;
    for (size_t c = 0; c < nc; c++)
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++)
            rcount[s[i].rank]++;
    size_t acc = 0;
    for (int32_t r = 0; r <= n_ranks; r++) {
        size_t t = r < n_ranks ? rcount[r] : 0;
        w->roff[r] = acc;
        acc += t;
    }
    w->acc = acc;
    size_t *fill = w->dfill;
    for (size_t c = 0; c < nc; c++)
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++) {
            int32_t r = s[i].rank;
            w->rcol[w->roff[r] + fill[r]++] = c;
        }
    memset(w->dfill, 0, ((size_t)n_ranks + 1) * sizeof *w->dfill);
}

/* Collects into dvals, per rank not yet aligned, its end-time differences with aligned
 * rank a over the collectives they share (dcount[b] of them for rank b). */
static void
collect_differences(align_work *w, int32_t n_ranks, const align_result *res, int32_t a)
{
    const align_sample *s = w->s;
    memset(w->dcount, 0, ((size_t)n_ranks + 1) * sizeof *w->dcount);
    size_t end_a = (size_t)(a + 1 < n_ranks ? w->roff[a + 1] : w->acc);
    for (size_t k = w->roff[a]; k < end_a; k++) {
        size_t c = w->rcol[k];
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++)
            if (!res->aligned[s[i].rank])
                w->dcount[s[i].rank]++;
    }
    size_t tot = 0;
    for (int32_t r = 0; r < n_ranks; r++) {
        w->doff[r] = tot;
        tot += w->dcount[r];
        w->dfill[r] = 0;
    }
    int64_t ea = 0;
    for (size_t k = w->roff[a]; k < end_a; k++) {
        size_t c = w->rcol[k];
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++)
            if (s[i].rank == a)
                ea = s[i].end_ns + res->offset_ns[a];
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++) {
            int32_t b = s[i].rank;
            if (!res->aligned[b])
                w->dvals[w->doff[b] + w->dfill[b]++] = ea - s[i].end_ns;
        }
    }
}

/* The breadth-first walk from the reference rank ref: each rank that shares collectives
 * with an aligned rank takes the median of its differences with it as its offset. */
static void
walk_offsets(align_work *w, int32_t n_ranks, const uint8_t *present, int32_t ref, align_result *res)
{
    res->aligned[ref] = 1;
    int32_t qh = 0, qt = 0;
    w->queue[qt++] = ref;
    int32_t n_present = 0;
    for (int32_t r = 0; r < n_ranks; r++)
        n_present += !present || present[r];
    int32_t n_aligned = 1;
    while (qh < qt && n_aligned < n_present) {
        collect_differences(w, n_ranks, res, w->queue[qh++]);
        for (int32_t b = 0; b < n_ranks; b++) {
            if (res->aligned[b] || w->dcount[b] == 0)
                continue;
            res->offset_ns[b] = median_i64(w->dvals + w->doff[b], w->dcount[b]);
            res->shared[b] = (int32_t)w->dcount[b];
            res->aligned[b] = 1;
            n_aligned++;
            w->queue[qt++] = b;
        }
    }
    for (int32_t r = 0; r < n_ranks; r++)
        if ((!present || present[r]) && !res->aligned[r])
            res->n_unaligned++;
}

/* Residuals: the spread of aligned ends per collective; per rank, the median distance
 * of its end from the collective's median end. */
static void
residuals(align_work *w, int32_t n_ranks, align_result *res)
{
    const align_sample *s = w->s;
    size_t ns = 0;
    double mx = 0;
    memset(w->dcount, 0, ((size_t)n_ranks + 1) * sizeof *w->dcount);
    size_t tot = 0;
    for (int32_t r = 0; r < n_ranks; r++) {
        w->doff[r] = tot;
        tot += (size_t)(w->roff[r + 1 <= n_ranks ? r + 1 : r] - w->roff[r]);
        w->dfill[r] = 0;
    }
    for (size_t c = 0; c < w->nc; c++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        size_t k = 0;
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++) {
            if (!res->aligned[s[i].rank])
                continue;
            int64_t e = s[i].end_ns + res->offset_ns[s[i].rank];
            w->diffs[k++] = e;
            lo = e < lo ? e : lo;
            hi = e > hi ? e : hi;
        }
        if (k < 2)
            continue;
        int64_t med = median_i64(w->diffs, k);
        w->spread[ns++] = (double)(hi - lo) / 1000.0;
        if ((double)(hi - lo) / 1000.0 > mx)
            mx = (double)(hi - lo) / 1000.0;
        for (size_t i = w->cbeg[c]; i < w->cbeg[c + 1]; i++) {
            int32_t r = s[i].rank;
            if (!res->aligned[r])
                continue;
            int64_t d = s[i].end_ns + res->offset_ns[r] - med;
            w->dvals[w->doff[r] + w->dfill[r]++] = d < 0 ? -d : d;
        }
    }
    for (int32_t r = 0; r < n_ranks; r++)
        if (w->dfill[r] > 0)
            res->residual_us[r] = (double)median_i64(w->dvals + w->doff[r], w->dfill[r]) / 1000.0;
    if (ns > 0) {
        qsort(w->spread, ns, sizeof *w->spread, order_double);
        res->residual_median_us = w->spread[ns / 2];
    }
    res->residual_max_us = mx;
}

int
align_clocks_from_collectives(const align_sample *samples, size_t n, int32_t n_ranks,
                              const uint8_t *present, align_result *res)
{
    return align_clocks_from_parts(&samples, &n, 1, n_ranks, present, res);
}

int
align_clocks_from_parts(const align_sample *const *parts, const size_t *counts, size_t nparts,
                        int32_t n_ranks, const uint8_t *present, align_result *res)
{
    align_work w;
    int rc = -1;
    size_t n = 0;
    for (size_t p = 0; p < nparts; p++)
        n += counts[p];
    memset(res, 0, sizeof *res);
    res->n_ranks = n_ranks;
    res->reference = -1;
    res->offset_ns = calloc((size_t)n_ranks + 1, sizeof *res->offset_ns);
    res->aligned = calloc((size_t)n_ranks + 1, 1);
    res->shared = calloc((size_t)n_ranks + 1, sizeof *res->shared);
    res->residual_us = calloc((size_t)n_ranks + 1, sizeof *res->residual_us);
    if (align_work_alloc(&w, n, n_ranks) == 0 && res->offset_ns && res->aligned && res->shared &&
        res->residual_us) {
        group_collectives(&w, parts, counts, nparts, n_ranks, present);
        for (int32_t r = 0; r < n_ranks && res->reference < 0; r++)
            if (!present || present[r])
                res->reference = r;
        if (res->reference >= 0) {
            walk_offsets(&w, n_ranks, present, res->reference, res);
            residuals(&w, n_ranks, res);
        }
        rc = 0;
    }
    align_work_free(&w);
    if (rc != 0)
        align_result_free(res);
    return rc;
}
