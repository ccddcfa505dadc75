/* fold.c: rank classes, alike ranks simulated once (see replay.h, replay_fold). */
#define PR_FMT "replay"
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"
#include "job_fold.h"

/* One present rank's nodes in canonical order: its resources in index order, each in
 * resource order; pos[n] is node n's place in its rank's list. */
typedef struct rank_nodes {
    int32_t *off;  /* n_ranks + 1 */
    int32_t *node; /* live nodes, grouped by rank */
    int32_t *pos;  /* n_nodes */
    int32_t *ord;  /* n_res: the resource's ordinal among its rank's */
} rank_nodes;

static void
rank_nodes_free(rank_nodes *rn)
{
    free(rn->off);
    free(rn->node);
    free(rn->pos);
    free(rn->ord);
}

/* Fills rn for g. Returns 0 or -1. */
static int
rank_nodes_fill(const dfg *g, rank_nodes *rn)
{
    size_t nr = (size_t)g->n_ranks + 1;
    rn->off = calloc(nr + 1, sizeof *rn->off);
    rn->node = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *rn->node);
    rn->pos = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *rn->pos);
    rn->ord = malloc((size_t)(g->n_res > 0 ? g->n_res : 1) * sizeof *rn->ord);
    int32_t *fill = calloc(nr, sizeof *fill);
    int32_t *nres = calloc(nr, sizeof *nres);
    int rc = rn->off && rn->node && rn->pos && rn->ord && fill && nres ? 0 : -1;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        rn->pos[n] = -1;
        if (!(g->flags[n] & DFG_F_REMOVED))
            rn->off[dfg_rank(g, n) + 1]++;
    }
    for (int32_t r = 0; rc == 0 && r < g->n_ranks; r++)
        rn->off[r + 1] += rn->off[r];
    for (int32_t q = 0; rc == 0 && q < g->n_res; q++) {
        int32_t r = g->res_rank[q];
        rn->ord[q] = nres[r]++;
        for (int32_t m = g->res_first[q]; m >= 0; m = g->next_on_res[m]) {
            if (g->flags[m] & DFG_F_REMOVED)
                continue;
            rn->pos[m] = fill[r];
            rn->node[rn->off[r] + fill[r]++] = m;
        }
    }
    free(fill);
    free(nres);
    return rc;
}

/* What decides whether two ranks are alike. */
typedef struct fold_ctx {
    const replay *rp;
    const dfg *g;
    rank_nodes rn;
    int64_t *t0;    /* per rank: start of its compared window (or its first node) */
    double *tol;    /* per rank: the time tolerance, ns */
    uint8_t *alone; /* per rank: why it is never folded (enum dfg_apart), 0: it may be */
    int32_t *rep;   /* the classes (n_ranks + 1 entries each): dfg_fold's rep, weight, apart */
    int32_t *weight;
    uint8_t *apart;
    double tolerance; /* the share of the mean iteration two ranks' times may differ by */
} fold_ctx;

/* The fold tolerance: two ranks are alike when, from the start of the compared window
 * on, every operation's duration, gap and launch latency, and its start and end relative
 * to the start of the window, differ by at most this fraction of the representative's
 * mean measured iteration (the rule job_fold.h applies to the events of a rank read). */
#define FOLD_TOLERANCE JOB_FOLD_TOLERANCE

static uint64_t
mix64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* Structural hash of rank r; sets alone[r] when it has an edge or launch across ranks. */
static uint64_t
rank_hash(fold_ctx *c, int32_t r)
{
    const dfg *g = c->g;
    uint64_t h = 0x12345;
    for (int32_t i = c->rn.off[r]; i < c->rn.off[r + 1]; i++) {
        int32_t n = c->rn.node[i];
        h = mix64(h, ((uint64_t)g->kind[n] << 40) | ((uint64_t)g->flags[n] << 32) |
                         (uint32_t)g->name[n]);
        h = mix64(h, ((uint64_t)c->rn.ord[g->res[n]] << 32) | g->res_kind[g->res[n]]);
        h = mix64(h, (uint64_t)dfg_bytes(g, n));
        if (dfg_group(g, n) >= 0) {
            int32_t q = dfg_group(g, n);
            h = mix64(h, ((uint64_t)g->grp_op[q] << 32) | (uint32_t)g->grp_nranks[q]);
            h = mix64(h, (uint64_t)g->grp_bytes[q]);
        }
        int32_t l = g->launch[n];
        if (l >= 0 && dfg_rank(g, l) != r)
            c->alone[r] = DFG_APART_UNFOLDABLE;
        h = mix64(h, l >= 0 ? (uint64_t)c->rn.pos[l] : ~0ULL);
        for (int64_t e = dfg_succ_first(g, n); dfg_succ_more(g, n, e); e++) {
            int32_t m = g->succ[e];
            if (dfg_rank(g, m) != r)
                c->alone[r] = DFG_APART_UNFOLDABLE;
            h = mix64(h, (uint64_t)c->rn.pos[m]);
        }
    }
    const int32_t *b;
    int32_t nb = dfg_iterations(g, r, &b);
    for (int32_t k = 0; k < nb; k++)
        h = mix64(h, b[k] >= 0 ? (uint64_t)c->rn.pos[b[k]] : ~0ULL);
    return h;
}

/* Whether rank r is alike representative p. Returns 1, 0 (*why: DFG_APART_STRUCTURE or
 * DFG_APART_TIMING). */
static int
alike(const fold_ctx *c, int32_t r, int32_t p, int *why)
{
    const dfg *g = c->g;
    int32_t n = c->rn.off[r + 1] - c->rn.off[r];
    *why = DFG_APART_STRUCTURE;
    if (n != c->rn.off[p + 1] - c->rn.off[p])
        return 0;
    const int32_t *b, *bp;
    int32_t nb = dfg_iterations(g, r, &b), nbp = dfg_iterations(g, p, &bp);
    if (nb != nbp)
        return 0;
    for (int32_t k = 0; k < nb; k++)
        if ((b[k] >= 0 ? c->rn.pos[b[k]] : -1) != (bp[k] >= 0 ? c->rn.pos[bp[k]] : -1))
            return 0;
    double tol = c->tol[p];
    int timing = 1;
    for (int32_t i = 0; i < n; i++) {
        int32_t x = c->rn.node[c->rn.off[r] + i], y = c->rn.node[c->rn.off[p] + i];
        int32_t lx = g->launch[x], ly = g->launch[y];
        if (g->kind[x] != g->kind[y] || g->flags[x] != g->flags[y] || g->name[x] != g->name[y] ||
            c->rn.ord[g->res[x]] != c->rn.ord[g->res[y]] || dfg_bytes(g, x) != dfg_bytes(g, y) ||
            (lx >= 0 ? c->rn.pos[lx] : -1) != (ly >= 0 ? c->rn.pos[ly] : -1) ||
            (dfg_group(g, x) < 0) != (dfg_group(g, y) < 0))
            return 0;
        if (dfg_group(g, x) >= 0 &&
            (g->grp_op[dfg_group(g, x)] != g->grp_op[dfg_group(g, y)] ||
             g->grp_nranks[dfg_group(g, x)] != g->grp_nranks[dfg_group(g, y)] ||
             g->grp_bytes[dfg_group(g, x)] != g->grp_bytes[dfg_group(g, y)]))
            return 0;
        int64_t ex = dfg_succ_first(g, x), ey = dfg_succ_first(g, y);
        for (; dfg_succ_more(g, x, ex) && dfg_succ_more(g, y, ey); ex++, ey++)
            if (c->rn.pos[g->succ[ex]] != c->rn.pos[g->succ[ey]])
                return 0;
        if (dfg_succ_more(g, x, ex) || dfg_succ_more(g, y, ey))
            return 0; /* more successors on one side */
        if (!timing || g->mstart[x] < c->t0[r])
            continue; /* the structure is still compared: the reason is the timing; before
                       * the window only the structure counts (processes start apart, the
                       * first collectives even it out, warm-up calls vary) */
        timing = job_fold_within(dfg_dur(g, x), dfg_dur(g, y), tol) &&
                 job_fold_within(dfg_lat(g, x), dfg_lat(g, y), tol) &&
                 job_fold_within(dfg_gap(g, x), dfg_gap(g, y), tol) &&
                 job_fold_within(g->mstart[x] - c->t0[r], g->mstart[y] - c->t0[p], tol) &&
                 job_fold_within(dfg_mend(g, x) - c->t0[r], dfg_mend(g, y) - c->t0[p], tol);
    }
    *why = DFG_APART_TIMING;
    return timing;
}

/* The window start, the tolerance and the straggler rule of every present rank: a rank
 * that the report would name a straggler (REPLAY_STRAGGLER_SHARE, as dpro-replay lists
 * them) stays
 * alone. Returns 0 or -1. */
static int
rank_figures(fold_ctx *c)
{
    const replay *rp = c->rp;
    const dfg *g = c->g;
    int64_t *garr = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *garr);
    double *blame = calloc((size_t)g->n_ranks + 1, sizeof *blame);
    int64_t *mend = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *mend);
    if (!garr || !blame || !mend) {
        free(garr);
        free(blame);
        free(mend);
        return -1;
    }
    sim_timeline mt = sim_timeline_measured(g, garr, mend);
    int64_t gt0 = INT64_MAX, gt1 = INT64_MIN;
    double msum = 0;
    int32_t k = 0, iters = 1;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        if (r < rp->job.n_ranks && !rp->job.ranks[r].reader)
            continue;
        int64_t t0 = INT64_MAX, t1 = -1;
        int32_t ni = replay_rank_window(rp, g, mt, r, &t0, &t1);
        if (ni <= 0) {
            c->alone[r] = DFG_APART_UNFOLDABLE; /* nothing to compare it by */
            continue;
        }
        c->t0[r] = t0;
        c->tol[r] = c->tolerance * (double)(t1 - t0) / ni;
        gt0 = t0 < gt0 ? t0 : gt0;
        gt1 = t1 > gt1 ? t1 : gt1;
        msum += (double)(t1 - t0) / ni;
        iters = ni;
        k++;
    }
    if (k > 0) {
        sim_stragglers(g, mt, gt0, gt1, blame, NULL);
        double mean = msum / k;
        for (int32_t r = 0; r < g->n_ranks; r++) {
            double per = blame[r] / iters;
            if (per > REPLAY_STRAGGLER_SHARE * mean && per > REPLAY_STRAGGLER_MIN_US * 1000.0 &&
                !c->alone[r])
                c->alone[r] = DFG_APART_STRAGGLER;
        }
    }
    free(garr);
    free(blame);
    free(mend);
    return 0;
}

/* The classes into c: c->rep[r], c->weight[rep], c->apart[rep] (allocated by the caller,
 * n_ranks + 1 entries). Returns the number of classes or -1 (out of memory). */
static int32_t
make_classes(fold_ctx *c)
{
    const dfg *g = c->g;
    const replay *rp = c->rp;
    int32_t *rep = c->rep, *weight = c->weight;
    uint8_t *apart = c->apart;
    uint64_t *hash = malloc(((size_t)g->n_ranks + 1) * sizeof *hash);
    int32_t *reps = malloc(((size_t)g->n_ranks + 1) * sizeof *reps);
    int32_t n_cls = 0;
    if (!hash || !reps)
        n_cls = -1;
    for (int32_t r = 0; n_cls >= 0 && r < g->n_ranks; r++) {
        rep[r] = r;
        weight[r] = 0;
        apart[r] = DFG_APART_FIRST;
        if (r < rp->job.n_ranks && !rp->job.ranks[r].reader)
            continue; /* missing: no class */
        if (r < rp->job.n_ranks && rp->job.ranks[r].folded) {
            int32_t into = rep[rp->job.ranks[r].fold_rep]; /* folded while read (job.h) */
            if (c->alone[r] == DFG_APART_STRAGGLER)
                pr_warn("rank %d, folded while read into rank %d's class, is a straggler: "
                        "the report names its class's representative (--no-fold: every "
                        "straggler)",
                        r, into);
            rep[r] = into;
            weight[into]++;
            continue;
        }
        hash[r] = rank_hash(c, r);
        int why = n_cls ? DFG_APART_STRUCTURE : DFG_APART_FIRST, best = why;
        int32_t into = -1;
        for (int32_t i = 0; !c->alone[r] && into < 0 && i < n_cls; i++) {
            int32_t p = reps[i];
            if (c->alone[p] || hash[p] != hash[r])
                continue;
            if (alike(c, r, p, &why))
                into = p;
            else if (why == DFG_APART_TIMING)
                best = why;
        }
        if (into >= 0) {
            rep[r] = into;
            weight[into]++;
            continue;
        }
        weight[r] = 1;
        apart[r] = c->alone[r] ? c->alone[r] : (uint8_t)best;
        reps[n_cls++] = r;
    }
    free(hash);
    free(reps);
    return n_cls;
}

/* The job's sizes as the explicit build would have them: a rank folded while read
 * (job.h) was reduced, and counts the nodes and edges of the rank it is alike. */
static void
explicit_sizes(const fold_ctx *c, int64_t *nodes, int64_t *edges)
{
    const dfg *g = c->g;
    const job *j = &c->rp->job;
    int64_t *per = calloc((size_t)g->n_ranks + 1, sizeof *per);
    *nodes = dfg_live_nodes(g);
    *edges = g->n_edges;
    if (!per || !j->n_folded) {
        free(per);
        return;
    }
    for (int64_t e = 0; e < g->n_edges; e++)
        if (g->esrc[e] >= 0)
            per[dfg_rank(g, g->esrc[e])]++;
    for (int32_t r = 0; r < g->n_ranks && r < j->n_ranks; r++) {
        if (!j->ranks[r].folded)
            continue;
        int32_t p = j->ranks[r].fold_rep;
        *nodes += (c->rn.off[p + 1] - c->rn.off[p]) - (c->rn.off[r + 1] - c->rn.off[r]);
        *edges += per[p] - per[r];
    }
    free(per);
}

/* The classes of rp->graph (finalized here) into c->rep, c->weight and c->apart, and
 * c->rn, c's arrays allocated. Returns the number of classes or -1 (out of memory); the
 * caller frees c with fold_ctx_free. */
static int32_t
fold_classes(replay *rp, fold_ctx *c)
{
    dfg *g = &rp->graph;
    size_t nr = (size_t)g->n_ranks + 1;
    c->rp = rp;
    c->g = g;
    c->t0 = calloc(nr, sizeof *c->t0);
    c->tol = calloc(nr, sizeof *c->tol);
    c->alone = calloc(nr, 1);
    c->rep = malloc(nr * sizeof *c->rep);
    c->weight = malloc(nr * sizeof *c->weight);
    c->apart = malloc(nr);
    int rc = c->rep && c->weight && c->apart && c->t0 && c->tol && c->alone ? 0 : -1;
    if (rc == 0)
        rc = dfg_finalize(g);
    if (rc == 0)
        rc = rank_nodes_fill(g, &c->rn);
    if (rc == 0)
        rc = rank_figures(c);
    return rc == 0 ? make_classes(c) : -1;
}

static void
fold_ctx_free(fold_ctx *c)
{
    rank_nodes_free(&c->rn);
    free(c->t0);
    free(c->tol);
    free(c->alone);
    free(c->rep);
    free(c->weight);
    free(c->apart);
}

int
replay_fold(replay *rp)
{
    dfg *g = &rp->graph;
    fold_ctx c;
    memset(&c, 0, sizeof c);
    c.tolerance = FOLD_TOLERANCE;
    int32_t n_cls = fold_classes(rp, &c);
    int rc = n_cls < 0 ? -1 : 0;
    dfg folded;
    if (rc == 0 && n_cls == rp->job.n_present) {
        /* every rank its own class: the graph stays as it is and says so */
        g->rank_rep = c.rep;
        g->rank_weight = c.weight;
        g->rank_apart = c.apart;
        c.rep = c.weight = NULL;
        c.apart = NULL;
    } else if (rc == 0 && (rc = dfg_fold(&folded, g, c.rep, c.weight, c.apart)) == 0) {
        explicit_sizes(&c, &folded.job_nodes, &folded.job_edges);
        dfg_free(g);
        *g = folded;
        rc = dfg_finalize(g);
        pr_info("%d ranks folded into %d classes: %d of %lld nodes simulated", rp->job.n_present,
                n_cls, g->n_nodes, (long long)g->job_nodes);
    }
    fold_ctx_free(&c);
    return rc;
}

int32_t
replay_fold_copy(replay *rp, dfg *dst, double tolerance)
{
    fold_ctx c;
    memset(&c, 0, sizeof c);
    c.tolerance = tolerance > 0 ? tolerance : FOLD_TOLERANCE;
    int32_t n_cls = fold_classes(rp, &c);
    if (n_cls >= 0 && n_cls < rp->job.n_present) {
        if (dfg_fold(dst, &rp->graph, c.rep, c.weight, c.apart) != 0)
            n_cls = -1;
        else if (dfg_finalize(dst) != 0) {
            dfg_free(dst);
            n_cls = -1;
        } else
            explicit_sizes(&c, &dst->job_nodes, &dst->job_edges);
    }
    fold_ctx_free(&c);
    return n_cls;
}

const char *
replay_apart_name(int apart)
{
    static const char *names[] = {"first", "structure", "timing", "straggler", "unfoldable"};
    return apart >= 0 && apart <= DFG_APART_UNFOLDABLE ? names[apart] : "?";
}
