/* sim.c: replay of a dataflow graph and analysis of timelines (see sim.h). */
#include "sim.h"

#include "dprotrace.h"

#include <stdlib.h>
#include <string.h>

/* ---- the simulation loop --------------------------------------------------------------- */

static int
ensure(void **p, size_t elem, int64_t n)
{
    void *q = realloc(*p, (size_t)(n > 0 ? n : 1) * elem);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

typedef struct sim_state {
    dfg *g;
    sim_result *r;
    int32_t *stack;
    int32_t top;
} sim_state;

/* A dependency of m is met at time t, released by node `from` for reason `why`. */
static inline void
satisfy(sim_state *s, int32_t m, int64_t t, int32_t from, uint8_t why)
{
    sim_result *r = s->r;
    if (t > r->ready[m] || (t == r->ready[m] && r->crit[m] < 0)) {
        r->ready[m] = t;
        r->crit[m] = from;
        r->why[m] = why;
    }
    if (--r->cnt[m] == 0)
        s->stack[s->top++] = m;
}

/* Host node h starts at t: its launches are released. */
static inline void
host_launch(sim_state *s, int32_t h, int64_t t)
{
    const dfg *g = s->g;
    s->r->start[h] = t;
    for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
        int32_t d = g->launched[i];
        satisfy(s, d, t + g->lat[d], h, SIM_CAUSE_LAUNCH);
    }
}

/* Host node h may start at t as far as its thread goes (the previous call returned at
 * t - gap). A plain or blocking call starts now (its edges delay its end); a WAKEUP
 * call counts this as one more condition of its start. */
static inline void
host_start(sim_state *s, int32_t h, int64_t t, int32_t from)
{
    if (!(s->g->flags[h] & DFG_F_WAKEUP))
        host_launch(s, h, t);
    satisfy(s, h, t, from, from >= 0 ? SIM_CAUSE_RESOURCE : SIM_CAUSE_NONE);
}

/* Node n ended at t: release the next node on its resource and its edge successors. */
static inline void
finish(sim_state *s, int32_t n, int64_t t)
{
    const dfg *g = s->g;
    sim_result *r = s->r;
    r->end[n] = t;
    if (t > r->makespan || r->last_node < 0) {
        r->makespan = t;
        r->last_node = n;
    }
    int32_t nx = g->next_on_res[n];
    if (nx >= 0) {
        if (g->kind[nx] == DFG_HOST)
            host_start(s, nx, t + g->gap[nx], n);
        else
            satisfy(s, nx, t + g->gap[nx], n, SIM_CAUSE_RESOURCE);
    }
    for (int64_t i = g->succ_off[n]; i < g->succ_off[n + 1]; i++) {
        int32_t m = g->succ[i];
        /* a woken call starts its wake-up latency after its waker */
        satisfy(s, m, (g->flags[m] & DFG_F_WAKEUP) ? t + g->gap[m] : t, n, SIM_CAUSE_EDGE);
    }
}

int
sim_run(dfg *g, sim_result *r)
{
    if (dfg_finalize(g) != 0)
        return -1;
    int32_t n = g->n_nodes;
    if (n > r->cap_nodes) {
        if (ensure((void **)&r->start, sizeof *r->start, n) ||
            ensure((void **)&r->end, sizeof *r->end, n) ||
            ensure((void **)&r->crit, sizeof *r->crit, n) ||
            ensure((void **)&r->why, sizeof *r->why, n) ||
            ensure((void **)&r->cnt, sizeof *r->cnt, n) ||
            ensure((void **)&r->ready, sizeof *r->ready, n) ||
            ensure((void **)&r->stack, sizeof *r->stack, n))
            return -1;
        r->cap_nodes = n;
    }
    if (g->n_groups > r->cap_groups) {
        if (ensure((void **)&r->grp_arrival, sizeof *r->grp_arrival, g->n_groups) ||
            ensure((void **)&r->grp_last, sizeof *r->grp_last, g->n_groups) ||
            ensure((void **)&r->arrived, sizeof *r->arrived, g->n_groups))
            return -1;
        r->cap_groups = g->n_groups;
    }
    r->n_nodes = n;
    r->n_groups = g->n_groups;
    r->makespan = 0;
    r->last_node = -1;
    for (int32_t q = 0; q < g->n_groups; q++) {
        r->grp_arrival[q] = -1;
        r->grp_last[q] = -1;
        r->arrived[q] = 0;
    }

    sim_state s = {.g = g, .r = r, .stack = r->stack, .top = 0};
    for (int32_t i = 0; i < n; i++) {
        r->start[i] = -1;
        r->end[i] = -1;
        r->crit[i] = -1;
        r->why[i] = SIM_CAUSE_NONE;
        if (g->flags[i] & DFG_F_REMOVED) {
            r->cnt[i] = -1;
            continue;
        }
        int32_t c = g->n_preds[i];
        if (g->kind[i] == DFG_HOST) {
            c += 1; /* its start */
            r->ready[i] = 0;
        } else {
            c += g->prev_on_res[i] >= 0;
            c += g->launch[i] >= 0;
            r->ready[i] = g->prev_on_res[i] >= 0 ? 0 : g->gap[i];
        }
        r->cnt[i] = c;
        if (c == 0)
            s.stack[s.top++] = i;
    }
    /* first calls of every host thread start at their gap from time 0 */
    for (int32_t q = 0; q < g->n_res; q++) {
        int32_t f = g->res_first[q];
        if (f >= 0 && g->kind[f] == DFG_HOST)
            host_start(&s, f, g->gap[f], -1);
    }

    while (s.top > 0) {
        int32_t m = s.stack[--s.top];
        if (g->kind[m] == DFG_HOST) {
            if (g->flags[m] & DFG_F_WAKEUP)
                host_launch(&s, m, r->ready[m]); /* all conditions of its start are met */
            finish(&s, m, r->ready[m] + g->dur[m]);
            continue;
        }
        int64_t t = r->ready[m];
        r->start[m] = t;
        int32_t q = g->group[m];
        if (q < 0) {
            finish(&s, m, t + g->dur[m]);
            continue;
        }
        if (t > r->grp_arrival[q] || r->grp_last[q] < 0) {
            r->grp_arrival[q] = t;
            r->grp_last[q] = m;
        }
        if (++r->arrived[q] < g->grp_members[q])
            continue;
        int64_t tend = r->grp_arrival[q] + g->grp_dur[q];
        int32_t last = r->grp_last[q];
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
            if (p != last) {
                r->crit[p] = last;
                r->why[p] = SIM_CAUSE_GROUP;
            }
            finish(&s, p, tend);
        }
    }
    r->first_unfinished = -1;
    r->n_unfinished = 0;
    for (int32_t i = 0; i < n; i++) {
        if ((g->flags[i] & DFG_F_REMOVED) || r->end[i] >= 0)
            continue;
        if (r->first_unfinished < 0)
            r->first_unfinished = i;
        r->n_unfinished++;
    }
    return 0;
}

void
sim_result_free(sim_result *r)
{
    free(r->start);
    free(r->end);
    free(r->crit);
    free(r->why);
    free(r->grp_arrival);
    free(r->grp_last);
    free(r->cnt);
    free(r->ready);
    free(r->stack);
    free(r->arrived);
    memset(r, 0, sizeof *r);
}

/* ---- timelines and iterations --------------------------------------------------------- */

sim_timeline
sim_timeline_of(const sim_result *res)
{
    sim_timeline tl = {res->start, res->end, res->grp_arrival};
    return tl;
}

sim_timeline
sim_timeline_measured(const dfg *g, int64_t *grp_arrival_buf)
{
    for (int32_t q = 0; q < g->n_groups; q++) {
        int64_t a = -1;
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p])
            if (g->mstart[p] > a)
                a = g->mstart[p];
        grp_arrival_buf[q] = a;
    }
    sim_timeline tl = {g->mstart, g->mend, grp_arrival_buf};
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
                int64_t a = tl.grp_arrival ? tl.grp_arrival[g->group[m]] : s;
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
                sp[n++] = (span){s, 1, 0};
                sp[n++] = (span){e, -1, 0};
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
        int32_t last = -1, members = 0;
        int64_t arr = -1;
        if (g->grp_op[q] == DPRO_COLL_SEND || g->grp_op[q] == DPRO_COLL_RECV)
            continue; /* send/recv: a pipeline's structural waits, not a straggler */
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
            if (tl.start[p] < 0)
                continue;
            members++;
            if (tl.start[p] > arr) {
                arr = tl.start[p];
                last = p;
            }
        }
        if (last < 0 || members < 2 || arr < t0 || arr >= t1)
            continue;
        double wait = 0;
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p])
            if (p != last && tl.start[p] >= 0)
                wait += (double)(arr - tl.start[p]);
        int32_t rk = dfg_rank(g, last);
        blame_ns[rk] += wait / (members - 1);
        if (last_count)
            last_count[rk]++;
    }
}
