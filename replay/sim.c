/* sim.c: the discrete-event replay of a dataflow graph (see sim.h). */
#include "sim.h"

#include "dprotrace.h"
#include "sim_int.h"

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

/* The loop's functions, inlined into it. */
#define SIM_INLINE static inline __attribute__((always_inline))

/* Whether node n is simulated by this run (a partition's, or the whole graph's). */
SIM_INLINE int
owned(const sim_state *s, int32_t n)
{
    return !s->own || s->own[s->g->res_rank[s->g->res[n]]];
}

/* A dependency of m is met at time t, released by node `from` for reason `why`. */
SIM_INLINE void
satisfy(sim_state *s, int32_t m, int64_t t, int32_t from, uint8_t why)
{
    sim_result *r = s->r;
    /* on a tie the lowest node binds (sim_int.h: any partition gives the same causes) */
    if (t > r->ready[m] ||
        (t == r->ready[m] && (r->crit[m] < 0 || (from >= 0 && from < r->crit[m])))) {
        r->ready[m] = t;
        r->crit[m] = from;
        r->why[m] = why;
    }
    if (--r->cnt[m] == 0)
        s->stack[s->top++] = m;
}

/* Host node h starts at t: its launches are released. */
SIM_INLINE void
host_launch(sim_state *s, int32_t h, int64_t t)
{
    const dfg *g = s->g;
    s->r->start[h] = t;
    for (int32_t i = dfg_launched_first(g, h); i >= 0; i = dfg_launched_next(g, h, i)) {
        int32_t d = g->launched[i];
        satisfy(s, d, t + dfg_lat(g, d), h, SIM_CAUSE_LAUNCH);
    }
}

/* Host node h may start at t as far as its thread goes (the previous call returned at
 * t - gap). A plain or blocking call starts now (its edges delay its end); a WAKEUP
 * call counts this as one more condition of its start. */
SIM_INLINE void
host_start(sim_state *s, int32_t h, int64_t t, int32_t from)
{
    if (!(s->g->flags[h] & DFG_F_WAKEUP))
        host_launch(s, h, t);
    satisfy(s, h, t, from, from >= 0 ? SIM_CAUSE_RESOURCE : SIM_CAUSE_NONE);
}

/* Node n ended at t: release the next node on its resource and its edge successors. */
SIM_INLINE void
finish(sim_state *s, int32_t n, int64_t t)
{
    const dfg *g = s->g;
    sim_result *r = s->r;
    r->end[n] = t; /* makespan and last_node: sim_tally */
    int32_t nx = g->next_on_res[n];
    if (nx >= 0) {
        if (g->kind[nx] == DFG_HOST)
            host_start(s, nx, t + dfg_gap(g, nx), n);
        else
            satisfy(s, nx, t + dfg_gap(g, nx), n, SIM_CAUSE_RESOURCE);
    }
    for (int64_t i = r->succ_at[n]; dfg_succ_more(g, n, i); i++) {
        int32_t m = g->succ[i];
        if (!owned(s, m))
            continue; /* released there (sent) */
        /* a woken call starts its wake-up latency after its waker */
        satisfy(s, m, (g->flags[m] & DFG_F_WAKEUP) ? t + dfg_gap(g, m) : t, n, SIM_CAUSE_EDGE);
    }
    if (s->remote_out && s->remote_out[n])
        s->sent[s->n_sent++] = n;
}

/* Sizes res for g's nodes and groups. Returns 0 or -1. */
static int
result_reserve(sim_result *r, const dfg *g)
{
    int32_t n = g->n_nodes;
    if (n > r->cap_nodes || !r->cnt) { /* !cnt: the scratch was trimmed (sim_result_trim) */
        if (ensure((void **)&r->start, sizeof *r->start, n) ||
            ensure((void **)&r->end, sizeof *r->end, n) ||
            ensure((void **)&r->crit, sizeof *r->crit, n) ||
            ensure((void **)&r->why, sizeof *r->why, n) ||
            ensure((void **)&r->cnt, sizeof *r->cnt, n) ||
            ensure((void **)&r->ready, sizeof *r->ready, n) ||
            ensure((void **)&r->stack, sizeof *r->stack, n) ||
            ensure((void **)&r->succ_at, sizeof *r->succ_at, n))
            return -1;
        if (n > r->cap_nodes)
            r->cap_nodes = n;
    }
    if (g->n_groups > r->cap_groups || !r->arrived) {
        if (ensure((void **)&r->grp_arrival, sizeof *r->grp_arrival, g->n_groups) ||
            ensure((void **)&r->grp_last, sizeof *r->grp_last, g->n_groups) ||
            ensure((void **)&r->arrived, sizeof *r->arrived, g->n_groups))
            return -1;
        if (g->n_groups > r->cap_groups)
            r->cap_groups = g->n_groups;
    }
    r->n_nodes = n;
    r->n_groups = g->n_groups;
    return 0;
}

/* Dependencies node i waits for before sim_run processes it, its edge predecessors
 * aside (-1: removed). */
static inline int32_t
initial_count(const dfg *g, int32_t i)
{
    if (g->flags[i] & DFG_F_REMOVED)
        return -1;
    if (g->kind[i] == DFG_HOST)
        return 1; /* its start */
    return dfg_has_prev(g, i) + (g->launch[i] >= 0);
}

void
sim_begin(sim_state *s)
{
    dfg *g = s->g;
    sim_result *r = s->r;
    int32_t n = g->n_nodes;
    r->makespan = 0;
    r->last_node = -1;
    for (int32_t q = 0; q < g->n_groups; q++) {
        r->grp_arrival[q] = -1;
        r->grp_last[q] = -1;
        r->arrived[q] = 0;
    }
    s->stack = r->stack;
    s->top = 0;
    s->n_grp_ready = 0;
    s->n_sent = 0;
    /* The nodes ready at once have no dependency but their edge predecessors: those are
     * put on the stack here, in node order, and the ones an edge holds back taken off it
     * after the edges are counted (a pass over the few, not over every node). */
    int32_t no_succ = (int32_t)g->n_edges; /* finalize: the edges fit in int32 */
    /* the arrays in locals: a store through one may not be read as changing another */
    int64_t *start = r->start, *end = r->end, *ready = r->ready;
    int32_t *crit = r->crit, *cnt = r->cnt, *succ_at = r->succ_at, *stack = s->stack;
    uint8_t *why = r->why;
    const uint8_t *kind = g->kind;
    int32_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t c = initial_count(g, i);
        start[i] = -1;
        end[i] = -1;
        crit[i] = -1;
        why[i] = SIM_CAUSE_NONE;
        cnt[i] = c;
        succ_at[i] = no_succ;
        if (kind[i] == DFG_HOST)
            ready[i] = 0;
        else
            ready[i] = dfg_has_prev(g, i) ? 0 : dfg_gap(g, i);
        if (c == 0 && owned(s, i))
            stack[top++] = i;
    }
    s->top = top;
    /* edge predecessors (finalize kept only edges between live nodes), and where each
     * node's successors begin in the edges sorted by source */
    for (int64_t k = 0, src = -1; k < g->n_edges; k++) {
        r->cnt[g->succ[k]]++;
        if (g->esrc[k] != src) {
            src = g->esrc[k];
            r->succ_at[src] = (int32_t)k;
        }
    }
    int32_t kept = 0;
    for (int32_t j = 0; j < s->top; j++)
        if (r->cnt[s->stack[j]] == 0)
            s->stack[kept++] = s->stack[j];
    s->top = kept;
    /* first calls of every host thread start at their gap from time 0 */
    for (int32_t q = 0; q < g->n_res; q++) {
        int32_t f = g->res_first[q];
        if (f >= 0 && g->kind[f] == DFG_HOST && owned(s, f))
            host_start(s, f, dfg_gap(g, f), -1);
    }
}

/* Whether group q's participants leave it at their measured shares: the measured end of
 * its last participant (dfg_group_last_mend), or in a graph of rank classes 0 when its
 * classes keep the leavings dfg_fold gave them (dfg_group_leave_classes); -1: they all
 * leave at its end. */
SIM_INLINE int64_t
group_last_mend(const dfg *g, int32_t q)
{
    if (g->leave_classes)
        return dfg_group_leave_classes(g, q) ? 0 : -1;
    return dfg_group_last_mend(g, q);
}

/* How much sooner than the group's end participant p leaves: ranks leave a collective at
 * different times (a ring's last step reaches them one after the other), so p leaves the
 * share of the transfer it left before the last one in the measurement (last_mend - its
 * measured end, or its class's last member's in a graph of rank classes, over the measured
 * transfer) of the simulated transfer, which a cost model or a what-if may have
 * repriced. 0 when last_mend < 0 (group_last_mend). */
SIM_INLINE int64_t
leave_early(const dfg *g, int32_t q, int32_t p, int64_t last_mend)
{
    int64_t e = last_mend < 0 ? 0 : g->leave_classes ? dfg_leave(g, p) : last_mend - dfg_mend(g, p);
    if (e <= 0)
        return 0;
    if (e > g->grp_mdur[q])
        e = g->grp_mdur[q];
    return (int64_t)((double)e * (double)g->grp_dur[q] / (double)g->grp_mdur[q]);
}

/* The group's transfer starts at its last arrival (later by the wait of a what-if's
 * ranks not in the graph, grp_wait_ns): its participants here end, each as early as it
 * left in the measurement (leave_early). */
SIM_INLINE void
group_transfer(sim_state *s, int32_t q)
{
    const dfg *g = s->g;
    sim_result *r = s->r;
    if (g->grp_wait_ns > 0 && g->grp_nranks[q] == g->grp_wait_nranks)
        r->grp_arrival[q] += g->grp_wait_ns;
    int64_t tend = r->grp_arrival[q] + g->grp_dur[q];
    int64_t last_mend = group_last_mend(g, q);
    int32_t last = r->grp_last[q];
    for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p)) {
        if (!owned(s, p))
            continue;
        if (p != last) {
            r->crit[p] = last;
            r->why[p] = SIM_CAUSE_GROUP;
        }
        finish(s, p, tend - leave_early(g, q, p, last_mend));
    }
}

void
sim_drain(sim_state *state)
{
    /* The loop runs on local copies of the state and of the result's array pointers: a
     * store into r->why (bytes) could otherwise change any field as far as the compiler
     * knows, and every pointer and counter would be read again after it. The loop
     * changes none of the result's own fields, only its arrays, and of the state the
     * counters copied back below. */
    sim_result res = *state->r;
    sim_state st = *state;
    st.r = &res;
    sim_state *s = &st;
    dfg *g = s->g;
    sim_result *r = s->r;
    while (s->top > 0) {
        int32_t m = s->stack[--s->top];
        if (g->kind[m] == DFG_HOST) {
            if (g->flags[m] & DFG_F_WAKEUP)
                host_launch(s, m, r->ready[m]); /* all conditions of its start are met */
            finish(s, m, r->ready[m] + dfg_dur(g, m));
            continue;
        }
        int64_t t = r->ready[m];
        r->start[m] = t;
        int32_t q = dfg_group(g, m);
        if (q < 0) {
            finish(s, m, t + dfg_dur(g, m));
            continue;
        }
        if (t > r->grp_arrival[q] || r->grp_last[q] < 0 ||
            (t == r->grp_arrival[q] && m < r->grp_last[q])) {
            r->grp_arrival[q] = t;
            r->grp_last[q] = m;
        }
        ++r->arrived[q];
        if (s->grp_local) {
            if (r->arrived[q] == s->grp_local[q])
                s->grp_ready[s->n_grp_ready++] = q; /* the other partitions decide */
            continue;
        }
        if (r->arrived[q] == g->grp_members[q])
            group_transfer(s, q);
    }
    state->top = st.top;
    state->n_grp_ready = st.n_grp_ready;
    state->n_sent = st.n_sent;
}

void
sim_release_group(sim_state *s, int32_t q, int64_t arrival, int32_t last)
{
    s->r->grp_arrival[q] = arrival;
    s->r->grp_last[q] = last;
    group_transfer(s, q);
}

void
sim_release_edge(sim_state *s, int32_t n, int64_t t)
{
    const dfg *g = s->g;
    for (int64_t i = s->r->succ_at[n]; dfg_succ_more(g, n, i); i++) {
        int32_t m = g->succ[i];
        if (owned(s, m))
            satisfy(s, m, (g->flags[m] & DFG_F_WAKEUP) ? t + dfg_gap(g, m) : t, n, SIM_CAUSE_EDGE);
    }
}

void
sim_tally(const dfg *g, sim_result *r)
{
    /* in locals: r's fields would be read again after each store otherwise */
    const int64_t *end = r->end;
    const uint8_t *flags = g->flags;
    int64_t makespan = 0;
    int32_t last = -1, first_unfinished = -1, n_unfinished = 0, n = g->n_nodes;
    for (int32_t i = 0; i < n; i++) {
        if (flags[i] & DFG_F_REMOVED)
            continue;
        if (end[i] < 0) {
            if (first_unfinished < 0)
                first_unfinished = i;
            n_unfinished++;
        } else if (end[i] > makespan || last < 0) {
            makespan = end[i];
            last = i;
        }
    }
    r->makespan = makespan;
    r->last_node = last;
    r->first_unfinished = first_unfinished;
    r->n_unfinished = n_unfinished;
}

int
sim_prepare(dfg *g, sim_result *r)
{
    if (dfg_finalize(g) != 0 || result_reserve(r, g) != 0)
        return -1;
    return 0;
}

int
sim_run(dfg *g, sim_result *r)
{
    if (sim_prepare(g, r) != 0)
        return -1;
    sim_state s = {.g = g, .r = r};
    sim_begin(&s);
    sim_drain(&s);
    sim_tally(g, r);
    return 0;
}

void
sim_result_trim(sim_result *r)
{
    free(r->cnt);
    free(r->ready);
    free(r->stack);
    free(r->succ_at);
    free(r->arrived);
    r->cnt = r->stack = r->succ_at = r->arrived = NULL;
    r->ready = NULL;
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
    free(r->succ_at);
    free(r->arrived);
    memset(r, 0, sizeof *r);
}
