/*
 * workload_fit.c: the per-kernel fixed cost fitted on launch sizes (workload_fit_fixed_cost, see
 * workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_sample(const void *pa, const void *pb)
{
    const workload_kernel_sample *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->threads != b->threads)
        return a->threads < b->threads ? -1 : 1;
    return (a->dur_ns > b->dur_ns) - (a->dur_ns < b->dur_ns);
}

/* Fit of one kernel name over its m thread counts x[] and median durations y[]; returns
 * 1 and the intercept, slope and weight (inverse variance of the intercept), or 0 when
 * the name does not qualify (workload.h). */
static int
fit_one_name(const double *x, const double *y, int32_t m, double *c0, double *c1, double *wt)
{
    if (m < WORKLOAD_FIT_MIN_SIZES || x[m - 1] < 2 * x[0])
        return 0;
    double mx = 0, my = 0;
    for (int32_t j = 0; j < m; j++) {
        mx += x[j];
        my += y[j];
    }
    mx /= m;
    my /= m;
    double sxx = 0, sxy = 0;
    for (int32_t j = 0; j < m; j++) {
        sxx += (x[j] - mx) * (x[j] - mx);
        sxy += (x[j] - mx) * (y[j] - my);
    }
    if (sxx <= 0 || sxy <= 0)
        return 0;
    *c1 = sxy / sxx;
    *c0 = my - *c1 * mx;
    double rss = 0;
    for (int32_t j = 0; j < m; j++) {
        double r = y[j] - (*c0 + *c1 * x[j]);
        rss += r * r;
    }
    double s2 = m > 2 ? rss / (m - 2) : rss;
    double floor = 0.01 * y[m / 2];
    *wt = 1.0 / (s2 * (1.0 / m + mx * mx / sxx) + floor * floor + 1e-9);
    return 1;
}

int32_t
workload_fit_fixed_cost(workload_kernel_sample *s, size_t n, workload_fixed_fit *fit)
{
    memset(fit, 0, sizeof *fit);
    if (!s || n == 0)
        return 0;
    qsort(s, n, sizeof *s, cmp_sample);
    double *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
    if (!x || !y) {
        free(x);
        free(y);
        return 0;
    }
    double sw = 0, sc0 = 0, sc1 = 0;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && s[b].key == s[a].key)
            b++;
        /* samples [a, b) of one name: the median duration of each thread count */
        int32_t m = 0;
        for (size_t i = a; i < b;) {
            size_t j = i;
            while (j < b && s[j].threads == s[i].threads)
                j++;
            if (s[i].threads > 0) {
                x[m] = s[i].threads;
                size_t mid = i + (j - i) / 2;
                y[m] = (j - i) % 2 ? (double)s[mid].dur_ns
                                   : 0.5 * ((double)s[mid - 1].dur_ns + (double)s[mid].dur_ns);
                m++;
            }
            i = j;
        }
        double c0, c1, wt;
        if (fit_one_name(x, y, m, &c0, &c1, &wt)) {
            fit->names++;
            sw += wt;
            sc0 += wt * c0;
            sc1 += wt * c1;
        }
        a = b;
    }
    free(x);
    free(y);
    if (fit->names > 0) {
        fit->c0_ns = sc0 / sw > 0 ? sc0 / sw : 0;
        fit->slope_ns = sc1 / sw;
    }
    return fit->names;
}
