/* contention.c: compute/communication contention measured on a trace (see contention.h). */
#include "contention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "order.h"

typedef struct span {
    int64_t a, b;
} span;

static int
cmp_span(const void *pa, const void *pb)
{
    const span *x = pa, *y = pb;
    return (x->a > y->a) - (x->a < y->a);
}

/* Sorts and merges v[0..n) into disjoint spans; returns the count. */
static size_t
merge_spans(span *v, size_t n)
{
    size_t m = 0;
    qsort(v, n, sizeof *v, cmp_span);
    for (size_t i = 0; i < n; i++) {
        if (v[i].b <= v[i].a)
            continue;
        if (m > 0 && v[i].a <= v[m - 1].b) {
            if (v[i].b > v[m - 1].b)
                v[m - 1].b = v[i].b;
        } else {
            v[m++] = v[i];
        }
    }
    return m;
}

/* Fraction of [a, b] covered by the disjoint sorted spans u[0..n). */
static double
covered(const span *u, size_t n, int64_t a, int64_t b)
{
    if (b <= a || n == 0)
        return 0;
    size_t lo = 0, hi = n; /* first span ending after a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid].b <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t c = 0;
    for (size_t i = lo; i < n && u[i].a < b; i++) {
        int64_t x = u[i].a > a ? u[i].a : a, y = u[i].b < b ? u[i].b : b;
        if (y > x)
            c += y - x;
    }
    return (double)c / (double)(b - a);
}

/* Whether node n is a compute kernel; name_comm[id] caches dpro_kernel_is_comm of each
 * string id (0: not asked yet, 1: compute, 2: communication), asked of every node thrice. */
static int
is_compute(const dfg *g, int32_t n, uint8_t *name_comm)
{
    if ((g->flags[n] & DFG_F_REMOVED) || g->kind[n] != DFG_KERNEL)
        return 0;
    int32_t id = g->name[n];
    if (id < 0 || (uint32_t)id >= g->strings.n)
        return !dpro_kernel_is_comm(dfg_name(g, id));
    if (!name_comm[id])
        name_comm[id] = dpro_kernel_is_comm(dfg_name(g, id)) ? 2 : 1;
    return name_comm[id] == 1;
}

/* Transfer start of group q: grp_arrival, or the latest start of its participants. */
static int64_t
arrival(const dfg *g, const int64_t *start, const int64_t *grp_arrival, int32_t q)
{
    if (grp_arrival && grp_arrival[q] >= 0)
        return grp_arrival[q];
    int64_t arr = INT64_MIN;
    for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
        if (start[p] > arr)
            arr = start[p];
    return arr;
}

int
contention_overlaps(const dfg *g, const int64_t *start, const int64_t *end,
                    const int64_t *grp_arrival, double *f_node, double *f_grp)
{
    int rc = 0;
    int32_t R = g->n_ranks > 0 ? g->n_ranks : 1;
    size_t *ncomm = calloc((size_t)R + 1, sizeof *ncomm),
           *ncomp = calloc((size_t)R + 1, sizeof *ncomp);
    span **comm = calloc((size_t)R, sizeof *comm), **comp = calloc((size_t)R, sizeof *comp);
    int64_t *arr = malloc(sizeof *arr * (size_t)(g->n_groups > 0 ? g->n_groups : 1));
    uint8_t *name_comm = calloc((size_t)g->strings.n + 1, 1);
    if (!ncomm || !ncomp || !comm || !comp || !arr || !name_comm) {
        rc = -1;
        goto out;
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        arr[q] = arrival(g, start, grp_arrival, q);
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if (g->flags[n] & DFG_F_REMOVED)
            continue;
        int32_t r = dfg_rank(g, n);
        if (r < 0 || r >= R)
            continue;
        if (g->kind[n] == DFG_COLL && dfg_group(g, n) >= 0)
            ncomm[r]++;
        else if (is_compute(g, n, name_comm))
            ncomp[r]++;
    }
    for (int32_t r = 0; r < R; r++) {
        comm[r] = malloc(sizeof **comm * (ncomm[r] + 1));
        comp[r] = malloc(sizeof **comp * (ncomp[r] + 1));
        if (!comm[r] || !comp[r]) {
            rc = -1;
            goto out;
        }
        ncomm[r] = ncomp[r] = 0;
    }
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if (g->flags[n] & DFG_F_REMOVED)
            continue;
        int32_t r = dfg_rank(g, n);
        if (r < 0 || r >= R || start[n] < 0 || end[n] < start[n])
            continue;
        if (g->kind[n] == DFG_COLL && dfg_group(g, n) >= 0) {
            int64_t a = arr[dfg_group(g, n)] > start[n] ? arr[dfg_group(g, n)] : start[n];
            comm[r][ncomm[r]++] = (span){a, end[n]};
        } else if (is_compute(g, n, name_comm)) {
            comp[r][ncomp[r]++] = (span){start[n], end[n]};
        }
    }
    for (int32_t r = 0; r < R; r++) {
        ncomm[r] = merge_spans(comm[r], ncomm[r]);
        ncomp[r] = merge_spans(comp[r], ncomp[r]);
    }
    for (int32_t n = 0; n < g->n_nodes; n++) {
        f_node[n] = -1;
        int32_t r = dfg_rank(g, n);
        if (r >= 0 && r < R && is_compute(g, n, name_comm) && start[n] >= 0 && end[n] > start[n])
            f_node[n] = covered(comm[r], ncomm[r], start[n], end[n]);
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        double s = 0;
        int32_t m = 0;
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
            int32_t r = dfg_rank(g, p);
            if (r < 0 || r >= R || end[p] < 0)
                continue;
            s += covered(comp[r], ncomp[r], arr[q] > start[p] ? arr[q] : start[p], end[p]);
            m++;
        }
        f_grp[q] = m > 0 ? s / m : 0;
    }
out:
    for (int32_t r = 0; comm && comp && r < R; r++) {
        free(comm[r]);
        free(comp[r]);
    }
    free(comm);
    free(comp);
    free(ncomm);
    free(ncomp);
    free(arr);
    free(name_comm);
    return rc;
}

/* One operation at its place. */
typedef struct sample {
    int64_t res, pos, name; /* the place */
    double d, f;
} sample;

static int
cmp_sample(const void *pa, const void *pb)
{
    const sample *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    if (a->pos != b->pos)
        return (a->pos > b->pos) - (a->pos < b->pos);
    return (a->name > b->name) - (a->name < b->name);
}

/* Fits one factor from samples s[0..n) (reordered) into *f (see contention.h). */
static int
fit_factor(sample *s, size_t n, contention_fit *f)
{
    memset(f, 0, sizeof *f);
    double *x = malloc(sizeof *x * (n + 1)), *y = malloc(sizeof *y * (n + 1));
    double *tmp = malloc(sizeof *tmp * (n + 1));
    size_t m = 0;
    double sum_f = 0;
    int rc = x && y && tmp ? 0 : -1;
    if (rc == 0)
        qsort(s, n, sizeof *s, cmp_sample);
    for (size_t i = 0; rc == 0 && i < n;) {
        size_t j = i;
        while (j < n && cmp_sample(&s[i], &s[j]) == 0)
            j++;
        if (j - i >= 3) {
            double mf = 0;
            for (size_t k = i; k < j; k++) {
                tmp[k - i] = s[k].d;
                mf += s[k].f;
            }
            mf /= (double)(j - i);
            qsort(tmp, j - i, sizeof *tmp, order_double);
            size_t h = (j - i) / 2;
            double med = (j - i) % 2 ? tmp[h] : (tmp[h - 1] + tmp[h]) / 2;
            if (med > 0)
                for (size_t k = i; k < j; k++) {
                    x[m] = s[k].f - mf;
                    y[m] = s[k].d / med - 1;
                    sum_f += s[k].f;
                    f->informative += fabs(x[m]) >= 0.05;
                    m++;
                }
        }
        i = j;
    }
    f->samples = (int64_t)m;
    f->mean_f = m ? sum_f / (double)m : 0;
    if (rc == 0 && f->informative >= CONTENTION_MIN_SAMPLES) {
        double sxx = 0, sxy = 0;
        for (size_t i = 0; i < m; i++) {
            sxx += x[i] * x[i];
            sxy += x[i] * y[i];
        }
        double slope = sxx > 0 ? sxy / sxx : 0;
        for (size_t i = 0; i < m; i++)
            tmp[i] = fabs(y[i] - slope * x[i]);
        qsort(tmp, m, sizeof *tmp, order_double);
        double lim = 3 * 1.4826 * tmp[m / 2] + 1e-9;
        sxx = sxy = 0;
        for (size_t i = 0; i < m; i++)
            if (fabs(y[i] - slope * x[i]) <= lim) {
                sxx += x[i] * x[i];
                sxy += x[i] * y[i];
            }
        slope = sxx > 0 ? sxy / sxx : 0;
        double den = 1 - slope * f->mean_f;
        f->k = den > 0 && slope > 0 ? slope / den : 0;
        f->fitted = 1;
    }
    free(x);
    free(y);
    free(tmp);
    return rc;
}

int
contention_measure(const dfg *g, contention *c)
{
    memset(c, 0, sizeof *c);
    int rc = 0;
    size_t nn = (size_t)g->n_nodes + 1, ng = (size_t)g->n_groups + 1;
    double *f_node = malloc(sizeof *f_node * nn), *f_grp = malloc(sizeof *f_grp * ng);
    int32_t *pos = malloc(sizeof *pos * nn);
    sample *sc = malloc(sizeof *sc * nn), *sg = malloc(sizeof *sg * ng);
    int64_t *mend = dfg_mend_array(g);
    size_t ncs = 0, ngs = 0;
    if (!f_node || !f_grp || !pos || !sc || !sg || !mend ||
        contention_overlaps(g, g->mstart, mend, NULL, f_node, f_grp) != 0) {
        rc = -1;
        goto out;
    }
    /* position of each device node within its iteration on its resource */
    for (int32_t n = 0; n < g->n_nodes; n++)
        pos[n] = -1;
    for (int32_t res = 0; res < g->n_res; res++) {
        if (g->res_kind[res] != DFG_RES_STREAM)
            continue;
        const int32_t *b;
        int32_t nb = dfg_iterations(g, g->res_rank[res], &b), it = 0, k = 0;
        for (int32_t n = g->res_first[res]; n >= 0; n = g->next_on_res[n]) {
            if (g->flags[n] & DFG_F_REMOVED)
                continue;
            int32_t before = it;
            while (it < nb && dfg_mend(g, b[it]) <= g->mstart[n])
                it++;
            if (it != before)
                k = 0;
            pos[n] = it > 0 && it < nb ? (it << 20 | k) : -1; /* inside an iteration */
            k++;
        }
    }
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if (f_node[n] < 0 || pos[n] < 0)
            continue;
        sc[ncs++] = (sample){g->res[n], pos[n] & 0xfffff, g->name[n],
                             (double)(dfg_mend(g, n) - g->mstart[n]), f_node[n]};
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t p = g->grp_first[q];
        if (p < 0 || pos[p] < 0 || g->grp_mdur[q] <= 0)
            continue;
        sg[ngs++] =
            (sample){g->res[p], pos[p] & 0xfffff, g->name[p], (double)g->grp_mdur[q], f_grp[q]};
    }
    rc = fit_factor(sc, ncs, &c->comp);
    if (rc == 0)
        rc = fit_factor(sg, ngs, &c->comm);
out:
    free(f_node);
    free(f_grp);
    free(pos);
    free(sc);
    free(sg);
    free(mend);
    return rc;
}
