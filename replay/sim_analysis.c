/* sim_analysis.c: what is derived from a timeline: iteration times, critical path,
 * breakdown, stragglers (see sim.h). */
#include "sim.h"

#include "dprotrace.h"
#include "order.h"

#include <stdlib.h>
#include <string.h>

/* ---- timelines and iterations --------------------------------------------------------- */

sim_timeline
sim_timeline_of(const sim_result *res)
{
    sim_timeline tl = {res->start, res->end, res->grp_arrival};
    return tl;
}

sim_timeline
sim_timeline_measured(const dfg *g, int64_t *grp_arrival_buf, int64_t *end_buf)
{
    for (int32_t n = 0; n < g->n_nodes; n++)
        end_buf[n] = dfg_mend(g, n);
    for (int32_t q = 0; q < g->n_groups; q++) {
        int64_t a = -1;
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
            if (g->mstart[p] > a)
                a = g->mstart[p];
        grp_arrival_buf[q] = a;
    }
    sim_timeline tl = {g->mstart, end_buf, grp_arrival_buf};
    return tl;
}

int
sim_iteration_window(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last,
                     int64_t *t0, int64_t *t1)
{
    const int32_t *b;
    int32_t nb = dfg_iterations(g, r, &b);
    if (first < 0 || last < first || last + 1 >= nb)
        return -1;
    int32_t a = b[first], z = b[last + 1];
    if (a < 0 || z < 0 || tl.end[a] < 0 || tl.end[z] < 0)
        return -1;
    *t0 = tl.end[a];
    *t1 = tl.end[z];
    return 0;
}

double
sim_iteration_time(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last)
{
    int64_t t0, t1;
    if (sim_iteration_window(g, tl, r, first, last, &t0, &t1) != 0)
        return -1;
    return (double)(t1 - t0) / (double)(last - first + 1);
}

double
sim_median_i64(int64_t *v, int32_t n)
{
    if (n < 1)
        return -1;
    qsort(v, (size_t)n, sizeof *v, order_i64);
    return n % 2 ? (double)v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + (double)v[n / 2]);
}

double
sim_iteration_median(const dfg *g, sim_timeline tl, int32_t r, int32_t first, int32_t last)
{
    const int32_t *b;
    int32_t nb = dfg_iterations(g, r, &b), n = last - first + 1;
    double med = -1;
    int64_t *d = NULL;
    if (first >= 0 && n > 0 && last + 1 < nb)
        d = malloc(sizeof *d * (size_t)n);
    for (int32_t i = 0; d && i < n; i++) {
        int32_t a = b[first + i], z = b[first + i + 1];
        if (a < 0 || z < 0 || tl.end[a] < 0 || tl.end[z] < 0) {
            free(d);
            d = NULL;
            break;
        }
        d[i] = tl.end[z] - tl.end[a];
    }
    if (d)
        med = sim_median_i64(d, n);
    free(d);
    return med;
}

/* ---- critical path -------------------------------------------------------------------- */

/* Time at which node n's binding dependency released it. */
static int64_t
release_time(const dfg *g, const sim_result *res, int32_t n)
{
    int32_t c = res->crit[n];
    switch (res->why[n]) {
    case SIM_CAUSE_RESOURCE:
        return res->end[c];
    case SIM_CAUSE_LAUNCH:
        return res->start[c];
    case SIM_CAUSE_EDGE:
        return res->end[c];
    case SIM_CAUSE_GROUP:
        return res->end[n]; /* the wait and transfer are the last arriver's */
    default:
        return 0;
    }
}

int64_t
sim_release_time(const dfg *g, const sim_result *res, int32_t n)
{
    return n >= 0 && res->end[n] >= 0 ? release_time(g, res, n) : -1;
}

int64_t
sim_path_contribution(const dfg *g, const sim_result *res, const int32_t *path, int32_t n,
                      int32_t i)
{
    int32_t m = path[i];
    if (m < 0 || res->end[m] < 0)
        return 0;
    int64_t until = i + 1 < n ? release_time(g, res, path[i + 1]) : res->end[m];
    int64_t c = until - release_time(g, res, m);
    return c > 0 ? c : 0;
}

int
sim_critical_path(const dfg *g, const sim_result *res, int32_t to, int64_t from_ns, int32_t **path,
                  int32_t *n)
{
    int32_t cap = 1024, len = 0;
    int32_t *p = malloc((size_t)cap * sizeof *p);
    if (!p)
        return -1;
    int32_t cur = to >= 0 ? to : res->last_node;
    while (cur >= 0 && res->end[cur] >= 0 && len < res->n_nodes) {
        if (len == cap) {
            int32_t *q = realloc(p, (size_t)cap * 2 * sizeof *q);
            if (!q) {
                free(p);
                return -1;
            }
            p = q;
            cap *= 2;
        }
        p[len++] = cur;
        if (res->end[cur] <= from_ns || release_time(g, res, cur) < from_ns)
            break;
        cur = res->crit[cur];
    }
    for (int32_t i = 0; i < len / 2; i++) {
        int32_t t = p[i];
        p[i] = p[len - 1 - i];
        p[len - 1 - i] = t;
    }
    *path = p;
    *n = len;
    return 0;
}

/* ---- breakdown ------------------------------------------------------------------------- */

typedef struct span {
    int64_t t;
    int8_t delta;
    uint8_t cls; /* 0 compute, 1 transfer, 2 wait */
} span;

static int
cmp_span(const void *pa, const void *pb)
{
    const span *a = pa, *b = pb;
    if (a->t != b->t)
        return (a->t > b->t) - (a->t < b->t);
    return a->delta - b->delta; /* ends before starts at equal times */
}

int
sim_breakdown_rank(const dfg *g, sim_timeline tl, int32_t r, int64_t t0, int64_t t1,
                   sim_breakdown *out)
{
    memset(out, 0, sizeof *out);
    out->window = t1 > t0 ? t1 - t0 : 0;
    r = dfg_rank_rep(g, r); /* a folded rank is its representative's copy */
    size_t cap = 1024, n = 0;
    span *sp = malloc(cap * sizeof *sp);
    if (!sp)
        return -1;
    for (int32_t q = 0; q < g->n_res; q++) {
        if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_STREAM)
            continue;
        for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m]) {
            int64_t s = tl.start[m], e = tl.end[m];
            if (s < 0 || e <= t0 || s >= t1)
                continue;
            if (n + 4 > cap) {
                span *x = realloc(sp, cap * 2 * sizeof *sp);
                if (!x) {
                    free(sp);
                    return -1;
                }
                sp = x;
                cap *= 2;
            }
            if (g->kind[m] == DFG_COLL) {
                int64_t a = tl.grp_arrival ? tl.grp_arrival[dfg_group(g, m)] : s;
                if (a < s)
                    a = s;
                if (a > e)
                    a = e;
                if (a > s) {
                    sp[n++] = (span){s, 1, 2};
                    sp[n++] = (span){a, -1, 2};
                }
                if (e > a) {
                    sp[n++] = (span){a, 1, 1};
                    sp[n++] = (span){e, -1, 1};
                }
            } else if (e > s) {
                /* an NCCL kernel outside a collective (an imported SendRecv) communicates */
                int what = g->kind[m] == DFG_KERNEL && dpro_kernel_is_comm(dfg_name(g, g->name[m]));
                sp[n++] = (span){s, 1, what};
                sp[n++] = (span){e, -1, what};
            }
        }
    }
    qsort(sp, n, sizeof *sp, cmp_span);
    int32_t active[3] = {0, 0, 0};
    int64_t prev = t0;
    for (size_t i = 0; i <= n; i++) {
        int64_t t = i < n ? sp[i].t : t1;
        if (t > t1)
            t = t1;
        if (t > prev) {
            int64_t d = t - prev;
            int c = active[0] > 0, x = active[1] > 0, w = active[2] > 0;
            if (c)
                out->compute += d;
            if (x)
                out->communication += d;
            if (c && x)
                out->overlap += d;
            if (!c && !x && w)
                out->wait_ranks += d;
            if (!c && !x && !w)
                out->host_idle += d;
            prev = t;
        }
        if (i < n)
            active[sp[i].cls] += sp[i].delta;
    }
    free(sp);
    return 0;
}

/* Spreads the charges of each class's representative (the lowest rank of the class)
 * evenly over the ranks it stands for: in the explicit job whichever of them arrives
 * last is charged, here the class is. */
static void
spread_over_classes(const dfg *g, double *blame_ns, int32_t *last_count)
{
    /* members (above their representative) first, so that its totals are still whole */
    for (int32_t r = g->n_ranks - 1; r >= 0; r--) {
        int32_t p = g->rank_rep[r], w = g->rank_weight[p];
        if (w <= 1)
            continue;
        if (r != p) {
            blame_ns[r] = blame_ns[p] / w;
            if (last_count)
                last_count[r] = last_count[p] / w;
        } else {
            blame_ns[p] /= w;
            if (last_count)
                last_count[p] -= (w - 1) * (last_count[p] / w);
        }
    }
}

void
sim_stragglers(const dfg *g, sim_timeline tl, int64_t t0, int64_t t1, double *blame_ns,
               int32_t *last_count)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        blame_ns[r] = 0;
        if (last_count)
            last_count[r] = 0;
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t last = -1;
        int64_t arr = -1, members = 0;
        if (g->grp_op[q] == DPRO_COLL_SEND || g->grp_op[q] == DPRO_COLL_RECV)
            continue; /* send/recv: a pipeline's structural waits, not a straggler */
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
            if (tl.start[p] < 0)
                continue;
            members += dfg_rank_weight(g, dfg_rank(g, p)); /* a class arrives as one */
            if (tl.start[p] > arr) {
                arr = tl.start[p];
                last = p;
            }
        }
        if (last < 0 || members < 2 || arr < t0 || arr >= t1)
            continue;
        /* the last one's own class (weight w) waits (w - 1) x 0 */
        double wait = 0;
        for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
            if (p != last && tl.start[p] >= 0)
                wait += (double)dfg_rank_weight(g, dfg_rank(g, p)) * (double)(arr - tl.start[p]);
        int32_t rk = dfg_rank(g, last);
        blame_ns[rk] += wait / (double)(members - 1);
        if (last_count)
            last_count[rk]++;
    }
    if (g->rank_rep)
        spread_over_classes(g, blame_ns, last_count);
}
