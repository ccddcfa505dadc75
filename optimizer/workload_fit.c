/*
 * workload_fit.c: the per-kernel fixed cost fitted on launch sizes (workload_fit_fixed_cost, see
 * workload.h).
 */
#define PR_FMT "optimizer"
#include "optimizer/workload_int.h"

#include <math.h>
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

/* Least squares of the relative error of y = c0 + c1 * max(x, ts) over m points; returns
 * the summed squared relative error, or -1 when the regressor does not vary. */
static double
hinge_lsq(const double *x, const double *y, int32_t m, double ts, double *c0, double *c1)
{
    double sw = 0, sz = 0, sy = 0, szz = 0, szy = 0;
    for (int32_t j = 0; j < m; j++) {
        double w = 1.0 / (y[j] * y[j]), z = x[j] > ts ? x[j] : ts;
        sw += w;
        sz += w * z;
        sy += w * y[j];
        szz += w * z * z;
        szy += w * z * y[j];
    }
    double mz = sz / sw, my = sy / sw, vz = szz / sw - mz * mz;
    if (vz <= 1e-12 * (mz * mz + 1))
        return -1;
    *c1 = (szy / sw - mz * my) / vz;
    *c0 = my - *c1 * mz;
    double cost = 0;
    for (int32_t j = 0; j < m; j++) {
        double z = x[j] > ts ? x[j] : ts, r = (*c0 + *c1 * z - y[j]) / y[j];
        cost += r * r;
    }
    return cost;
}

double
workload_hinge_at(const workload_hinge *h, double threads)
{
    return h->c0 + h->c1 * (threads > h->ts ? threads : h->ts);
}

int32_t
workload_fit_hinges(workload_kernel_sample *s, size_t n, workload_hinge **out)
{
    *out = NULL;
    if (s && n > 0)
        qsort(s, n, sizeof *s, cmp_sample);
    double *x = malloc(sizeof *x * (n + 1)), *y = malloc(sizeof *y * (n + 1));
    workload_hinge *h = NULL;
    int32_t nh = 0, cap = 0, rc = 0;
    if (!x || !y)
        rc = -1;
    for (size_t a = 0; s && a < n && rc == 0;) {
        size_t b = a;
        while (b < n && s[b].key == s[a].key)
            b++;
        int32_t m = 0;
        for (size_t i = a; i < b;) {
            size_t j = i;
            while (j < b && s[j].threads == s[i].threads)
                j++;
            size_t mid = i + (j - i) / 2;
            double med = (j - i) % 2 ? (double)s[mid].dur_ns
                                     : 0.5 * ((double)s[mid - 1].dur_ns + (double)s[mid].dur_ns);
            if (s[i].threads > 0 && med > 0) {
                x[m] = s[i].threads;
                y[m++] = med;
            }
            i = j;
        }
        workload_hinge best = {.key = s[a].key, .sizes = m};
        double best_cost = -1;
        if (m >= WORKLOAD_FIT_MIN_SIZES && x[m - 1] >= 2 * x[0])
            for (int32_t k = 0; k + 1 < m; k++) {
                double c0, c1, cost = hinge_lsq(x, y, m, x[k], &c0, &c1);
                if (cost >= 0 && c1 > 0 && (best_cost < 0 || cost < best_cost)) {
                    best_cost = cost;
                    best.c0 = c0;
                    best.c1 = c1;
                    best.ts = x[k];
                }
            }
        if (best_cost >= 0) {
            if (nh == cap) {
                int32_t nc = cap ? 2 * cap : 16;
                workload_hinge *t = realloc(h, sizeof *t * (size_t)nc);
                if (!t) {
                    rc = -1;
                    break;
                }
                h = t;
                cap = nc;
            }
            best.rms_rel = sqrt(best_cost / m);
            h[nh++] = best;
        }
        a = b;
    }
    free(x);
    free(y);
    if (rc != 0) {
        free(h);
        h = NULL;
        nh = -1;
    }
    *out = h;
    return nh;
}
