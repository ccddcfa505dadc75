/* fidelity.c: how far the replay can be trusted beyond its exact replay: the
 * typical-duration replay, per-class what-ifs, the perturbation check of the graph, and
 * the test-only edge removal (see replay.h); the drawn replay is in drawn.c. */
#define PR_FMT "replay"
#include "fidelity_int.h"

#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "fnv1a.h"
#include "hmap.h"
#include "order.h"

/* ---- iterations of the nodes --------------------------------------------------------------- */

/* Iteration (index into rank boundaries) whose measured window [bend[i], bend[i + 1])
 * holds t, among iterations first..last; -1 if none. */
static int32_t
window_of(const int64_t *bend, int32_t first, int32_t last, int64_t t)
{
    if (t < bend[first] || t >= bend[last + 1])
        return -1;
    int32_t lo = first, hi = last; /* bend[lo] <= t, t < bend[hi + 1] */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (bend[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* iter_of[n]: the compared iteration (first..last) node n belongs to (replay_typical says
 * which), or -1; rp (may be NULL) leaves out the ranks it has no reader for. Returns 0 or
 * -1 (out of memory). */
static int
assign_iterations(const replay *rp, const dfg *g, int32_t first, int32_t last, int32_t *iter_of)
{
    for (int32_t n = 0; n < g->n_nodes; n++)
        iter_of[n] = -1;
    if (last < first)
        return 0;
    int64_t **bend = calloc((size_t)g->n_ranks + 1, sizeof *bend);
    int rc = bend ? 0 : -1;
    for (int32_t r = 0; r < g->n_ranks && rc == 0; r++) {
        const int32_t *b;
        int32_t nb = dfg_iterations(g, r, &b);
        if (last + 1 >= nb || (rp && r < rp->job.n_ranks && !rp->job.ranks[r].reader))
            continue;
        if (!(bend[r] = malloc((size_t)nb * sizeof **bend)))
            rc = -1;
        for (int32_t k = 0; k < nb && rc == 0; k++)
            bend[r][k] = dfg_mend(g, b[k]);
    }
    /* host calls by their start, then device operations by their launch */
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (int32_t n = 0; n < g->n_nodes; n++) {
            if ((g->flags[n] & DFG_F_REMOVED) || (g->kind[n] == DFG_HOST) != (pass == 0))
                continue;
            const int64_t *be = bend[dfg_rank(g, n)];
            if (pass == 1 && g->launch[n] >= 0)
                iter_of[n] = iter_of[g->launch[n]];
            else if (be)
                iter_of[n] = window_of(be, first, last, g->mstart[n]);
        }
    for (int32_t r = 0; bend && r < g->n_ranks; r++)
        free(bend[r]);
    free(bend);
    return rc;
}

/* ---- the typical-duration replay ----------------------------------------------------------- */

typedef fid_place place;

static int
cmp_place(const void *pa, const void *pb)
{
    const place *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    if (a->pos != b->pos)
        return (a->pos > b->pos) - (a->pos < b->pos);
    if (a->name != b->name)
        return (a->name > b->name) - (a->name < b->name);
    return (a->iter > b->iter) - (a->iter < b->iter);
}

/* Orders places by resource, iteration, name, then position: each name's operations of
 * a resource's iteration in their order. */
static int
cmp_occurrence(const void *pa, const void *pb)
{
    const place *a = pa, *b = pb;
    if (a->res != b->res)
        return (a->res > b->res) - (a->res < b->res);
    if (a->iter != b->iter)
        return (a->iter > b->iter) - (a->iter < b->iter);
    if (a->name != b->name)
        return (a->name > b->name) - (a->name < b->name);
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The median (stat REPLAY_TYPICAL_MEDIAN; v is sorted in place, the mean of the middle
 * two for even n) or the mean (rounded) of v[0..n), n > 0. */
static int64_t
typical_i64(int64_t *v, size_t n, int stat)
{
    if (stat == REPLAY_TYPICAL_MEAN) {
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += (double)v[i];
        return (int64_t)(sum / (double)n + 0.5);
    }
    qsort(v, n, sizeof *v, order_i64);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* Sets the typical values of one place's nodes pl[0..m) (m >= 2; v: scratch of m).
 * Returns 0, or -1 when out of memory (dfg_set_dur, dfg_set_gap). */
static int
set_typical(dfg *g, const place *pl, size_t m, int64_t *v, int stat)
{
    int rc = 0;
    for (size_t i = 0; i < m; i++)
        v[i] = dfg_dur(g, pl[i].node);
    int64_t dur = typical_i64(v, m, stat);
    for (size_t i = 0; i < m; i++)
        v[i] = dfg_gap(g, pl[i].node);
    int64_t gap = typical_i64(v, m, stat);
    for (size_t i = 0; i < m; i++)
        v[i] = dfg_lat(g, pl[i].node);
    int64_t lat = typical_i64(v, m, stat);
    size_t ng = 0;
    for (size_t i = 0; i < m; i++) {
        int32_t q = dfg_group(g, pl[i].node);
        if (q >= 0 && g->grp_first[q] == pl[i].node)
            v[ng++] = g->grp_dur[q];
    }
    int64_t gdur = ng >= 2 ? typical_i64(v, ng, stat) : -1;
    for (size_t i = 0; i < m; i++) {
        int32_t n = pl[i].node;
        rc |= dfg_set_dur(g, n, dur) | dfg_set_gap(g, n, gap);
        dfg_set_lat(g, n, (int32_t)lat);
        int32_t q = dfg_group(g, n);
        if (gdur >= 0 && q >= 0 && g->grp_first[q] == n)
            g->grp_dur[q] = gdur;
    }
    return rc;
}

int
fid_sorted_places(const replay *rp, const dfg *g, int32_t first, int32_t last, place **out,
                  size_t *np)
{
    int32_t ni = last - first + 1;
    int32_t *iter_of = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *iter_of);
    place *pl = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *pl);
    int32_t *cnt = calloc((size_t)(ni > 0 ? ni : 1), sizeof *cnt);
    int rc = iter_of && pl && cnt ? 0 : -1;
    if (rc == 0)
        rc = assign_iterations(rp, g, first, last, iter_of);
    *np = 0;
    /* the places come resource by resource, in ascending order, and both orders below
     * are total with the resource first: each resource's run is sorted alone */
    for (int32_t q = 0; q < g->n_res && rc == 0; q++) {
        size_t a0 = *np;
        memset(cnt, 0, (size_t)(ni > 0 ? ni : 1) * sizeof *cnt);
        for (int32_t n = g->res_first[q]; n >= 0; n = g->next_on_res[n]) {
            if ((g->flags[n] & DFG_F_REMOVED) || iter_of[n] < 0)
                continue;
            int32_t i = iter_of[n] - first;
            pl[(*np)++] = (place){q, cnt[i]++, g->name[n], i, n};
        }
        /* position: among the operations of its name (an extra call elsewhere in one
         * iteration leaves the others' places alone) */
        qsort(pl + a0, *np - a0, sizeof *pl, cmp_occurrence);
        for (size_t a = a0, k = 0; a < *np; a++) {
            int same = a > a0 && pl[a].iter == pl[a - 1].iter && pl[a].name == pl[a - 1].name;
            k = same ? k + 1 : 0;
            pl[a].pos = (int32_t)k;
        }
        qsort(pl + a0, *np - a0, sizeof *pl, cmp_place);
    }
    free(iter_of);
    free(cnt);
    if (rc != 0) {
        free(pl);
        pl = NULL;
        *np = 0;
    }
    *out = pl;
    return rc;
}

size_t
fid_place_run_end(const place *pl, size_t np, size_t a)
{
    size_t z = a + 1;
    while (z < np && pl[z].res == pl[a].res && pl[z].pos == pl[a].pos && pl[z].name == pl[a].name)
        z++;
    return z;
}

/* A host call's own time: its fitted duration (the waits the graph explains left out) and
 * the gap before it. */
static int64_t
own_time(const dfg *g, int32_t n)
{
    return dfg_dur(g, n) + dfg_gap(g, n);
}

/* Gives the host thread of places pl[0..m) (one resource, sorted as fid_sorted_places
 * leaves them, their typical values set from the measured ones own[0..m)) its typical
 * stall: a host stall (the thread descheduled, a page fault) lands on another call in
 * each iteration, so the calls' own typical times, each dropping the stalls seen at its
 * place, add up to less than the thread's typical own time per iteration. The difference
 * (stat of the per-iteration sums, measured minus typical) goes to the gaps of the places
 * where the measured time exceeded the typical one, in proportion to that excess. s (2 ni)
 * is scratch. Returns 0, or -1 when out of memory (dfg_set_gap). */
static int
set_thread_stall(dfg *g, const place *pl, size_t m, const int64_t *own, int32_t ni, int stat,
                 int64_t *s)
{
    int rc = 0;
    memset(s, 0, 2 * (size_t)ni * sizeof *s);
    double excess = 0;
    for (size_t i = 0; i < m; i++) {
        int64_t now = own_time(g, pl[i].node);
        s[pl[i].iter] += own[i];
        s[ni + pl[i].iter] += now;
        excess += own[i] > now ? (double)(own[i] - now) : 0;
    }
    int64_t stall = typical_i64(s, (size_t)ni, stat) - typical_i64(s + ni, (size_t)ni, stat);
    for (size_t a = 0, z; a < m && stall > 0 && excess > 0 && rc == 0; a = z) {
        z = fid_place_run_end(pl, m, a);
        double here = 0;
        for (size_t i = a; i < z; i++) {
            int64_t now = own_time(g, pl[i].node);
            here += own[i] > now ? (double)(own[i] - now) : 0;
        }
        int64_t add = (int64_t)((double)stall * here / excess + 0.5);
        for (size_t i = a; i < z && add > 0; i++)
            rc |= dfg_set_gap(g, pl[i].node, dfg_gap(g, pl[i].node) + add);
    }
    return rc;
}

/* End (exclusive) of the run of places on pl[a]'s resource, among pl[0..np). */
static size_t
resource_run_end(const place *pl, size_t np, size_t a)
{
    size_t z = a + 1;
    while (z < np && pl[z].res == pl[a].res)
        z++;
    return z;
}

/* replay_make_typical over the places pl[0..np) of g's compared iterations (ni of them;
 * fid_sorted_places). Returns 0 or -1 (out of memory). */
static int
typical_apply(dfg *g, const place *pl, size_t np, int32_t ni, int stat, replay_typical *info)
{
    size_t most = 1; /* places on one resource, at most */
    for (size_t a = 0, z; a < np; a = z) {
        z = resource_run_end(pl, np, a);
        most = z - a > most ? z - a : most;
    }
    int64_t *v = malloc(most * sizeof *v), *own = malloc(most * sizeof *own);
    int64_t *s = malloc(2 * (size_t)(ni > 0 ? ni : 1) * sizeof *s);
    int rc = v && own && s ? 0 : -1;
    int64_t matched = 0, nodes = 0; /* of the job: a folded rank counts its class */
    for (size_t a = 0, z; a < np && rc == 0; a = z) { /* one resource at a time */
        z = resource_run_end(pl, np, a);
        int host = g->kind[pl[a].node] == DFG_HOST && ni >= 2;
        for (size_t i = a; i < z; i++) {
            nodes += dfg_rank_weight(g, dfg_rank(g, pl[i].node));
            own[i - a] = host ? own_time(g, pl[i].node) : 0;
        }
        for (size_t b = a, e; b < z && rc == 0; b = e) {
            e = fid_place_run_end(pl, z, b);
            if (e - b >= 2)
                rc |= set_typical(g, pl + b, e - b, v, stat);
            if ((int32_t)(e - b) == ni)
                matched += (int64_t)(e - b) * dfg_rank_weight(g, dfg_rank(g, pl[b].node));
        }
        if (host && rc == 0)
            rc = set_thread_stall(g, pl + a, z - a, own, ni, stat, s);
    }
    if (info) {
        info->iterations = ni > 0 ? ni : 0;
        info->nodes = nodes;
        info->matched = matched;
    }
    free(v);
    free(own);
    free(s);
    return rc;
}

int
replay_make_typical(const replay *rp, dfg *g, int stat, replay_typical *info)
{
    place *pl = NULL;
    size_t np = 0;
    int rc = fid_sorted_places(rp, g, rp->iter_first, rp->iter_last, &pl, &np);
    if (rc == 0)
        rc = typical_apply(g, pl, np, rp->iter_last - rp->iter_first + 1, stat, info);
    free(pl);
    return rc;
}

int
replay_typical_host_times(const dfg *g, int32_t iter_first, int32_t iter_last, int64_t *dur,
                          int64_t *gap)
{
    place *pl = NULL;
    size_t np = 0;
    int64_t *v = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *v);
    int rc = v ? fid_sorted_places(NULL, g, iter_first, iter_last, &pl, &np) : -1;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        dur[n] = dfg_dur(g, n);
        gap[n] = dfg_gap(g, n);
    }
    for (size_t a = 0, z; a < np && rc == 0; a = z) {
        z = fid_place_run_end(pl, np, a);
        if (z - a < 2 || g->kind[pl[a].node] != DFG_HOST)
            continue;
        for (size_t i = a; i < z; i++)
            v[i - a] = dfg_dur(g, pl[i].node);
        int64_t d = typical_i64(v, z - a, REPLAY_TYPICAL_MEDIAN);
        for (size_t i = a; i < z; i++)
            v[i - a] = dfg_gap(g, pl[i].node);
        int64_t p = typical_i64(v, z - a, REPLAY_TYPICAL_MEDIAN);
        for (size_t i = a; i < z; i++) {
            dur[pl[i].node] = d;
            gap[pl[i].node] = p;
        }
    }
    free(pl);
    free(v);
    return rc;
}

/* ---- the typical replay --------------------------------------------------------------------- */

void
fid_runner_free(fid_runner *fr)
{
    sim_result_free(&fr->res);
    dfg_timing_view_free(&fr->view);
    dfg_free(&fr->base);
    free(fr->pl);
    free(fr->rank_meas);
    memset(fr, 0, sizeof *fr);
}

/* The measured mean iteration of each present rank of fr->src into fr->rank_meas (-1 for
 * none), as replay_summarize computes it. Returns 0 or -1 (out of memory). */
static int
measured_means(fid_runner *fr)
{
    const replay *rp = fr->rp;
    const dfg *g = fr->src;
    int64_t *garr = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *garr);
    int64_t *mend = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *mend);
    int rc = garr && mend ? 0 : -1;
    sim_timeline mt = rc == 0 ? sim_timeline_measured(g, garr, mend) : (sim_timeline){0};
    for (int32_t r = 0; r < g->n_ranks && rc == 0; r++) {
        int64_t m0, m1;
        int32_t nm = 0;
        if (r >= rp->job.n_ranks || rp->job.ranks[r].reader)
            nm = replay_rank_window(rp, g, mt, r, &m0, &m1);
        fr->rank_meas[r] = nm > 0 ? (double)(m1 - m0) / nm / 1000.0 : -1;
    }
    free(garr);
    free(mend);
    return rc;
}

int
fid_runner_init(const replay *rp, fid_runner *fr)
{
    memset(fr, 0, sizeof *fr);
    fr->rp = rp;
    const dfg *g = &rp->graph;
    int rc = 0;
    if (!g->finalized) { /* a view shares a finalized graph only */
        rc = dfg_clone(&fr->base, g) != 0 || dfg_finalize(&fr->base) != 0 ? -1 : 0;
        g = &fr->base;
    }
    if (rc == 0 && dfg_timing_view(&fr->view, g) == 0)
        fr->src = g;
    else
        rc = -1;
    if (rc == 0 && !(fr->rank_meas =
                         malloc((size_t)(g->n_ranks > 0 ? g->n_ranks : 1) * sizeof *fr->rank_meas)))
        rc = -1;
    if (rc == 0)
        rc = fid_sorted_places(rp, g, rp->iter_first, rp->iter_last, &fr->pl, &fr->np);
    if (rc == 0)
        rc = measured_means(fr);
    if (rc != 0)
        fid_runner_free(fr);
    return rc;
}

/* The mean iterations of fr's simulation, measured and simulated, and the error, as
 * replay_summarize gives them (the same sums in the same order, so the same figures to the
 * bit), over the present ranks whose compared iterations both timelines cover; 1 when the
 * simulation covers no present rank's (replay_iteration_of's test). Returns 0 or 1. */
static int
mean_iterations(const fid_runner *fr, double *measured, double *us, double *err)
{
    const replay *rp = fr->rp;
    const dfg *g = &fr->view;
    sim_timeline st = sim_timeline_of(&fr->res);
    double msum = 0, ssum = 0, isum = 0;
    int32_t k = 0, ki = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        if (r < rp->job.n_ranks && !rp->job.ranks[r].reader)
            continue;
        int64_t s0, s1;
        int32_t ns = replay_rank_window(rp, g, st, r, &s0, &s1);
        if (ns <= 0)
            continue;
        isum += (double)(s1 - s0) / ns; /* replay_iteration_of's sum */
        ki++;
        if (fr->rank_meas[r] < 0)
            continue;
        msum += fr->rank_meas[r];
        ssum += (double)(s1 - s0) / ns / 1000.0;
        k++;
    }
    int rc = (ki ? isum / ki : -1) < 0 ? 1 : 0;
    if (rc == 0) {
        *measured = k > 0 ? msum / k : 0;
        *us = k > 0 ? ssum / k : 0;
        *err = k > 0 && *measured > 0 ? 100.0 * (*us - *measured) / *measured : 0;
    }
    return rc;
}

int
fid_runner_timings(fid_runner *fr, int (*make)(dfg *g, void *ctx), void *ctx, double *measured,
                   double *us, double *err)
{
    int rc = dfg_timing_view_reset(&fr->view, fr->src);
    if (rc == 0)
        rc = make(&fr->view, ctx);
    if (rc == 0 && sim_run(&fr->view, &fr->res) != 0)
        rc = -1;
    if (rc == 0)
        rc = mean_iterations(fr, measured, us, err);
    return rc;
}

/* replay_make_typical as fid_runner_timings calls it, over the runner's places, with the
 * ranks' wait at the collectives (fid_rank_wait_typical, into info->rank_wait_ns) when
 * wait is set. */
typedef struct typical_ctx {
    const fid_runner *fr;
    int stat, wait;
    replay_typical *info; /* may be NULL */
} typical_ctx;

static int
make_typical(dfg *g, void *ctx)
{
    const typical_ctx *c = ctx;
    const replay *rp = c->fr->rp;
    int rc = typical_apply(g, c->fr->pl, c->fr->np, rp->iter_last - rp->iter_first + 1, c->stat,
                           c->info);
    int64_t w = rc == 0 && c->wait ? fid_rank_wait_typical(rp, g, c->fr->pl, c->fr->np) : 0;
    if (w < 0)
        rc = -1;
    if (c->info && c->wait)
        c->info->rank_wait_ns = w > 0 ? w : 0;
    return rc;
}

int
fid_test_fault(const char *part)
{
    const char *v = getenv("DPRO_TEST_FIDELITY_FAIL");
    return v && strcmp(v, part) == 0;
}

int
replay_typical_replay(const replay *rp, replay_typical *out)
{
    fid_runner fr;
    memset(out, 0, sizeof *out);
    memset(&fr, 0, sizeof fr); /* freed whatever happens */
    typical_ctx med = {&fr, REPLAY_TYPICAL_MEDIAN, 1, out},
                only = {&fr, REPLAY_TYPICAL_MEDIAN, 0, NULL},
                mean = {&fr, REPLAY_TYPICAL_MEAN, 0, NULL};
    int rc = fid_test_fault("typical") ? -1 : fid_runner_init(rp, &fr);
    if (rc == 0)
        rc = fid_runner_timings(&fr, make_typical, &med, &out->measured_us, &out->predicted_us,
                                &out->error_pct);
    /* the medians alone: the same replay without the wait (one more simulation where
     * there is one) */
    out->medians_only_predicted_us = out->predicted_us;
    out->medians_only_error_pct = out->error_pct;
    if (rc == 0 && out->rank_wait_ns > 0)
        rc = fid_runner_timings(&fr, make_typical, &only, &out->measured_us,
                                &out->medians_only_predicted_us, &out->medians_only_error_pct);
    if (rc == 0)
        rc = fid_runner_timings(&fr, make_typical, &mean, &out->measured_us,
                                &out->mean_predicted_us, &out->mean_error_pct);
    /* the drawn replay stands apart: its failure leaves the medians' figures standing */
    int drawn = rc == 0 && out->iterations > 1 ? fid_drawn_replay(&fr, out) : 0;
    if (drawn != 0)
        out->drawn_absent =
            drawn < 0 ? "out of memory" : "its simulations do not cover the compared iterations";
    if (rc != 0) { /* no figure: none of its parts either */
        out->predicted_us = out->medians_only_predicted_us = out->mean_predicted_us = 0;
        out->rank_wait_ns = 0;
    }
    fid_runner_free(&fr);
    return rc;
}

/* ---- what-ifs and the test-only edge removal ------------------------------------------------- */

int64_t
replay_scale_class(dfg *g, int32_t name, double factor)
{
    if (!(factor >= 0))
        return -1;
    int64_t k = 0;
    for (int32_t n = 0; k >= 0 && n < g->n_nodes; n++) {
        if (g->kind[n] != DFG_KERNEL || g->name[n] != name || (g->flags[n] & DFG_F_REMOVED))
            continue;
        k = dfg_set_dur(g, n, (int64_t)((double)dfg_dur(g, n) * factor + 0.5)) == 0 ? k + 1 : -1;
    }
    return k;
}

int64_t
replay_drop_edges(dfg *g, double fraction)
{
    int64_t kept = 0;
    for (int64_t e = 0; e < g->n_edges; e++) {
        uint64_t h = dpro_fnv1a(&e, sizeof e, DPRO_FNV1A_INIT);
        if ((double)h / 18446744073709551616.0 < fraction)
            continue;
        g->esrc[kept] = g->esrc[e];
        g->edst[kept] = g->edst[e];
        kept++;
    }
    int64_t dropped = g->n_edges - kept;
    g->n_edges = kept;
    g->finalized = 0;
    if (build_derive_timing(g) != 0)
        return -1;
    return dropped;
}

/* ---- the perturbation check ------------------------------------------------------------------ */

/* A (rank, key, value) triple for the sorts below. */
typedef struct rkv {
    int32_t rank, key;
    int64_t v;
} rkv;

static int
cmp_rkv(const void *pa, const void *pb)
{
    const rkv *a = pa, *b = pb;
    if (a->rank != b->rank)
        return (a->rank > b->rank) - (a->rank < b->rank);
    if (a->key != b->key)
        return (a->key > b->key) - (a->key < b->key);
    return (a->v > b->v) - (a->v < b->v);
}

/* How a call of API class cls can wait for device work: WAIT_SYNC, it exists to wait (a
 * synchronisation, a synchronous copy or memset: a device operation ending inside it is
 * what it waited for); WAIT_FREE, cudaFree, which waits for the device to go idle and has a
 * cost of its own; WAIT_LAUNCH, a launch, which waits only while its queue is full; 0, it
 * does not wait (cudaMalloc can be long on its own while device work ends): not checked. */
enum { WAIT_SYNC = 1, WAIT_FREE = 2, WAIT_LAUNCH = 3 };

/* A cudaFree or a launch waited only when it took longer than MAYBE_WAITED x the 10th
 * percentile of its name's calls on its rank (its usual cost) + MAYBE_WAITED_NS (shorter,
 * it only overlapped the end of some device operation), a cudaFree only with nothing left
 * pending, a launch only with its queue full: at least QUEUE_FULL_NUM / QUEUE_FULL_DEN of
 * the most operations its rank ever had pending, and at least QUEUE_MIN (a long launch with
 * few pending is a host held up, e.g. descheduled). Launches on the shared traces: 4-6 us
 * usually, 100 us - 2 ms when v100-1rank-training's queue of about 1,022 was full. A
 * launch waits for room in a queue whose depth the trace shows only roughly (copies and
 * memsets share it, the stall's end and the measured end of an operation do not fall
 * together): it may wait until 1/QUEUE_SLACK fewer operations are pending than when it
 * was measured to stop. */
#define MAYBE_WAITED 3
#define MAYBE_WAITED_NS 10000
#define QUEUE_FULL_NUM 7
#define QUEUE_FULL_DEN 8
#define QUEUE_MIN 64
#define QUEUE_SLACK 32

static int
can_wait(int cls)
{
    switch (cls) {
    case DPRO_API_CLASS_MEMCPY:
    case DPRO_API_CLASS_MEMSET:
    case DPRO_API_CLASS_EVENT_SYNC:
    case DPRO_API_CLASS_STREAM_SYNC:
    case DPRO_API_CLASS_DEVICE_SYNC:
        return WAIT_SYNC;
    case DPRO_API_CLASS_FREE:
        return WAIT_FREE;
    case DPRO_API_CLASS_LAUNCH:
    case DPRO_API_CLASS_GRAPH_LAUNCH:
        return WAIT_LAUNCH;
    default:
        return 0;
    }
}

/* The device operations of one rank on one timeline: when each was submitted (its launch
 * call started; the operation's own start when nothing launched it) and when it ended,
 * each sorted. */
typedef struct devq {
    int64_t *sub, *end;
    size_t n;
} devq;

/* Fills q (arrays of g->n_nodes entries) with rank r's operations on timeline start/end. */
static void
devq_fill(const dfg *g, int32_t r, const int64_t *start, const int64_t *end, devq *q)
{
    q->n = 0;
    for (int32_t x = 0; x < g->n_res; x++) {
        if (g->res_rank[x] != r || g->res_kind[x] != DFG_RES_STREAM)
            continue;
        for (int32_t d = g->res_first[x]; d >= 0; d = g->next_on_res[d]) {
            if ((g->flags[d] & DFG_F_REMOVED) || end[d] < 0)
                continue;
            q->sub[q->n] = g->launch[d] >= 0 ? start[g->launch[d]] : start[d];
            q->end[q->n++] = end[d];
        }
    }
    qsort(q->sub, q->n, sizeof *q->sub, order_i64);
    qsort(q->end, q->n, sizeof *q->end, order_i64);
}

/* How many of v[0..n) (sorted) are <= t. */
static size_t
count_le(const int64_t *v, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The earliest time >= from at which at most p operations of q are pending (submitted,
 * not ended); INT64_MAX when that never happens. */
static int64_t
devq_room(const devq *q, int64_t from, int64_t p)
{
    size_t i = count_le(q->sub, q->n, from), j = count_le(q->end, q->n, from);
    int64_t pending = (int64_t)i - (int64_t)j, t = from;
    while (pending > p) {
        if (j >= q->n)
            return INT64_MAX;
        if (i < q->n && q->sub[i] < q->end[j]) {
            pending++;
            i++;
        } else {
            t = q->end[j++];
            pending--;
        }
    }
    return t;
}

/* The most operations of q pending at once. */
static int64_t
devq_max_pending(const devq *q)
{
    size_t i = 0, j = 0;
    int64_t pending = 0, most = 0;
    while (i < q->n) {
        if (q->sub[i] < q->end[j]) {
            if (++pending > most)
                most = pending;
            i++;
        } else {
            pending--;
            j++;
        }
    }
    return most;
}

/* For every host call that can wait and during which a device operation of its rank
 * ended (measured): pend[n], the operations its rank had pending right after the last
 * such end (what the call waited for had happened by then), and own[n], its own cost
 * (replay_perturbation); pend[n] = -1 for the other calls. From the measured times.
 * Returns 0 or -1. */
static int
own_costs(const dfg *g, int64_t *own, int64_t *pend)
{
    size_t n = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    rkv *host = malloc(n * sizeof *host);
    devq q = {malloc(n * sizeof *q.sub), malloc(n * sizeof *q.end), 0};
    int64_t *mend = dfg_mend_array(g);
    hmap q10 = {0}, cls = {0};
    int rc = host && q.sub && q.end && mend && hmap_init(&q10, n / 8 + 16) == 0 &&
                     hmap_init(&cls, 64) == 0
                 ? 0
                 : -1;
    size_t nh = 0;
    for (int32_t m = 0; m < g->n_nodes && rc == 0; m++) {
        pend[m] = -1;
        if (!(g->flags[m] & DFG_F_REMOVED) && g->kind[m] == DFG_HOST)
            host[nh++] = (rkv){dfg_rank(g, m), g->name[m], dfg_mend(g, m) - g->mstart[m]};
    }
    if (rc == 0)
        qsort(host, nh, sizeof *host, cmp_rkv);
    /* the 10th percentile of each (rank, name)'s measured durations, by its index */
    for (size_t a = 0, z; a < nh && rc == 0; a = z) {
        for (z = a + 1; z < nh && host[z].rank == host[a].rank && host[z].key == host[a].key; z++)
            ;
        rc = hmap_put(&q10, ((uint64_t)(uint32_t)host[a].rank << 32) | (uint32_t)host[a].key,
                      (int32_t)(a + (z - a) / 10));
    }
    for (int32_t r = 0; r < g->n_ranks && rc == 0; r++) {
        devq_fill(g, r, g->mstart, mend, &q);
        int64_t most = devq_max_pending(&q);
        for (int32_t x = 0; x < g->n_res && rc == 0; x++) {
            if (g->res_rank[x] != r || g->res_kind[x] != DFG_RES_THREAD)
                continue;
            for (int32_t m = g->res_first[x]; m >= 0; m = g->next_on_res[m]) {
                if (g->flags[m] & DFG_F_REMOVED)
                    continue;
                int64_t d = dfg_mend(g, m) - g->mstart[m];
                own[m] = d;
                int32_t w = hmap_get(&cls, (uint32_t)g->name[m], -1);
                if (w < 0) {
                    w = can_wait(dpro_api_classify(dfg_name(g, g->name[m])));
                    if ((rc = hmap_put(&cls, (uint32_t)g->name[m], w)) != 0)
                        break;
                }
                size_t e = count_le(q.end, q.n, dfg_mend(g, m));
                if (!w || e == 0 || q.end[e - 1] < g->mstart[m])
                    continue;
                int32_t k =
                    hmap_get(&q10, ((uint64_t)(uint32_t)r << 32) | (uint32_t)g->name[m], -1);
                int64_t floor = k >= 0 && w != WAIT_SYNC ? host[k].v : 0;
                if (w != WAIT_SYNC && d <= MAYBE_WAITED * floor + MAYBE_WAITED_NS)
                    continue; /* no longer than its usual cost: it did not wait */
                int64_t last = q.end[e - 1];
                int64_t p =
                    (int64_t)count_le(q.sub, q.n, last) - (int64_t)count_le(q.end, q.n, last);
                if ((w == WAIT_FREE && p > 0) ||
                    (w == WAIT_LAUNCH &&
                     (p < QUEUE_MIN || p * QUEUE_FULL_DEN < most * QUEUE_FULL_NUM)))
                    continue; /* work left pending: it did not wait for it */
                pend[m] = w == WAIT_LAUNCH ? p - (p + QUEUE_SLACK - 1) / QUEUE_SLACK : p;
                int64_t after = dfg_mend(g, m) - last;
                own[m] = after > floor ? after : floor;
                if (own[m] > d)
                    own[m] = d;
            }
        }
    }
    hmap_free(&q10);
    hmap_free(&cls);
    free(host);
    free(mend);
    free(q.sub);
    free(q.end);
    return rc;
}

/* Stale waits of simulation res of g (replay_perturbation) per iteration, the mean over
 * ranks, in ns; -1 out of memory. */
static double
stale_waits(const replay *rp, const dfg *g, const sim_result *res, const int64_t *own,
            const int64_t *pend)
{
    sim_timeline tl = sim_timeline_of(res);
    size_t nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    devq q = {malloc(nn * sizeof *q.sub), malloc(nn * sizeof *q.end), 0};
    if (!q.sub || !q.end) {
        free(q.sub);
        free(q.end);
        return -1;
    }
    double sum = 0;
    int32_t ranks = 0;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        int64_t t0, t1;
        int32_t ni;
        if ((r < rp->job.n_ranks && !rp->job.ranks[r].reader) ||
            (ni = replay_rank_window(rp, g, tl, r, &t0, &t1)) <= 0)
            continue;
        devq_fill(g, r, res->start, res->end, &q);
        int64_t stale = 0;
        for (int32_t x = 0; x < g->n_res; x++) {
            if (g->res_rank[x] != r || g->res_kind[x] != DFG_RES_THREAD)
                continue;
            for (int32_t c = g->res_first[x]; c >= 0; c = g->next_on_res[c]) {
                if ((g->flags[c] & DFG_F_REMOVED) || pend[c] < 0 || res->end[c] < 0 ||
                    res->start[c] < t0 || res->start[c] >= t1)
                    continue;
                int64_t room = devq_room(&q, res->start[c], pend[c]);
                if (room == INT64_MAX)
                    continue;
                int64_t over = res->end[c] - (room + own[c]);
                if (over > 0)
                    stale += over;
            }
        }
        sum += (double)stale / ni;
        ranks++;
    }
    free(q.sub);
    free(q.end);
    return ranks ? sum / ranks : 0;
}

void
replay_perturbation_free(replay_perturbation *p)
{
    free(p->cls);
    memset(p, 0, sizeof *p);
}

static int
cmp_class(const void *pa, const void *pb)
{
    const replay_perturb_class *a = pa, *b = pb;
    if (a->total_us != b->total_us)
        return (a->total_us < b->total_us) - (a->total_us > b->total_us);
    return (a->name > b->name) - (a->name < b->name);
}

/* The kernel classes of g into p->cls (all of them, most time first; p->n): the kernels of
 * the compared iterations (those their launch calls belong to, replay_typical), or of the
 * whole trace without iterations, summed over ranks, per iteration. Returns 0 or -1. */
static int
collect_classes(const replay *rp, const dfg *g, replay_perturbation *p)
{
    int32_t *iter_of = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *iter_of);
    hmap idx = {0};
    int rc = iter_of && hmap_init(&idx, 256) == 0 ? 0 : -1;
    int whole = rp->iter_last < rp->iter_first;
    int32_t cap = 0, ni = whole ? 1 : rp->iter_last - rp->iter_first + 1;
    if (rc == 0)
        rc = assign_iterations(rp, g, rp->iter_first, rp->iter_last, iter_of);
    for (int32_t n = 0; n < g->n_nodes && rc == 0; n++) {
        if (g->kind[n] != DFG_KERNEL || (g->flags[n] & DFG_F_REMOVED) || (!whole && iter_of[n] < 0))
            continue;
        int32_t k = hmap_get(&idx, (uint32_t)g->name[n], -1);
        if (k < 0) {
            if (p->n == cap) {
                cap = cap ? cap * 2 : 64;
                replay_perturb_class *x = realloc(p->cls, (size_t)cap * sizeof *x);
                if (!x) {
                    rc = -1;
                    break;
                }
                p->cls = x;
            }
            k = p->n++;
            memset(&p->cls[k], 0, sizeof p->cls[k]);
            p->cls[k].name = g->name[n];
            rc = hmap_put(&idx, (uint32_t)g->name[n], k);
        }
        int32_t w = dfg_rank_weight(g, dfg_rank(g, n)); /* the ranks it stands for */
        p->cls[k].count += w;
        p->cls[k].total_us += (double)w * (double)dfg_dur(g, n) / 1000.0 / ni;
    }
    if (rc == 0 && p->n > 0)
        qsort(p->cls, (size_t)p->n, sizeof *p->cls, cmp_class);
    hmap_free(&idx);
    free(iter_of);
    return rc;
}

/* Simulates g into res and sets *us to its mean iteration in us. Returns 0, 1 when the
 * compared iterations are not covered, -1 out of memory. */
static int
predict_us(const replay *rp, dfg *g, sim_result *res, double *us)
{
    if (sim_run(g, res) != 0)
        return -1;
    double t = replay_iteration_of(rp, g, res);
    *us = t / 1000.0;
    return t < 0 ? 1 : 0;
}

/* Sets every node's duration from dur (n_nodes entries). Returns 0 or -1 (out of
 * memory). */
static int
set_durations(dfg *g, const int64_t *dur)
{
    int rc = 0;
    for (int32_t n = 0; n < g->n_nodes; n++)
        rc |= dfg_set_dur(g, n, dur[n]);
    return rc;
}

int
replay_perturb(const replay *rp, int32_t top, double scale, replay_perturbation *out)
{
    memset(out, 0, sizeof *out);
    out->scale = scale;
    dfg copy;
    sim_result res;
    memset(&res, 0, sizeof res);
    if (fid_test_fault("perturb") || dfg_clone(&copy, &rp->graph) != 0)
        return -1;
    size_t nn = (size_t)(copy.n_nodes > 0 ? copy.n_nodes : 1);
    int64_t *own = malloc(nn * sizeof *own);
    int64_t *pend = malloc(nn * sizeof *pend);
    int64_t *dur = malloc(nn * sizeof *dur);
    int rc = own && pend && dur ? 0 : -1;
    if (rc == 0)
        rc = own_costs(&copy, own, pend);
    if (rc == 0) {
        for (int32_t n = 0; n < copy.n_nodes; n++)
            dur[n] = dfg_dur(&copy, n);
        rc = predict_us(rp, &copy, &res, &out->baseline_us);
    }
    if (rc == 0)
        rc = collect_classes(rp, &copy, out);
    if (rc == 0 && out->n > top)
        out->n = top;
    double st = 0;
    if (rc == 0 && (st = stale_waits(rp, &copy, &res, own, pend)) < 0)
        rc = -1;
    out->baseline_stale_us = st / 1000.0;
    for (int32_t k = 0; k < out->n && rc == 0; k++) {
        replay_perturb_class *c = &out->cls[k];
        rc = replay_scale_class(&copy, c->name, scale) < 0 ? -1 : 0;
        if (rc == 0)
            rc = predict_us(rp, &copy, &res, &c->predicted_us);
        if (rc == 0 && (st = stale_waits(rp, &copy, &res, own, pend)) < 0)
            rc = -1;
        c->stale_wait_us = st / 1000.0;
        if (rc == 0)
            rc = set_durations(&copy, dur);
        if (rc == 0 && replay_scale_class(&copy, c->name, 0) < 0)
            rc = -1;
        if (rc == 0)
            rc = predict_us(rp, &copy, &res, &c->without_us);
        if (rc == 0)
            rc = set_durations(&copy, dur);
    }
    if (rc != 0)
        replay_perturbation_free(out);
    free(own);
    free(pend);
    free(dur);
    sim_result_free(&res);
    dfg_free(&copy);
    return rc;
}
