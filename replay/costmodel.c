/* costmodel.c: alpha-beta collective model fitted on transfer times (see costmodel.h). */
#include "costmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"

double
costmodel_factor(int op, int32_t nranks)
{
    double n = nranks > 1 ? nranks : 1;
    switch (op) {
    case DPRO_COLL_ALLREDUCE:
        return nranks > 1 ? 2.0 * (n - 1) / n : 1.0;
    case DPRO_COLL_ALLGATHER:
    case DPRO_COLL_REDUCESCATTER:
    case DPRO_COLL_ALLTOALL:
        return nranks > 1 ? (n - 1) / n : 1.0;
    default:
        return 1.0;
    }
}

static int
cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Least squares y = a + b x over the points with use[i]; returns 0 or -1 (degenerate x).
 */
static int
lsq(const double *x, const double *y, const uint8_t *use, size_t n, double *a, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!use[i])
            continue;
        k++;
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    if (k == 0)
        return -1;
    double mx = sx / (double)k, my = sy / (double)k;
    double vx = sxx / (double)k - mx * mx;
    if (k < 2 || vx <= 1e-9 * (mx * mx + 1)) {
        /* one size: through the origin and the mean point */
        *a = 0;
        *b = mx > 0 ? my / mx : 0;
        if (mx <= 0) {
            *a = my;
            *b = 0;
        }
        return 0;
    }
    *b = (sxy / (double)k - mx * my) / vx;
    *a = my - *b * mx;
    if (*a < 0) { /* negative latency: refit through the origin */
        *a = 0;
        *b = sxx > 0 ? sxy / sxx : 0;
    }
    if (*b < 0) { /* no size dependence: a constant */
        *b = 0;
        *a = my;
    }
    return 0;
}

/* Fits one set of points into f. */
static int
fit_points(const double *x, const double *y, size_t n, costmodel_fit *f)
{
    memset(f, 0, sizeof *f);
    if (n == 0)
        return 0;
    uint8_t *use = malloc(n);
    double *res = malloc(n * sizeof *res);
    if (!use || !res) {
        free(use);
        free(res);
        return -1;
    }
    memset(use, 1, n);
    double a = 0, b = 0;
    lsq(x, y, use, n, &a, &b);
    for (int round = 0; round < 3 && n >= 5; round++) {
        for (size_t i = 0; i < n; i++)
            res[i] = fabs(y[i] - (a + b * x[i]));
        double *tmp = malloc(n * sizeof *tmp);
        if (tmp) {
            memcpy(tmp, res, n * sizeof *tmp);
            qsort(tmp, n, sizeof *tmp, cmp_double);
            double mad = tmp[n / 2];
            free(tmp);
            size_t kept = 0;
            for (size_t i = 0; i < n; i++) {
                use[i] = res[i] <= 3 * mad * 1.4826 + 1e-9 * fabs(y[i]) + 1.0;
                kept += use[i];
            }
            if (kept >= 2 && kept < n)
                lsq(x, y, use, n, &a, &b);
        }
    }

    f->fitted = 1;
    f->alpha_ns = a;
    f->beta_bpns = b > 0 ? 1.0 / b : 0;
    f->n_samples = (int32_t)n;
    double err = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] <= 0)
            continue;
        err += fabs(a + b * x[i] - y[i]) / y[i];
        k++;
    }
    f->mape = k ? 100.0 * err / (double)k : 0;
    free(use);
    free(res);
    return 0;
}

int
costmodel_fit_samples(costmodel *m, const costmodel_sample *s, size_t n)
{
    memset(m, 0, sizeof *m);
    double *x = malloc((n ? n : 1) * sizeof *x);
    double *y = malloc((n ? n : 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return -1;
    }
    int rc = 0;
    for (int op = 0; op < COSTMODEL_OPS && rc == 0; op++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].op != op || s[i].transfer_ns <= 0)
                continue;
            x[k] = costmodel_factor(op, s[i].nranks) * (double)s[i].bytes;
            y[k] = (double)s[i].transfer_ns;
            k++;
        }
        rc = fit_points(x, y, k, &m->op[op]);
    }
    if (rc == 0) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].transfer_ns <= 0)
                continue;
            x[k] = costmodel_factor(s[i].op, s[i].nranks) * (double)s[i].bytes;
            y[k] = (double)s[i].transfer_ns;
            k++;
        }
        rc = fit_points(x, y, k, &m->all);
    }
    free(x);
    free(y);
    return rc;
}

int64_t
costmodel_predict(const costmodel *m, int op, int32_t nranks, int64_t bytes)
{
    const costmodel_fit *f =
        op >= 0 && op < COSTMODEL_OPS && m->op[op].fitted ? &m->op[op] : &m->all;
    if (!f->fitted)
        return 0;
    double t = f->alpha_ns;
    if (f->beta_bpns > 0)
        t += costmodel_factor(op, nranks) * (double)bytes / f->beta_bpns;
    return t > 0 ? (int64_t)llround(t) : 0;
}
