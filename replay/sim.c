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

/* What sim_ref_build records of a run (see sim_ref in sim.h); NULL in sim_run. */
typedef struct sim_rec {
    int64_t *pred_off; /* offers node m receives go to pred[pred_off[m] ..] in order */
    int32_t *pred;
    uint8_t *pred_why;
    int32_t *order, *pos, *fin_seq, *grp_close;
    int32_t n_order, n_fin;
} sim_rec;

typedef struct sim_state {
    dfg *g;
    sim_result *r;
    int32_t *stack;
    int32_t top;
} sim_state;

/* The loop's functions take the recorder as a constant: sim_run's copies (rec NULL)
 * carry no recording code. */
#define SIM_INLINE static inline __attribute__((always_inline))

/* A dependency of m is met at time t, released by node `from` for reason `why`. */
SIM_INLINE void
satisfy(sim_state *s, sim_rec *rec, int32_t m, int64_t t, int32_t from, uint8_t why)
{
    sim_result *r = s->r;
    if (rec && r->cnt[m] > 0) {
        int64_t k = rec->pred_off[m + 1] - r->cnt[m];
        rec->pred[k] = from;
        rec->pred_why[k] = why;
    }
    if (t > r->ready[m] || (t == r->ready[m] && r->crit[m] < 0)) {
        r->ready[m] = t;
        r->crit[m] = from;
        r->why[m] = why;
    }
    if (--r->cnt[m] == 0)
        s->stack[s->top++] = m;
}

/* Host node h starts at t: its launches are released. */
SIM_INLINE void
host_launch(sim_state *s, sim_rec *rec, int32_t h, int64_t t)
{
    const dfg *g = s->g;
    s->r->start[h] = t;
    for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
        int32_t d = g->launched[i];
        satisfy(s, rec, d, t + g->lat[d], h, SIM_CAUSE_LAUNCH);
    }
}

/* Host node h may start at t as far as its thread goes (the previous call returned at
 * t - gap). A plain or blocking call starts now (its edges delay its end); a WAKEUP
 * call counts this as one more condition of its start. */
SIM_INLINE void
host_start(sim_state *s, sim_rec *rec, int32_t h, int64_t t, int32_t from)
{
    if (!(s->g->flags[h] & DFG_F_WAKEUP))
        host_launch(s, rec, h, t);
    satisfy(s, rec, h, t, from, from >= 0 ? SIM_CAUSE_RESOURCE : SIM_CAUSE_NONE);
}

/* Node n ended at t: release the next node on its resource and its edge successors. */
SIM_INLINE void
finish(sim_state *s, sim_rec *rec, int32_t n, int64_t t)
{
    const dfg *g = s->g;
    sim_result *r = s->r;
    r->end[n] = t;
    if (rec)
        rec->fin_seq[n] = rec->n_fin++;
    if (t > r->makespan || r->last_node < 0) {
        r->makespan = t;
        r->last_node = n;
    }
    int32_t nx = g->next_on_res[n];
    if (nx >= 0) {
        if (g->kind[nx] == DFG_HOST)
            host_start(s, rec, nx, t + g->gap[nx], n);
        else
            satisfy(s, rec, nx, t + g->gap[nx], n, SIM_CAUSE_RESOURCE);
    }
    for (int64_t i = g->succ_off[n]; i < g->succ_off[n + 1]; i++) {
        int32_t m = g->succ[i];
        /* a woken call starts its wake-up latency after its waker */
        satisfy(s, rec, m, (g->flags[m] & DFG_F_WAKEUP) ? t + g->gap[m] : t, n, SIM_CAUSE_EDGE);
    }
}

/* Sizes res for g's nodes and groups. Returns 0 or -1. */
static int
result_reserve(sim_result *r, const dfg *g)
{
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
    return 0;
}

/* Dependencies node i waits for before sim_run processes it (-1: removed). */
static inline int32_t
initial_count(const dfg *g, int32_t i)
{
    if (g->flags[i] & DFG_F_REMOVED)
        return -1;
    if (g->kind[i] == DFG_HOST)
        return g->n_preds[i] + 1; /* its start */
    return g->n_preds[i] + (g->prev_on_res[i] >= 0) + (g->launch[i] >= 0);
}

/* The simulation proper, on a finalized g and a sized r (rec: see sim_rec). */
SIM_INLINE void
run(dfg *g, sim_result *r, sim_rec *rec)
{
    int32_t n = g->n_nodes;
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
        int32_t c = initial_count(g, i);
        r->cnt[i] = c;
        if (c < 0)
            continue;
        if (g->kind[i] == DFG_HOST)
            r->ready[i] = 0;
        else
            r->ready[i] = g->prev_on_res[i] >= 0 ? 0 : g->gap[i];
        if (c == 0)
            s.stack[s.top++] = i;
    }
    /* first calls of every host thread start at their gap from time 0 */
    for (int32_t q = 0; q < g->n_res; q++) {
        int32_t f = g->res_first[q];
        if (f >= 0 && g->kind[f] == DFG_HOST)
            host_start(&s, rec, f, g->gap[f], -1);
    }

    while (s.top > 0) {
        int32_t m = s.stack[--s.top];
        if (rec) {
            rec->pos[m] = rec->n_order;
            rec->order[rec->n_order++] = m;
        }
        if (g->kind[m] == DFG_HOST) {
            if (g->flags[m] & DFG_F_WAKEUP)
                host_launch(&s, rec, m, r->ready[m]); /* all conditions of its start are met */
            finish(&s, rec, m, r->ready[m] + g->dur[m]);
            continue;
        }
        int64_t t = r->ready[m];
        r->start[m] = t;
        int32_t q = g->group[m];
        if (q < 0) {
            finish(&s, rec, m, t + g->dur[m]);
            continue;
        }
        if (t > r->grp_arrival[q] || r->grp_last[q] < 0) {
            r->grp_arrival[q] = t;
            r->grp_last[q] = m;
        }
        if (++r->arrived[q] < g->grp_members[q])
            continue;
        if (rec)
            rec->grp_close[q] = m;
        int64_t tend = r->grp_arrival[q] + g->grp_dur[q];
        int32_t last = r->grp_last[q];
        for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
            if (p != last) {
                r->crit[p] = last;
                r->why[p] = SIM_CAUSE_GROUP;
            }
            finish(&s, rec, p, tend);
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
}

int
sim_run(dfg *g, sim_result *r)
{
    if (dfg_finalize(g) != 0 || result_reserve(r, g) != 0)
        return -1;
    run(g, r, NULL);
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

/* ---- incremental re-simulation --------------------------------------------------------- */

void
sim_ref_free(sim_ref *ref)
{
    sim_result_free(&ref->res);
    free(ref->dur);
    free(ref->gap);
    free(ref->grp_dur);
    free(ref->lat);
    free(ref->flags);
    free(ref->pred_off);
    free(ref->pred);
    free(ref->pred_why);
    free(ref->order);
    free(ref->pos);
    free(ref->fin_seq);
    free(ref->grp_close);
    free(ref->dirty);
    free(ref->seen);
    free(ref->changed);
    free(ref->changed_groups);
    memset(ref, 0, sizeof *ref);
}

/* malloc of n elements (at least one). */
static void *
alloc_n(size_t elem, int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * elem);
}

int
sim_ref_build(sim_ref *ref, dfg *g)
{
    double share = ref->max_share, whole = ref->whole_share;
    sim_ref_free(ref);
    ref->max_share = share;
    ref->whole_share = whole;
    if (dfg_finalize(g) != 0)
        return -1;
    int32_t n = g->n_nodes, ng = g->n_groups;
    int64_t n_offers = 0;
    ref->pred_off = alloc_n(sizeof *ref->pred_off, (int64_t)n + 1);
    if (!ref->pred_off)
        goto fail;
    ref->pred_off[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t c = initial_count(g, i);
        n_offers += c > 0 ? c : 0;
        ref->pred_off[i + 1] = n_offers;
    }
    ref->pred = alloc_n(sizeof *ref->pred, n_offers);
    ref->pred_why = alloc_n(sizeof *ref->pred_why, n_offers);
    ref->order = alloc_n(sizeof *ref->order, n);
    ref->pos = alloc_n(sizeof *ref->pos, n);
    ref->fin_seq = alloc_n(sizeof *ref->fin_seq, n);
    ref->grp_close = alloc_n(sizeof *ref->grp_close, ng);
    ref->dirty = calloc((size_t)n / 64 + 1, sizeof *ref->dirty);
    ref->seen = calloc((size_t)(n > 0 ? n : 1), sizeof *ref->seen);
    ref->changed = alloc_n(sizeof *ref->changed, n);
    ref->changed_groups = alloc_n(sizeof *ref->changed_groups, ng);
    ref->dur = alloc_n(sizeof *ref->dur, n);
    ref->gap = alloc_n(sizeof *ref->gap, n);
    ref->lat = alloc_n(sizeof *ref->lat, n);
    ref->flags = alloc_n(sizeof *ref->flags, n);
    ref->grp_dur = alloc_n(sizeof *ref->grp_dur, ng);
    if (!ref->pred || !ref->pred_why || !ref->order || !ref->pos || !ref->fin_seq ||
        !ref->grp_close || !ref->dirty || !ref->seen || !ref->changed || !ref->changed_groups ||
        !ref->dur || !ref->gap || !ref->lat || !ref->flags || !ref->grp_dur ||
        result_reserve(&ref->res, g) != 0)
        goto fail;
    for (int32_t i = 0; i < n; i++) {
        ref->pos[i] = -1;
        ref->fin_seq[i] = -1;
    }
    for (int32_t q = 0; q < ng; q++)
        ref->grp_close[q] = -1;
    sim_rec rec = {.pred_off = ref->pred_off,
                   .pred = ref->pred,
                   .pred_why = ref->pred_why,
                   .order = ref->order,
                   .pos = ref->pos,
                   .fin_seq = ref->fin_seq,
                   .grp_close = ref->grp_close};
    run(g, &ref->res, &rec);
    ref->n_order = rec.n_order;
    ref->incremental = ref->res.n_unfinished == 0;
    memcpy(ref->dur, g->dur, (size_t)n * sizeof *g->dur);
    memcpy(ref->gap, g->gap, (size_t)n * sizeof *g->gap);
    memcpy(ref->lat, g->lat, (size_t)n * sizeof *g->lat);
    memcpy(ref->flags, g->flags, (size_t)n);
    if (ng > 0)
        memcpy(ref->grp_dur, g->grp_dur, (size_t)ng * sizeof *g->grp_dur);
    ref->n_nodes = n;
    ref->n_groups = ng;
    ref->n_live = dfg_live_nodes(g);
    ref->g = g;
    ref->generation = g->generation;
    return 0;
fail:
    sim_ref_free(ref);
    ref->max_share = share;
    ref->whole_share = whole;
    return -1;
}

/* One re-simulation against a reference. */
typedef struct rerun {
    const dfg *g;
    sim_ref *ref;
    sim_result *o;   /* written: out, or ref->res itself when the result is adopted */
    int32_t lo_word; /* lowest word of ref->dirty set while seeding */
    int32_t n_resim;
    /* the latest end among the ends that changed (ties: first in sim_run's order), and
     * whether the reference's last node ended earlier (then every end is looked at) */
    int64_t cand_end;
    int32_t cand, last0;
    int rescan;
    int dense; /* every node from here on is recomputed: nothing to mark */
} rerun;

/* Node m must be recomputed (while seeding: anywhere; later: after the node being
 * recomputed, as every dependent comes after what it depends on). */
static inline void
mark(rerun *x, int32_t m)
{
    int32_t p = x->ref->pos[m];
    x->ref->dirty[p >> 6] |= (uint64_t)1 << (p & 63);
}

static inline void
mark_seed(rerun *x, int32_t m)
{
    int32_t p = x->ref->pos[m];
    mark(x, m);
    if ((p >> 6) < x->lo_word)
        x->lo_word = p >> 6;
}

/* The devices host node h launches depend on its start. */
static inline void
mark_launched(rerun *x, int32_t h, int seeding)
{
    const dfg *g = x->g;
    for (int32_t i = g->launched_off[h]; i < g->launched_off[h + 1]; i++) {
        if (seeding)
            mark_seed(x, g->launched[i]);
        else
            mark(x, g->launched[i]);
    }
}

/* When node m's dependencies release it, and which one does, replaying sim_run's offers
 * to m in the order sim_run made them (satisfy): the first offer of the latest time
 * wins, and an offer equal to the initial value of a node without one yet. */
static inline void
offers(const rerun *x, int32_t m, int64_t *ready, int32_t *crit, uint8_t *why)
{
    const dfg *g = x->g;
    const sim_ref *ref = x->ref;
    const sim_result *o = x->o;
    int64_t gap = g->gap[m];
    int64_t r = g->kind[m] == DFG_HOST || g->prev_on_res[m] >= 0 ? 0 : gap;
    int64_t wake = (g->flags[m] & DFG_F_WAKEUP) ? gap : 0;
    int32_t c = -1;
    uint8_t y = SIM_CAUSE_NONE;
    for (int64_t i = ref->pred_off[m]; i < ref->pred_off[m + 1]; i++) {
        int32_t f = ref->pred[i];
        uint8_t w = ref->pred_why[i];
        int64_t t;
        if (w == SIM_CAUSE_RESOURCE)
            t = o->end[f] + gap;
        else if (w == SIM_CAUSE_EDGE)
            t = o->end[f] + wake;
        else if (w == SIM_CAUSE_LAUNCH)
            t = o->start[f] + g->lat[m];
        else /* a thread's first call, at its gap from time 0 */
            t = gap;
        if (t > r || (t == r && c < 0)) {
            r = t;
            c = f;
            y = w;
        }
    }
    *ready = r;
    *crit = c;
    *why = y;
}

/* Node n ends at t: when that differs from the reference, what follows n is
 * recomputed (the start of a plain host call next on its thread at once, as sim_run
 * fixes it there). */
static inline void
set_end(rerun *x, int32_t n, int64_t t)
{
    const dfg *g = x->g;
    sim_result *o = x->o;
    int64_t old = o->end[n];
    if (old == t)
        return;
    o->end[n] = t;
    if (n == x->last0 && t < old)
        x->rescan = 1;
    if (x->cand < 0 || t > x->cand_end ||
        (t == x->cand_end && x->ref->fin_seq[n] < x->ref->fin_seq[x->cand])) {
        x->cand_end = t;
        x->cand = n;
    }
    int32_t nx = g->next_on_res[n];
    if (nx >= 0) {
        if (g->kind[nx] == DFG_HOST && !(g->flags[nx] & DFG_F_WAKEUP)) {
            int64_t s = t + g->gap[nx];
            if (o->start[nx] != s) {
                o->start[nx] = s;
                if (!x->dense)
                    mark_launched(x, nx, 0);
            }
        }
        if (!x->dense)
            mark(x, nx);
    }
    if (!x->dense)
        for (int64_t i = g->succ_off[n]; i < g->succ_off[n + 1]; i++)
            mark(x, g->succ[i]);
}

/* Group q completes (at the arrival of its last participant in sim_run's order). */
static void
close_group(rerun *x, int32_t q)
{
    const dfg *g = x->g;
    sim_ref *ref = x->ref;
    sim_result *o = x->o;
    int64_t arr = -1;
    int32_t last = -1;
    for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
        int64_t t = o->start[p];
        if (last < 0 || t > arr || (t == arr && ref->pos[p] < ref->pos[last])) {
            arr = t;
            last = p;
        }
    }
    o->grp_arrival[q] = arr;
    o->grp_last[q] = last;
    int64_t tend = arr + g->grp_dur[q];
    for (int32_t p = g->grp_first[q]; p >= 0; p = g->next_in_group[p]) {
        if (ref->seen[p] != ref->epoch) { /* not recomputed itself in this rerun */
            ref->seen[p] = ref->epoch;
            x->n_resim++;
        }
        if (p != last) {
            o->crit[p] = last;
            o->why[p] = SIM_CAUSE_GROUP;
        } else {
            int64_t ready;
            offers(x, p, &ready, &o->crit[p], &o->why[p]);
        }
        set_end(x, p, tend);
    }
}

/* Recomputes node m (all it depends on is final). */
static inline void
recompute(rerun *x, int32_t m)
{
    const dfg *g = x->g;
    sim_result *o = x->o;
    int64_t ready;
    int32_t crit;
    uint8_t why;
    x->n_resim++;
    offers(x, m, &ready, &crit, &why);
    if (g->kind[m] == DFG_HOST) {
        if ((g->flags[m] & DFG_F_WAKEUP) && o->start[m] != ready) {
            o->start[m] = ready;
            if (!x->dense)
                mark_launched(x, m, 0);
        }
        o->crit[m] = crit;
        o->why[m] = why;
        set_end(x, m, ready + g->dur[m]);
        return;
    }
    o->start[m] = ready;
    int32_t q = g->group[m];
    if (q < 0) {
        o->crit[m] = crit;
        o->why[m] = why;
        set_end(x, m, ready + g->dur[m]);
        return;
    }
    /* a participant: its end, crit and why are the group's to set */
    x->ref->seen[m] = x->ref->epoch;
    if (x->ref->grp_close[q] == m)
        close_group(x, q);
    else if (!x->dense)
        mark(x, x->ref->grp_close[q]);
}

/* Copies the times of r into o (sized alike). */
static void
copy_result(sim_result *o, const sim_result *r)
{
    size_t n = (size_t)r->n_nodes, ng = (size_t)r->n_groups;
    memcpy(o->start, r->start, n * sizeof *o->start);
    memcpy(o->end, r->end, n * sizeof *o->end);
    memcpy(o->crit, r->crit, n * sizeof *o->crit);
    memcpy(o->why, r->why, n * sizeof *o->why);
    if (ng > 0) {
        memcpy(o->grp_arrival, r->grp_arrival, ng * sizeof *o->grp_arrival);
        memcpy(o->grp_last, r->grp_last, ng * sizeof *o->grp_last);
    }
    o->makespan = r->makespan;
    o->last_node = r->last_node;
    o->n_unfinished = r->n_unfinished;
    o->first_unfinished = r->first_unfinished;
}

/* Whether ref can serve g incrementally (same graph, structure and flags). */
static int
ref_serves(const sim_ref *ref, const dfg *g)
{
    return ref->g == g && ref->incremental && ref->generation == g->generation &&
           ref->n_nodes == g->n_nodes && ref->n_groups == g->n_groups &&
           memcmp(ref->flags, g->flags, (size_t)g->n_nodes) == 0;
}

/* Seeds the rerun with node i, whose dur, gap or lat differ from the reference's. */
static void
seed_node(rerun *x, int32_t i)
{
    const dfg *g = x->g;
    sim_ref *ref = x->ref;
    sim_result *o = x->o;
    ref->changed[ref->n_changed++] = i;
    if (g->gap[i] != ref->gap[i] && g->kind[i] == DFG_HOST && !(g->flags[i] & DFG_F_WAKEUP)) {
        /* a plain host call starts at its gap after the previous call (or time 0) */
        int32_t p = g->prev_on_res[i];
        int64_t s = (p >= 0 ? o->end[p] : 0) + g->gap[i];
        if (o->start[i] != s) {
            o->start[i] = s;
            mark_launched(x, i, 1);
        }
    }
    mark_seed(x, i);
}

/* With sim_ref.whole_share: while reruns are predicted to cost more than whole runs,
 * one in SIM_PROBE_MIN is incremental, then one in twice as many after each that
 * confirms it, up to one in SIM_PROBE_MAX. */
#define SIM_PROBE_MIN 8
#define SIM_PROBE_MAX 64

/* Nodes per block compared at once when looking for changed parameters. */
#define SIM_DIFF_BLOCK 256

/* Whether some parameter of g differs from the reference's (stops at the first block
 * that differs). */
static int
params_differ(const dfg *g, const sim_ref *ref)
{
    int32_t n = g->n_nodes;
    for (int32_t b = 0; b < n; b += SIM_DIFF_BLOCK) {
        size_t k = (size_t)((b + SIM_DIFF_BLOCK < n ? b + SIM_DIFF_BLOCK : n) - b);
        if (memcmp(g->dur + b, ref->dur + b, k * sizeof *g->dur) ||
            memcmp(g->gap + b, ref->gap + b, k * sizeof *g->gap) ||
            memcmp(g->lat + b, ref->lat + b, k * sizeof *g->lat))
            return 1;
    }
    return g->n_groups > 0 &&
           memcmp(g->grp_dur, ref->grp_dur, (size_t)g->n_groups * sizeof *g->grp_dur) != 0;
}

int
sim_rerun(dfg *g, sim_ref *ref, sim_result *out, int adopt, sim_rerun_stats *st)
{
    sim_rerun_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    if (dfg_finalize(g) != 0)
        return -1;
    if (!ref_serves(ref, g)) {
        if (sim_ref_build(ref, g) != 0 || result_reserve(out, g) != 0)
            return -1;
        copy_result(out, &ref->res);
        st->nodes = st->resimulated = ref->n_live;
        st->full = 1;
        return 0;
    }
    if (result_reserve(out, g) != 0)
        return -1;
    int probe = ref->whole_share > 0 && ref->recent_share > ref->whole_share;
    if (probe && ++ref->n_predicted < ref->probe_every && params_differ(g, ref)) {
        /* recent reruns recomputed most of the graph: simulate it whole (the reference
         * stays as it was; every probe_every-th rerun is incremental, to see) */
        run(g, out, NULL);
        st->nodes = st->resimulated = ref->n_live;
        st->full = st->predicted = 1;
        return 0;
    }
    int32_t n = g->n_nodes;
    rerun x = {.g = g, .ref = ref, .o = adopt ? &ref->res : out, .lo_word = INT32_MAX, .cand = -1};
    if (!adopt)
        copy_result(out, &ref->res);
    x.last0 = x.o->last_node;
    if (++ref->epoch == 0) { /* wrapped: forget every stamp */
        memset(ref->seen, 0, (size_t)n * sizeof *ref->seen);
        ref->epoch = 1;
    }
    ref->n_changed = ref->n_changed_groups = 0;

    /* the nodes and groups whose parameters differ (blocks compared whole first) */
    for (int32_t b = 0; b < n; b += SIM_DIFF_BLOCK) {
        int32_t e = b + SIM_DIFF_BLOCK < n ? b + SIM_DIFF_BLOCK : n;
        size_t k = (size_t)(e - b);
        if (!memcmp(g->dur + b, ref->dur + b, k * sizeof *g->dur) &&
            !memcmp(g->gap + b, ref->gap + b, k * sizeof *g->gap) &&
            !memcmp(g->lat + b, ref->lat + b, k * sizeof *g->lat))
            continue;
        for (int32_t i = b; i < e; i++)
            if ((g->dur[i] != ref->dur[i] || g->gap[i] != ref->gap[i] ||
                 g->lat[i] != ref->lat[i]) &&
                ref->pos[i] >= 0)
                seed_node(&x, i);
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        if (g->grp_dur[q] == ref->grp_dur[q] || ref->grp_close[q] < 0)
            continue;
        ref->changed_groups[ref->n_changed_groups++] = q;
        mark_seed(&x, ref->grp_close[q]);
    }

    /* recompute in sim_run's order; what a recomputation reaches lies further on */
    int32_t n_words = ref->n_order / 64 + 1;
    int32_t limit = ref->max_share > 0 ? (int32_t)(ref->max_share * ref->n_live) : INT32_MAX;
    for (int32_t wi = x.lo_word; wi < n_words; wi++) {
        uint64_t wd;
        while ((wd = ref->dirty[wi]) != 0) {
            int b = __builtin_ctzll(wd);
            ref->dirty[wi] = wd & (wd - 1);
            recompute(&x, ref->order[wi * 64 + b]);
        }
        if (x.n_resim > limit && wi + 1 < n_words) {
            /* the change reaches far: recompute every node after this word (each is
             * cheaper to recompute than to track) */
            memset(ref->dirty + wi + 1, 0, (size_t)(n_words - wi - 1) * sizeof *ref->dirty);
            x.dense = 1;
            for (int32_t k = (wi + 1) * 64; k < ref->n_order; k++)
                recompute(&x, ref->order[k]);
            st->dense = ref->n_order - (wi + 1) * 64;
            break;
        }
    }

    if (x.cand >= 0) {
        sim_result *o = x.o;
        if (x.rescan) {
            /* the latest end; ties: the first to end in sim_run's order */
            int64_t ms = 0;
            int32_t last = -1;
            for (int32_t i = 0; i < n; i++) {
                int64_t e = o->end[i];
                if (ref->fin_seq[i] < 0)
                    continue;
                if (last < 0 || e > ms || (e == ms && ref->fin_seq[i] < ref->fin_seq[last])) {
                    ms = e;
                    last = i;
                }
            }
            o->makespan = ms;
            o->last_node = last;
        } else if (x.cand_end > o->makespan ||
                   (x.cand_end == o->makespan && ref->fin_seq[x.cand] < ref->fin_seq[x.last0])) {
            o->makespan = x.cand_end;
            o->last_node = x.cand;
        }
    }

    if (adopt) {
        for (int32_t k = 0; k < ref->n_changed; k++) {
            int32_t m = ref->changed[k];
            ref->dur[m] = g->dur[m];
            ref->gap[m] = g->gap[m];
            ref->lat[m] = g->lat[m];
        }
        for (int32_t k = 0; k < ref->n_changed_groups; k++) {
            int32_t q = ref->changed_groups[k];
            ref->grp_dur[q] = g->grp_dur[q];
        }
        copy_result(out, &ref->res);
    }
    st->nodes = ref->n_live;
    st->changed = ref->n_changed + ref->n_changed_groups;
    st->resimulated = x.n_resim;
    /* the share recomputed, averaged over the last few reruns; a probe that confirms the
     * prediction makes the next one twice as far, one that does not ends it */
    if (st->changed == 0)
        return 0; /* nothing to learn from */
    double share = ref->n_live > 0 ? (double)x.n_resim / (double)ref->n_live : 0;
    if (probe) {
        ref->n_predicted = 0;
        if (share > ref->whole_share && ref->probe_every < SIM_PROBE_MAX)
            ref->probe_every *= 2;
        else if (share <= ref->whole_share)
            ref->probe_every = SIM_PROBE_MIN;
        ref->recent_share = share > ref->whole_share ? 0.5 * (ref->recent_share + share) : share;
    } else {
        ref->recent_share = ref->n_reruns == 0 ? share : 0.75 * ref->recent_share + 0.25 * share;
        ref->probe_every = SIM_PROBE_MIN;
    }
    ref->n_reruns++;
    return 0;
}
