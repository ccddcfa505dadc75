/* align.c: clock offsets between ranks from collective end times (see align.h). */
#include "align.h"

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

static int
cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static int
cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Median of v[0..n) (sorts v). n > 0. */
static int64_t
median_i64(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
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

int
align_clocks_from_collectives(const align_sample *samples, size_t n, int32_t n_ranks,
                              const uint8_t *present, align_result *res)
{
    memset(res, 0, sizeof *res);
    res->n_ranks = n_ranks;
    res->reference = -1;
    res->offset_ns = calloc((size_t)n_ranks + 1, sizeof *res->offset_ns);
    res->aligned = calloc((size_t)n_ranks + 1, 1);
    res->shared = calloc((size_t)n_ranks + 1, sizeof *res->shared);
    res->residual_us = calloc((size_t)n_ranks + 1, sizeof *res->residual_us);
    align_sample *s = malloc((n ? n : 1) * sizeof *s);
    /* per collective: [begin, end) in s */
    size_t *cbeg = malloc((n + 1) * sizeof *cbeg);
    int32_t *queue = malloc(((size_t)n_ranks + 1) * sizeof *queue);
    int64_t *diffs = malloc((n ? n : 1) * sizeof *diffs);
    /* per rank: list of collectives it is in */
    size_t *roff = calloc((size_t)n_ranks + 1, sizeof *roff);
    size_t *rcol = malloc((n ? n : 1) * sizeof *rcol);
    size_t *dcount = calloc((size_t)n_ranks + 1, sizeof *dcount);
    size_t *dfill = calloc((size_t)n_ranks + 1, sizeof *dfill);
    int64_t *dvals = malloc((n ? n : 1) * sizeof *dvals);
    size_t *doff = calloc((size_t)n_ranks + 1, sizeof *doff);
    double *spread = malloc((n ? n : 1) * sizeof *spread);
    int rc = -1;
    if (!res->offset_ns || !res->aligned || !res->shared || !res->residual_us || !s || !cbeg ||
        !queue || !diffs || !roff || !rcol || !dcount || !dfill || !dvals || !doff || !spread)
        goto out;

    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (samples[i].rank >= 0 && samples[i].rank < n_ranks &&
            (!present || present[samples[i].rank]))
            s[m++] = samples[i];
    qsort(s, m, sizeof *s, cmp_sample);
    size_t nc = 0;
    for (size_t i = 0; i < m; i++)
        if (i == 0 || s[i].comm != s[i - 1].comm || s[i].seq != s[i - 1].seq)
            cbeg[nc++] = i;
    cbeg[nc] = m;

    /* rank -> collectives index (CSR) */
    size_t *rcount = roff; /* reuse as counts then offsets (n_ranks + 1 entries) */
    for (size_t c = 0; c < nc; c++)
        for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++)
            rcount[s[i].rank]++;
    size_t acc = 0;
    for (int32_t r = 0; r <= n_ranks; r++) {
        size_t t = r < n_ranks ? rcount[r] : 0;
        roff[r] = acc;
        acc += t;
    }
    {
        size_t *fill = dfill;
        for (size_t c = 0; c < nc; c++)
            for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++) {
                int32_t r = s[i].rank;
                rcol[roff[r] + fill[r]++] = c;
            }
        memset(dfill, 0, ((size_t)n_ranks + 1) * sizeof *dfill);
    }

    int32_t ref = -1;
    for (int32_t r = 0; r < n_ranks; r++)
        if (!present || present[r]) {
            ref = r;
            break;
        }
    res->reference = ref;
    if (ref < 0) {
        rc = 0;
        goto out;
    }
    res->aligned[ref] = 1;
    int32_t qh = 0, qt = 0;
    queue[qt++] = ref;
    int32_t n_present = 0;
    for (int32_t r = 0; r < n_ranks; r++)
        n_present += !present || present[r];
    int32_t n_aligned = 1;
    while (qh < qt && n_aligned < n_present) {
        int32_t a = queue[qh++];
        /* count, then collect, the differences each unaligned rank has with a */
        memset(dcount, 0, ((size_t)n_ranks + 1) * sizeof *dcount);
        size_t end_a = (size_t)(a + 1 < n_ranks ? roff[a + 1] : acc);
        for (size_t k = roff[a]; k < end_a; k++) {
            size_t c = rcol[k];
            for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++)
                if (!res->aligned[s[i].rank])
                    dcount[s[i].rank]++;
        }
        size_t tot = 0;
        for (int32_t r = 0; r < n_ranks; r++) {
            doff[r] = tot;
            tot += dcount[r];
            dfill[r] = 0;
        }
        int64_t ea = 0;
        for (size_t k = roff[a]; k < end_a; k++) {
            size_t c = rcol[k];
            for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++)
                if (s[i].rank == a)
                    ea = s[i].end_ns + res->offset_ns[a];
            for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++) {
                int32_t b = s[i].rank;
                if (!res->aligned[b])
                    dvals[doff[b] + dfill[b]++] = ea - s[i].end_ns;
            }
        }
        for (int32_t b = 0; b < n_ranks; b++) {
            if (res->aligned[b] || dcount[b] == 0)
                continue;
            res->offset_ns[b] = median_i64(dvals + doff[b], dcount[b]);
            res->shared[b] = (int32_t)dcount[b];
            res->aligned[b] = 1;
            n_aligned++;
            queue[qt++] = b;
        }
    }
    for (int32_t r = 0; r < n_ranks; r++)
        if ((!present || present[r]) && !res->aligned[r])
            res->n_unaligned++;

    /* residuals: spread of aligned ends per collective; per rank, the median distance of
     * its end from the collective's median end */
    size_t ns = 0;
    double mx = 0;
    memset(dcount, 0, ((size_t)n_ranks + 1) * sizeof *dcount);
    size_t tot = 0;
    for (int32_t r = 0; r < n_ranks; r++) {
        doff[r] = tot;
        tot += (size_t)(roff[r + 1 <= n_ranks ? r + 1 : r] - roff[r]);
        dfill[r] = 0;
    }
    for (size_t c = 0; c < nc; c++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        size_t k = 0;
        for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++) {
            if (!res->aligned[s[i].rank])
                continue;
            int64_t e = s[i].end_ns + res->offset_ns[s[i].rank];
            diffs[k++] = e;
            lo = e < lo ? e : lo;
            hi = e > hi ? e : hi;
        }
        if (k < 2)
            continue;
        int64_t med = median_i64(diffs, k);
        spread[ns++] = (double)(hi - lo) / 1000.0;
        if ((double)(hi - lo) / 1000.0 > mx)
            mx = (double)(hi - lo) / 1000.0;
        for (size_t i = cbeg[c]; i < cbeg[c + 1]; i++) {
            int32_t r = s[i].rank;
            if (!res->aligned[r])
                continue;
            int64_t d = s[i].end_ns + res->offset_ns[r] - med;
            dvals[doff[r] + dfill[r]++] = d < 0 ? -d : d;
        }
    }
    for (int32_t r = 0; r < n_ranks; r++)
        if (dfill[r] > 0)
            res->residual_us[r] = (double)median_i64(dvals + doff[r], dfill[r]) / 1000.0;
    if (ns > 0) {
        qsort(spread, ns, sizeof *spread, cmp_double);
        res->residual_median_us = spread[ns / 2];
    }
    res->residual_max_us = mx;
    rc = 0;
out:
    free(s);
    free(cbeg);
    free(queue);
    free(diffs);
    free(roff);
    free(rcol);
    free(dcount);
    free(dfill);
    free(dvals);
    free(doff);
    free(spread);
    if (rc != 0)
        align_result_free(res);
    return rc;
}
